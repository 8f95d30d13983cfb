"""The lab's one-off analysis tools, each run as ``python -m lab.tools.NAME --help``."""
