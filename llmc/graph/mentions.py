"""Doc mentions: what a doc section's inline code, role, autodoc directive, link or path
names in the repository (a definition or a file), with a confidence."""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING

from llmc.graph.model import BY_NAME, EXACT, INFERRED, MENTIONS, SECTION, FileFacts, node_id

if TYPE_CHECKING:
    from llmc.graph.edges import EdgeSink
    from llmc.graph.lookup import Lookup

_MENTION_EXTS = re.compile(
    r"\.(py|pyi|js|jsx|mjs|ts|tsx|go|rs|java|md|rst|toml|json|ya?ml|cfg|txt)$"
)
_HOSTED = re.compile(
    r"^https?://(?:github\.com|gitlab\.com)/[^/]+/[^/]+/(?:-/)?(?:blob|raw)/[^/]+/(.+)$"
)
_PROSE_WORDS = frozenset(
    """true false none null self this main test tests data name path file text type list dict
    index search build update query value values items error errors config init setup run
    start stop open close read write help info version default""".split()
)
Answer = tuple[str | None, str, float]  # (status or None: not a reference, node, confidence)


def record_mentions(r: Lookup, path: str, f: FileFacts, out: EdgeSink) -> None:
    if f.category != "doc" and f.lang != "doc":
        return
    defs = r.defs_of(path)
    for m in f.mentions:
        src = node_id(path, m.scope) if m.scope in defs else path
        status, target, conf = _mention(r, path, m.text, m.kind)
        if status is None:
            continue
        out.count(MENTIONS, status)
        if target:
            out.edge(src, target, MENTIONS, conf, m.line, m.kind)


def _mention(r: Lookup, doc: str, text: str, kind: str) -> Answer:
    text = text.strip().strip("~!").strip()
    if kind in ("link", "path") or "/" in text or _MENTION_EXTS.search(text):
        return _mention_path(r, doc, text)
    sym = re.sub(r"\(.*\)$", "", text).strip().lstrip("@")
    sym = sym.replace("::", ".").replace("#", ".")
    if not re.fullmatch(r"[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*", sym):
        return None, "", 0.0
    for rules in r.family_rules.values():
        hit = rules.fqn(sym)
        if hit:
            return "resolved", hit, EXACT
    for rules in r.family_rules.values():
        mod_files = rules.mention_module(sym)
        if len(mod_files) == 1 and "." in sym:
            return "resolved", mod_files[0], EXACT
    hits = r.qualified(sym)
    if "." in sym and not hits:
        parts = sym.split(".")
        for i in range(1, len(parts) - 1):
            hits = r.qualified(".".join(parts[i:]))
            if hits:
                break
    if not hits and "." not in sym:
        if len(sym) < 4 or sym.lower() in _PROSE_WORDS:
            return None, "", 0.0
        # A bare word names a top-level function or class; a method needs its class.
        hits = [h for h in r.named(sym) if r.nodes[h].get("qualname") == sym]
    hits = [h for h in hits if r.nodes[h]["kind"] != SECTION]
    if len(hits) > 1 and "." not in sym:  # `print`: the one top-level def, if one
        top = [h for h in hits if r.nodes[h].get("qualname") == sym]
        if len(top) == 1:
            return "resolved", top[0], BY_NAME
    if len(hits) == 1:
        return "resolved", hits[0], EXACT if kind in ("autodoc", "role") else INFERRED
    if not hits:
        head = sym.split(".")[0]
        if kind in ("autodoc", "role") and any(
            rules.known_top(head) for rules in r.family_rules.values()
        ):
            return "unresolved", "", 0.0
        return None, "", 0.0
    return "unresolved", "", 0.0


def _is_file(r: Lookup, path: str) -> bool:
    return path in r.facts  # the file list is part of the module signature


def _mention_path(r: Lookup, doc: str, text: str) -> Answer:
    hosted = _HOSTED.match(text)  # a link to this file on GitHub / GitLab
    if hosted:
        path = hosted.group(1).split("#")[0]
        if _is_file(r, path):
            return "resolved", path, INFERRED
        return None, "", 0.0
    if re.match(r"^[a-z][a-z0-9+.-]*:", text) or text.startswith(("#", "//")):
        return None, "", 0.0
    target, _, anchor = text.partition("#")
    target = target.split("?")[0].strip()
    if not target or target.endswith("/") or any(c in target for c in "*<>{}$"):
        return None, "", 0.0  # a directory or a pattern: nothing to point at
    target = re.sub(r"^(?:\./)+", "", target)
    base = posixpath.dirname(doc)
    cands = [
        posixpath.normpath(posixpath.join(base, target)),
        posixpath.normpath(target.lstrip("/")),
    ]
    dirs = r.mods.dirs
    for c in cands:
        if _is_file(r, c):
            m = re.match(r"L(\d+)", anchor)
            if m:
                inner = node_at(r, c, int(m.group(1)))
                if inner:
                    return "resolved", inner, EXACT
            return "resolved", c, EXACT
    if posixpath.normpath(posixpath.join(base, target)) in dirs or target in dirs:
        return None, "", 0.0
    tail = re.sub(r"^(?:\.\./)+", "", target)
    suffix = r.mods.ending_with(tail)
    if len(suffix) == 1:
        return "resolved", suffix[0], INFERRED
    if tail.split("/")[0] in dirs or len(suffix) > 1:
        return "unresolved", "", 0.0
    return None, "", 0.0


def node_at(r: Lookup, path: str, line: int) -> str | None:
    """The innermost definition of ``path`` around ``line``."""
    r.read(("lines", path))
    best, size = None, None
    for q, d in r.defs_of(path).items():
        if d.start_line <= line <= d.end_line and (
            size is None or d.end_line - d.start_line < size
        ):
            best, size = node_id(path, q), d.end_line - d.start_line
    return best


__all__ = ["node_at", "record_mentions"]
