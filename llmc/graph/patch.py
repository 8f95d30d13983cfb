"""A kept resolver brought up to date file by file: the one-file update, O(edit).

A build makes its tables (:mod:`llmc.graph.tables`) from every file's facts. When the
file list and the package layout are unchanged, an update instead takes the previous
run's resolver and *patches* it: each changed file's contributions are taken out of the
tables (its nodes, names, members, bindings, imports, language tables, the methods it
attaches to a type elsewhere and the bases it declares) and its new ones put in, every
entry that depends on the order of files (names in path order, the last or first file
that defines a dotted or package name, a type's members and bases gathered across files)
is recomputed from its contributing files, and the entries that differ before and after
are the ones that changed: no snapshot of the whole tables. A file whose owner lookups
(the type an impl block or Go method attaches to) read a changed entry is re-attached,
until nothing more changes. The files to resolve again are the changed ones and those
whose recorded reads meet a changed entry (:mod:`llmc.graph.incremental`).

Merged edges are patched too (:class:`EdgePatch`): the edges a re-resolved file produced
before and produces now are merged again from the files that contribute to them, in the
order a full build merges them, and so are the ``tests`` edges derived from them. The
random edit-sequence tests (incremental == full build) guard all of this.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING, Any

from llmc.graph.edges import EdgeTable
from llmc.graph.incremental import FileResult
from llmc.graph.model import (
    BY_NAME,
    CALLS,
    DEFINES,
    IMPORTS,
    SECTION,
    TESTS,
    UNRESOLVED,
    FileFacts,
    node_id,
)
from llmc.graph.tables import _index_file, file_keys, orphan_defs, value

if TYPE_CHECKING:  # the resolver, as its base class declares it (not resolve.py: a circle)
    from llmc.graph.lookup import Lookup

log = logging.getLogger(__name__)
_MISSING = object()


def patch_tables(r: Lookup, new: dict[str, FileFacts]) -> set[tuple]:
    """Replace the facts of the files in ``new`` (same file list) in ``r``'s tables;
    returns the keys of the table entries whose value changed."""
    old: dict[tuple, Any] = {}

    def remember(keys) -> None:
        for k in keys:
            if k not in old:
                old[k] = value(r, k)

    changed = sorted(new, key=r.order.__getitem__)
    kept_memo = r.memo.stash()  # lookups below see tables half patched
    for p in changed:
        remember(file_keys(r, p, r.facts[p]))
        remember(file_keys(r, p, new[p]))
        remember(_owner_keys(r, p))
    owners: set[str] = set()  # types whose members must be gathered again
    based: set[str] = set()  # types whose bases must be gathered again
    for p in changed:
        owners |= _unindex(r, p)
    for p in changed:
        r.facts[p] = new[p]
        _index_file(r, p, new[p])
    # names, qualified names and own members of every def that was or is in a changed file
    names = {k[1] for k in old if k[0] == "name"}
    quals = {k[1] for k in old if k[0] == "qual"}
    owners |= {k[1] for k in old if k[0] == "members"}
    path_order = _path_order(r)
    for n in names:
        _resort(r.by_name, n, path_order)
    for q in quals:
        _resort(r.by_qual, q, path_order)
    for rules in r.family_rules.values():
        keys = {k for k in old if k[0] == rules.table_key and rules.table_key}
        if keys:
            rules.refresh(keys)
    r.memo.forget_answers()
    # The types a file's impl methods and bases attach to are looked up in the tables:
    # again for the changed files, and for any file whose lookups read a changed entry.
    todo = list(changed)
    done: set[str] = set()
    while todo:
        for p in todo:
            remember(_owner_keys(r, p))
            o, b = _reattach(r, p)
            owners |= o
            based |= b
            done.add(p)
        for cid in owners:
            remember([("members", cid)])
        for cid in based:
            remember([("bases", cid)])
        _gather_members(r, owners)
        _gather_bases(r, based, remember)
        owners, based = set(), set()
        r.memo.forget_answers()
        diff = _diff(r, old)
        todo = [
            q for q, reads in r.owner_reads.items() if q not in done and not reads.isdisjoint(diff)
        ]
        todo.sort(key=r.order.__getitem__)
    keys = _diff(r, old)
    r.memo.restore(kept_memo)  # answers from before the patch, good unless they read keys
    r.memo.invalidate(keys)
    return keys


def _diff(r: Lookup, old: dict[tuple, Any]) -> set[tuple]:
    return {k for k, v in old.items() if value(r, k) != v}


def _path_order(r: Lookup) -> Any:
    order, nodes = r.order, r.nodes
    return lambda nid: order[nodes[nid]["path"]]


def _resort(index: dict[str, list[str]], key: str, by: Any) -> None:
    lst = index.get(key)
    if lst is None:
        return
    if not lst:
        del index[key]
        return
    lst.sort(key=by)  # stable: a file's own entries keep their order


def _owner_keys(r: Lookup, path: str) -> list[tuple]:
    """The entries a file's impl methods and bases attach to: the owners' members and
    bases, and its own inheritance entries."""
    keys: list[tuple] = [("inherits", path)]
    for owner, _ in r.orphans.get(path, ()):
        if owner is not None:
            keys.append(("members", owner))
    for owner, *_ in r.inherit_owners.get(path, ()):
        keys.append(("bases", owner))
    return keys


def _unindex(r: Lookup, path: str) -> set[str]:
    """Take ``path``'s own contributions out of the tables; the types whose members must
    be gathered again are returned (its bases go in :func:`_reattach`)."""
    f = r.facts[path]
    owners: set[str] = set()
    defs = r.defs.get(path, {})
    edges = r.table.edges
    for d in f.defs:
        if d.kind == "impl":
            continue
        nid = node_id(path, d.qualname)
        r.nodes.pop(nid, None)
        parent = d.qualname.rpartition(".")[0]
        if d.kind == SECTION:
            parent = d.qualname.rpartition(" > ")[0]
            edges.pop((node_id(path, parent) if parent in defs else path, nid, DEFINES), None)
            continue
        for index, k in ((r.by_name, d.name), (r.by_qual, d.qualname)):
            lst = index.get(k)
            if lst is not None and nid in lst:
                lst.remove(nid)
        if not parent:
            edges.pop((path, nid, DEFINES), None)
        elif parent in defs:
            edges.pop((node_id(path, parent), nid, DEFINES), None)
            owners.add(node_id(path, parent))
            r.members.pop(node_id(path, parent), None)
        else:
            edges.pop((path, nid, DEFINES), None)
    for owner, d in r.orphans.get(path, ()):
        if owner is not None:
            edges.pop((owner, node_id(path, d.qualname), DEFINES), None)
            owners.add(owner)
    r.bindings.pop(path, None)
    r.names.pop(path, None)
    r.wild.pop(path, None)
    r.reexports.pop(path, None)
    return owners


def _reattach(r: Lookup, path: str) -> tuple[set[str], set[str]]:
    """Look up again the types ``path``'s impl methods and declared bases attach to.
    Returns the types whose members, and whose bases, must be gathered again."""
    owners: set[str] = set()
    based: set[str] = set()
    edges = r.table.edges
    for owner, d in r.orphans.pop(path, ()):
        if owner is not None:
            edges.pop((owner, node_id(path, d.qualname), DEFINES), None)
            owners.add(owner)
    for owner, *_ in r.inherit_owners.pop(path, ()):
        based.add(owner)
    r.owner_reads.pop(path, None)
    r.memo.reads = set()
    orphans = []
    for owner, d in orphan_defs(r, path):
        orphans.append((owner, d))
        if owner is not None:
            r.table.add(owner, node_id(path, d.qualname), DEFINES)
            owners.add(owner)
    inherits = []
    for inh in r.facts[path].inherits:
        if r.def_kind(path, inh.scope) == "impl":
            owner = r.owner_class(path, inh.scope)
        else:
            owner = node_id(path, inh.scope) if inh.scope in r.defs[path] else None
        if owner is not None:
            inherits.append((owner, inh.scope, inh.base, inh.line))
            based.add(owner)
    if orphans:
        r.orphans[path] = orphans
    if inherits:
        r.inherit_owners[path] = inherits
    if r.memo.reads:
        r.owner_reads[path] = set(r.memo.reads)
    return owners, based


def _gather_members(r: Lookup, owners: set[str]) -> None:
    """Each type's members again: its own (in its file), then the methods attached from
    impl blocks and receivers in path order (the first one wins), as a build adds them."""
    if not owners:
        return
    attached: dict[str, list[tuple[str, str]]] = {}
    for p in sorted(r.orphans, key=r.order.__getitem__):
        for owner, d in r.orphans[p]:
            if owner in owners:
                attached.setdefault(owner, []).append((d.name, node_id(p, d.qualname)))
    for cid in owners:
        m: dict[str, str] = {}
        n = r.nodes.get(cid)
        if n is not None and n.get("qualname"):
            path, qual = n["path"], n["qualname"]
            defs = r.defs.get(path, {})
            if qual in defs:
                for d in r.facts[path].defs:
                    if d.kind == "impl" or d.kind == SECTION:
                        continue
                    if d.qualname.rpartition(".")[0] == qual:
                        m[d.name] = node_id(path, d.qualname)
        for name, nid in attached.get(cid, ()):
            m.setdefault(name, nid)
        if m:
            r.members[cid] = m
        else:
            r.members.pop(cid, None)


def _gather_bases(r: Lookup, based: set[str], remember: Any) -> None:
    """Each type's declared bases again, in path order, and the inheritance entries
    (owner, index among its bases, base, line) of every file that declares one."""
    if not based:
        return
    files: set[str] = set()
    for p, entries in r.inherit_owners.items():
        if any(e[0] in based for e in entries):
            files.add(p)
    for p, entries in r.inherit_entries.items():  # and those that no longer do
        if any(e[0] in based for e in entries):
            files.add(p)
    remember([("inherits", p) for p in files])
    for cid in based:
        r.raw_bases.pop(cid, None)
    for p in sorted(files, key=r.order.__getitem__):
        for owner, scope, base, line in r.inherit_owners.get(p, ()):
            if owner in based:
                r.raw_bases.setdefault(owner, []).append((p, scope, base, line))
    for p in files:
        entries = []
        seen: Counter = Counter()
        for owner, scope, base, line in r.inherit_owners.get(p, ()):
            raw = r.raw_bases.get(owner, [])
            i = raw.index((p, scope, base, line), seen[owner])
            seen[owner] = i + 1
            entries.append((owner, i, base, line))
        if entries:
            r.inherit_entries[p] = entries
        else:
            r.inherit_entries.pop(p, None)


# == merged edges ============================================================================
class EdgePatch:
    """What patching the merged edges needs, kept with the resolver: which files
    contribute to each edge (and ``?name`` node), and which ``tests`` edge each call or
    import edge feeds."""

    def __init__(self, r: Lookup, results: dict[str, FileResult]) -> None:
        self.contrib: dict[tuple, list[str]] = {}
        self.first: dict[str, tuple] = {}  # ?name id -> (phase, file rank, path, event)
        order = r.order
        for path, res in results.items():
            keys, uids = _keys(res)
            for k in keys:
                lst = self.contrib.get(k)
                if lst is None:
                    self.contrib[k] = [path]
                else:
                    lst.append(path)
            for uid, (phase, ev) in uids.items():
                pos = (phase, order[path], path, ev)
                cur = self.first.get(uid)
                if cur is None or pos[:2] < cur[:2]:
                    self.first[uid] = pos
        for lst in self.contrib.values():
            if len(lst) > 1:
                lst.sort(key=order.__getitem__)
        self.feeds: dict[tuple, tuple] = {}  # call/import edge -> the tests edge it feeds
        self.fed: dict[tuple, set[tuple]] = {}  # tests edge -> the edges feeding it
        self._tests_all(r)

    def _tests_all(self, r: Lookup) -> None:
        self.feeds.clear()
        self.fed.clear()
        tests = _test_paths(r)
        for key, e in r.table.edges.items():
            t = self._feed(r, key, e, tests)
            if t is not None:
                self.feeds[key] = t
                self.fed.setdefault(t, set()).add(key)

    def _feed(self, r: Lookup, key: tuple, e: dict, tests: set[str]) -> tuple | None:
        """The tests edge that edge ``key`` feeds (see ``EdgeTable.add_tests``)."""
        src, dst, etype = key
        if etype not in (CALLS, IMPORTS) or e["confidence"] < BY_NAME:
            return None
        if src.partition("::")[0] not in tests:
            return None
        tgt = r.nodes.get(dst)
        if tgt is None or tgt["kind"] == UNRESOLVED:
            return None
        if r.nodes.get(tgt["path"], {}).get("test"):
            return None
        test = r._test_source(src)
        if test is None or (test == dst):
            return None
        return (test, dst, TESTS)

    def apply(
        self,
        r: Lookup,
        old: dict[str, FileResult],
        new: dict[str, FileResult],
        tests_flag_changed: bool,
    ) -> None:
        """Merge again every edge that a re-resolved file's old or new results touch; an
        edge (or node) is written only when it comes out different."""
        order = r.order
        edges = r.table.edges
        affected: set[tuple] = set()
        new_uids: dict[str, dict[str, tuple]] = {}
        for path in new:
            before = old.get(path)
            keys_before = _keys(before)[0] if before is not None else set()
            keys_now, new_uids[path] = _keys(new[path])
            for k in keys_before - keys_now:
                lst = self.contrib.get(k)
                if lst is not None and path in lst:
                    lst.remove(path)
                    if not lst:
                        del self.contrib[k]
            for k in keys_now - keys_before:
                lst = self.contrib.setdefault(k, [])
                lst.append(path)
                if len(lst) > 1:
                    lst.sort(key=order.__getitem__)
            affected |= keys_before | keys_now
        # events of the affected edges from every file contributing to them
        per_file: dict[str, set[tuple]] = {}
        for k in affected:
            if k[0] == "?":
                self._unresolved(r, k[1], new, new_uids)
                continue
            for p in self.contrib.get(k, ()):
                per_file.setdefault(p, set()).add(k)
        gathered: dict[tuple, list[tuple]] = {}
        for p, keys in per_file.items():
            res = new[p] if p in new else r.results[p]
            rank = order[p]
            for phase, events in enumerate(res.phases):
                for i, ev in enumerate(events):
                    if len(ev) != 3 and ev[:3] in keys:
                        gathered.setdefault(ev[:3], []).append((phase, rank, i, ev))
        scratch = EdgeTable(r.nodes)
        for evs in gathered.values():
            for *_, ev in sorted(evs):
                scratch.add(*ev)
        refeed: set[tuple] = set()
        for k in affected:
            if k[0] == "?":
                continue
            if _set_edge(edges, k, scratch.edges.get(k)):
                refeed.add(k)
            elif k[0].partition("::")[0] in r.facts_changed:
                refeed.add(k)  # its test (the enclosing test function) may have moved
        if tests_flag_changed:  # a file became (or stopped being) a test file
            old_tests = {t: edges.get(t) for t in self.fed}
            for t in self.fed:
                edges.pop(t, None)
            self._tests_all(r)
            self._rebuild_tests(r, set(self.fed) | set(old_tests))
            return
        tests = _test_paths(r)
        dirty: set[tuple] = set()
        for k in refeed:
            t = self.feeds.pop(k, None)
            if t is not None:
                self.fed[t].discard(k)
                dirty.add(t)
            e = edges.get(k)
            t = self._feed(r, k, e, tests) if e is not None else None
            if t is not None:
                self.feeds[k] = t
                self.fed.setdefault(t, set()).add(k)
                dirty.add(t)
        self._rebuild_tests(r, dirty)

    def _unresolved(
        self, r: Lookup, uid: str, new: dict[str, FileResult], new_uids: dict[str, dict]
    ) -> None:
        """A ``?name`` node takes the first of its events in merge order (phase, then
        file); it goes when no file refers to it any more."""
        cur = self.first.get(uid)
        best = cur if cur is not None and cur[2] not in new else None
        if best is None:  # the first one may be gone: look at every file
            for p in self.contrib.get(("?", uid), ()):
                res = new[p] if p in new else r.results[p]
                hit = _first_event(res, uid)
                if hit is not None:
                    pos = (hit[0], r.order[p], p, hit[1])
                    if best is None or pos[:2] < best[:2]:
                        best = pos
        else:
            for p, uids in new_uids.items():
                hit = uids.get(uid)
                if hit is not None:
                    pos = (hit[0], r.order[p], p, hit[1])
                    if pos[:2] < best[:2]:
                        best = pos
        if best is None:
            self.first.pop(uid, None)
            if uid in r.nodes:
                r.nodes.pop(uid)
            return
        self.first[uid] = best
        _, name, cands = best[3]
        node = {"kind": UNRESOLVED, "name": name, "candidates": cands}
        if r.nodes.get(uid) != node:
            r.nodes[uid] = node

    def _rebuild_tests(self, r: Lookup, dirty: set[tuple]) -> None:
        """Merge each tests edge again from the edges feeding it: imports before calls
        (a build adds them in that order), so the ``via`` of the strongest is kept."""
        edges = r.table.edges
        scratch = EdgeTable(r.nodes)
        for t in dirty:
            keys = self.fed.get(t)
            if not keys:
                self.fed.pop(t, None)
            else:
                for k in sorted(keys, key=lambda k: (k[2] == CALLS, k)):
                    e = edges[k]
                    scratch.add(t[0], t[1], TESTS, e["confidence"], e.get("line", 0), k[2])
            _set_edge(edges, t, scratch.edges.get(t))


def _set_edge(edges: dict[tuple, dict], key: tuple, now: dict | None) -> bool:
    """Make ``edges[key]`` what a merge gave (None: no such edge); True when it changed."""
    if now == edges.get(key):
        return False
    if now is None:
        edges.pop(key, None)
    else:
        edges[key] = now
    return True


def _keys(res: FileResult) -> tuple[set[tuple], dict[str, tuple]]:
    """The edges and ``?name`` nodes a file's results touch, and for each ``?name`` its
    first event there (phase, event)."""
    keys: set[tuple] = set()
    uids: dict[str, tuple] = {}
    for phase, events in enumerate(res.phases):
        for ev in events:
            if len(ev) == 3:
                keys.add(("?", ev[0]))
                if ev[0] not in uids:
                    uids[ev[0]] = (phase, ev)
            else:
                keys.add(ev[:3])
    return keys, uids


def _first_event(res: FileResult, uid: str) -> tuple | None:
    for phase, events in enumerate(res.phases):
        for ev in events:
            if len(ev) == 3 and ev[0] == uid:
                return phase, ev
    return None


def _test_paths(r: Lookup) -> set[str]:
    return {p for p, f in r.facts.items() if f.test or any(d.test for d in f.defs)}


__all__ = ["EdgePatch", "patch_tables"]
