"""Per-file extraction: tree-sitter tags queries → :class:`~llmc.graph.model.FileFacts`.

One generic engine serves every language: the query file ``queries/<lang>-tags.scm`` marks
definitions, calls, bases, imports and bindings; this module nests definitions into
qualified names by byte range and gives every reference the qualname of its innermost
enclosing definition. Nothing here recurses over the syntax tree, so deep nesting is safe,
and tree-sitter recovers from syntax errors, so a broken file yields what it can.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from llmc.graph.docs import extract_doc
from llmc.graph.langs import LangSpec, is_doc, spec_for
from llmc.graph.model import CLASS_KINDS, Binding, Call, Def, FileFacts, Import, Inherit
from llmc.tags import Also

log = logging.getLogger(__name__)

QUERY_DIR = Path(__file__).parent / "queries"
LITERAL = "#literal"  # binding type of a literal value (list, dict, string, number)
MAX_REFS = 50_000  # per kind and file; a generated file past this is cut, not fatal

_TYPE_PREFIX = re.compile(r"^(?:&\s*(?:'\w+\s+)?|\*+|mut\s+|dyn\s+|impl\s+|const\s+|\.\.\.)")
_TYPE_PATH = re.compile(r"[A-Za-z_$][\w$]*(?:\s*(?:\.|::)\s*[A-Za-z_$][\w$]*)*")
_TYPE_SEP = re.compile(r"\s*(?:\.|::)\s*")
_CALLEE = re.compile(r"[\w$.:]+(?:<[^>]*>)?")  # a binding's callee: a name, maybe generic
_TRAILING_GENERIC = re.compile(r"<[^>]*>$")
_SPACES = re.compile(r"\s+")
_TYPE_WRAPPERS = re.compile(
    r"^(?:typing\.)?(?:Optional|Final|ClassVar|Annotated|Type|type|Ref|RefCell|Rc|Arc|Box|"
    r"Option|Mutex|RwLock)\s*[\[<]"
)


@cache
def _parser(grammar: str):
    from tree_sitter_language_pack import get_parser

    return get_parser(grammar)


@cache
def _query(grammar: str, stem: str):
    import tree_sitter
    from tree_sitter_language_pack import get_language

    return tree_sitter.Query(get_language(grammar), _tags_source(stem))


@cache
def _tags_source(stem: str) -> str:
    return (QUERY_DIR / f"{stem}-tags.scm").read_text(encoding="utf-8")


def tags_walk(path: str, lang: str | None, category: str | None) -> Any:
    """The tags query of ``path``'s language, for the chunker to run in its own walk of the
    file's tree (:class:`llmc.tags.Also`); :func:`extract_file` then takes its matches
    from the chunker's ``trees`` instead of walking the tree again. None for a file
    without a tags query."""
    if is_doc(path, lang, category) and spec_for(path, None) is None:
        return None
    spec = spec_for(path, lang)
    if spec is None:
        return None
    return Also(spec.grammar, _tags_source(spec.query), _matches_key(spec))


def _matches_key(spec: LangSpec) -> tuple[str, str, str]:
    return ("tags", spec.grammar, spec.query)


def type_head(text: str) -> str:
    """The main named type of a type expression: ``Optional["pkg.Foo"]`` → ``pkg.Foo``.

    Strips references, pointers, generics, quotes, ``| None`` and common wrappers; returns a
    dotted path (``::`` becomes ``.``) or "" when nothing nameable is left.
    """
    t = text.strip().strip("\"'").strip()
    for _ in range(8):
        before = t
        t = _TYPE_PREFIX.sub("", t).strip()
        m = _TYPE_WRAPPERS.match(t)
        if m:
            t = t[m.end() :].strip().strip("\"'")
        if t == before:
            break
    parts = [p.strip() for p in t.split("|") if p.strip() and p.strip() != "None"]
    t = parts[0] if parts else ""
    m = _TYPE_PATH.match(t)
    if not m:
        return ""
    return _TYPE_SEP.sub(".", m.group(0))


def extract_file(
    path: str,
    text: str,
    lang: str | None,
    category: str | None,
    trees: Mapping[str, Any] | None = None,
) -> FileFacts:
    """Facts for one file; never raises for bad input (``facts.error`` says what failed).

    ``trees``: tree-sitter parses of exactly ``text`` by grammar name (the chunker's, see
    ``chunk_file``); the file's grammar's tree is used instead of parsing again, and the
    tags query's matches when the chunker's walk left them there (``tags_walk``)."""
    if is_doc(path, lang, category) and spec_for(path, None) is None:
        try:
            return extract_doc(path, text)
        except Exception as e:  # noqa: BLE001 - a doc we cannot read is a message
            log.debug("%s: doc extraction failed: %s", path, e)
            return FileFacts(path=path, lang="doc", category="doc", error=f"doc: {e}")
    spec = spec_for(path, lang)
    if spec is None:
        return FileFacts(path=path, lang=lang or "", category=category or "code")
    try:
        trees = trees or {}
        tree = trees.get(spec.grammar)
        matches = trees.get(_matches_key(spec)) if tree is not None else None
        return _extract_code(path, text, spec, tree, matches)
    except Exception as e:  # noqa: BLE001 - one bad file never stops the build
        log.warning("%s: graph extraction failed: %s", path, e)
        return FileFacts(path=path, lang=spec.name, category="code", error=f"extract: {e}")


class _Scopes:
    """Definitions nested by byte range; finds the innermost one around a position."""

    def __init__(self, raw: list[dict[str, Any]]):
        raw.sort(key=lambda d: (d["start"], -d["end"]))
        self.defs = raw
        self.starts = [d["start"] for d in raw]
        stack: list[dict[str, Any]] = []
        for d in raw:
            while stack and stack[-1]["end"] <= d["start"]:
                stack.pop()
            d["parent"] = stack[-1] if stack else None
            stack.append(d)

    def around(self, pos: int, exclude: Any = None) -> dict[str, Any] | None:
        i = bisect.bisect_right(self.starts, pos) - 1
        d = self.defs[i] if i >= 0 else None
        while d is not None and not (d["start"] <= pos < d["end"] and d is not exclude):
            d = d["parent"]
        return d


_REF_KEYS = (
    "reference.call",
    "reference.new",
    "reference.inherit",
    "import",
    "binding",
    "package",
    "export",
)
_KINDS: dict[tuple[str, ...], tuple[str | None, str | None]] = {}


def _match_kind(names: tuple[str, ...]) -> tuple[str | None, str | None]:
    """(the definition or scope capture, else None; the reference capture, else None) of a
    match with these capture names (a match's captures are never empty)."""
    main = next((k for k in names if k.startswith(("definition.", "scope."))), None)
    if main is not None:
        return main, None
    return None, next((k for k in _REF_KEYS if k in names), None)


def _extract_code(
    path: str, text: str, spec: LangSpec, tree: Any = None, matches: Any = None
) -> FileFacts:
    import tree_sitter

    src = text.encode("utf-8", "surrogatepass")
    if tree is None:
        tree = _parser(spec.grammar).parse(src)
    root = tree.root_node
    facts = FileFacts(path=path, lang=spec.name, category="code")
    facts.end_line = text.count("\n") + 1
    facts.test = spec.test_file(path)
    if root.has_error:
        facts.error = "syntax errors (partial extraction)"

    def node_text(n: Any) -> str:
        return src[n.start_byte : n.end_byte].decode("utf-8", "replace")

    if matches is None:
        matches = tree_sitter.QueryCursor(_query(spec.grammar, spec.query)).matches(root)
    raw_defs, refs = _split_matches(matches, node_text)
    scopes = _definitions(facts, raw_defs, spec, node_text)
    _references(facts, refs, scopes, spec, node_text)
    return facts


def _split_matches(
    matches: Any, node_text: Callable[[Any], str]
) -> tuple[list[dict[str, Any]], list[tuple[str, dict[str, list[Any]]]]]:
    """The query's matches as definitions (with their name, kind, return type and Go
    receiver) and references (their capture key and captures), in match order."""
    raw_defs: list[dict[str, Any]] = []
    refs: list[tuple[str, dict[str, list[Any]]]] = []
    for _, caps in matches:
        sig = tuple(caps)  # the capture names: a few dozen distinct ones per query
        kind = _KINDS.get(sig)
        if kind is None:
            kind = _KINDS[sig] = _match_kind(sig)
        main, ref = kind
        if main is not None:
            node = caps[main][0]
            name_node = caps.get("name", [None])[0]
            name = node_text(name_node) if name_node is not None else ""
            if main == "scope.impl":
                name = type_head(name).rsplit(".", 1)[-1]
            if not name or "\n" in name:
                continue
            ret = caps.get("returns", [None])[0]
            recv = caps.get("receiver.type", [None])[0]
            raw_defs.append(
                {
                    "start": node.start_byte,
                    "end": node.end_byte,
                    "name": name,
                    "kind": "impl" if main == "scope.impl" else main.split(".", 1)[1],
                    "node": node,
                    "returns": node_text(ret) if ret is not None else "",
                    "receiver": type_head(node_text(recv)) if recv is not None else "",
                }
            )
            continue
        if ref is not None:
            refs.append((ref, caps))
    return raw_defs, refs


def _definitions(
    facts: FileFacts, raw_defs: list[dict[str, Any]], spec: LangSpec,
    node_text: Callable[[Any], str],
) -> _Scopes:  # fmt: skip
    """Nest the definitions, name them (qualified, methods, tests) and add them to
    ``facts.defs``: overloads and redefinitions are one def, impl blocks come last."""
    # Two patterns may match one node (with and without a return type): keep the richer.
    unique: dict[tuple[int, int], dict[str, Any]] = {}
    for d in raw_defs:
        key = (d["start"], d["end"])
        if key not in unique or (d["returns"] and not unique[key]["returns"]):
            unique[key] = d
    scopes = _Scopes(list(unique.values()))
    # Qualified names, method kinds and test flags, in nesting order (parents first).
    seen: dict[str, dict[str, Any]] = {}
    for d in scopes.defs:
        parent = d["parent"]
        if d["receiver"] and parent is None:  # Go method: qualified by its receiver type
            d["qual"] = f"{d['receiver']}.{d['name']}"
        else:
            d["qual"] = f"{parent['qual']}.{d['name']}" if parent else d["name"]
        if d["kind"] == "function" and parent is not None and parent["kind"] in CLASS_KINDS:
            d["kind"] = "method"
        d["test"] = spec.test_def(d["node"], d["name"], d["kind"], facts.test, node_text)
        if d["kind"] == "impl":
            continue
        first = seen.get(d["qual"])
        if first is not None:  # overloads, property setters, redefinitions: one node
            first["last"] = max(first["last"], d["node"].end_point[0] + 1)
            continue
        d["last"] = d["node"].end_point[0] + 1
        seen[d["qual"]] = d
    for d in scopes.defs:
        if d["kind"] == "impl" or seen.get(d["qual"]) is not d:
            continue
        line = d["node"].start_point[0] + 1
        facts.defs.append(
            Def(d["name"], d["qual"], d["kind"], line, d["last"], d["returns"], d["test"])
        )
    # Impl blocks are not nodes but scopes; keep them so resolution can map them to types.
    facts.defs += [
        Def(d["name"], d["qual"], "impl", d["node"].start_point[0] + 1, d["node"].end_point[0] + 1)
        for d in scopes.defs
        if d["kind"] == "impl"
    ]
    return scopes


def _references(
    facts: FileFacts, refs: list[tuple[str, dict[str, list[Any]]]], scopes: _Scopes,
    spec: LangSpec, node_text: Callable[[Any], str],
) -> None:  # fmt: skip
    """Calls, bases, imports, bindings, the package and exports into ``facts``, each in
    the scope it sits in; at most ``MAX_REFS`` of each kind."""

    def scope_at(node: Any) -> dict[str, Any] | None:
        return scopes.around(node.start_byte)

    def qual(d: dict[str, Any] | None) -> str:
        return d["qual"] if d else ""

    def class_of(d: dict[str, Any] | None) -> dict[str, Any] | None:
        while d is not None and d["kind"] not in CLASS_KINDS:
            d = d["parent"]
        return d

    counts: dict[str, int] = {}
    for key, caps in refs:
        counts[key] = counts.get(key, 0) + 1
        if counts[key] > MAX_REFS:
            if counts[key] == MAX_REFS + 1:
                log.debug("%s: more than %d %s; the rest are ignored", facts.path, MAX_REFS, key)
            continue
        node = caps[key][0]
        line = node.start_point[0] + 1
        if key in ("reference.call", "reference.new"):
            call = _call(key, caps, node_text)
            if call is not None:
                name, receiver = call
                new = key == "reference.new"
                facts.calls.append(Call(qual(scope_at(node)), name, receiver, line, new))
        elif key == "reference.inherit":
            base = type_head(node_text(node))
            owner = scope_at(node)
            if base and owner is not None:
                facts.inherits.append(Inherit(owner["qual"], base, line))
        elif key == "import":
            scope = qual(scope_at(node))
            for imp in spec.parse_import(node, node_text):
                facts.imports.append(
                    Import(imp.module, imp.names, imp.alias, line, imp.level, imp.kind, scope)
                )
        elif key == "binding":
            _binding(facts, caps, node, scope_at(node), class_of, node_text, spec)
        elif key == "package":
            facts.module = node_text(node).strip()
        elif key == "export":
            _export(facts, node, node_text)


def _call(
    key: str, caps: dict[str, list[Any]], node_text: Callable[[Any], str]
) -> tuple[str, str] | None:
    """``(name, receiver)`` of a call or ``new`` (``a.b.C`` with no receiver capture:
    ``C`` on ``a.b``); a long receiver is ``?``, one over lines joined."""
    name_node = caps.get("name", [None])[0]
    if name_node is None:
        return None
    name = node_text(name_node)
    recv_node = caps.get("receiver", [None])[0]
    receiver = node_text(recv_node) if recv_node is not None else ""
    if key == "reference.new" and recv_node is None:
        head = type_head(name)
        receiver, _, name = head.rpartition(".")
    if not name:
        return None
    if len(receiver) > 200:
        receiver = "?"
    elif "\n" in receiver:
        receiver = re.sub(r"\s*\n\s*", "", receiver)
    return name, receiver


def _binding(facts, caps, node, scope, class_of, node_text, spec: LangSpec) -> None:
    name_node = caps.get("bind.name", [None])[0]
    if name_node is None:
        return
    name = node_text(name_node)
    type_node = caps.get("bind.type", [None])[0]
    call_node = caps.get("bind.call", [None])[0]
    btype = type_head(node_text(type_node)) if type_node is not None else ""
    if caps.get("bind.literal"):
        btype = LITERAL
    bcall = node_text(call_node) if call_node is not None else ""
    if call_node is not None and not _CALLEE.fullmatch(bcall.strip()):
        bcall = ""
    bcall = _TRAILING_GENERIC.sub("", bcall.strip())
    value_node = caps.get("bind.value", [None])[0]
    bvalue = _SPACES.sub("", node_text(value_node)) if value_node is not None else ""
    if bvalue == name:  # self.x = x is still worth keeping; x = x is not
        bvalue = bvalue if caps.get("bind.self") else ""
    if not btype and not bcall and not bvalue:
        return
    target_scope = scope
    self_node = caps.get("bind.self", [None])[0]
    if self_node is not None or caps.get("bind.attr"):
        if self_node is not None and node_text(self_node) not in spec.self_names:
            return
        target_scope = class_of(scope)
        if target_scope is None:
            return
    qual = target_scope["qual"] if target_scope else ""
    facts.bindings.append(Binding(qual, name, btype, bcall, node.start_point[0] + 1, bvalue))


def _export(facts: FileFacts, node: Any, node_text) -> None:
    if node.type == "export_statement":
        if node.child_by_field_name("source") is not None:
            return
        if not any(c.type == "default" for c in node.children):
            return
        decl = node.child_by_field_name("declaration")
        value = node.child_by_field_name("value")
        if decl is not None:
            name = decl.child_by_field_name("name")
            if name is not None:
                facts.default_export = node_text(name)
        elif value is not None and value.type == "identifier":
            facts.default_export = node_text(value)
        return
    right = node.child_by_field_name("right")  # module.exports = X
    if right is not None and right.type == "identifier":
        facts.default_export = node_text(right)
    elif right is not None and right.type in ("class", "function_expression", "function"):
        name = right.child_by_field_name("name")
        if name is not None:
            facts.default_export = node_text(name)


__all__ = ["extract_file", "tags_walk", "type_head"]
