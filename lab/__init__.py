"""llmc's lab: the cross-project evaluation protocol, its question sets and reports, and the
training of every model llmc ships. It lives beside the product, outside the wheel, and
reaches llmc only through llmc's modules (never the other way: tests/test_import_contract.py).
Run it from a checkout: ``python -m lab --help``."""
