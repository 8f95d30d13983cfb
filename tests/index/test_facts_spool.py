"""The graph facts of an index run, spooled to a file and read back by path."""

from __future__ import annotations

import pickle

from llmc.index.facts_spool import SPOOL_FILE, FactsSpool


def test_spooled_facts_read_back_by_path_and_pickle_as_a_reference(tmp_path):
    spool = FactsSpool(tmp_path)
    spool.add("a.py", b'{"a":1}')
    spool.add("b.py", b"")
    spool.add("c/d.py", b'{"d":[1,2]}')
    facts = spool.facts()
    assert dict(facts) == {"a.py": b'{"a":1}', "b.py": b"", "c/d.py": b'{"d":[1,2]}'}
    assert facts.get("missing") is None
    assert (tmp_path / SPOOL_FILE).stat().st_mode & 0o777 == 0o600
    blob = pickle.dumps(facts)
    assert b'{"d":[1,2]}' not in blob  # offsets, not the facts
    assert dict(pickle.loads(blob)) == dict(facts)
    facts.close()
    spool.remove()
    assert not (tmp_path / SPOOL_FILE).exists()


def test_a_new_spool_truncates_an_old_one(tmp_path):
    old = FactsSpool(tmp_path)
    old.add("a.py", b"x" * 100)
    old.facts()
    new = FactsSpool(tmp_path)
    new.add("b.py", b"y")
    assert dict(new.facts()) == {"b.py": b"y"}
    assert (tmp_path / SPOOL_FILE).stat().st_size == 1
