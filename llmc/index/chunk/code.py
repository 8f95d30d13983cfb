"""Code spans from a tree-sitter parse: definitions with their scope, signature and docs.

With a query file (``queries/<lang>.scm``) each captured definition is a span (classes
whole when short, else their header; members their own spans; leading comments,
decorators and attributes included) and the module-level rest ``block`` spans; with a
grammar but no query each named top-level definition-like node is a ``block``
(``chunk.py``'s docstring has the whole contract).
"""

from __future__ import annotations

import inspect
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from llmc.index.chunk.emit import Ctx, emit, join_header, remainder_blocks
from llmc.index.chunk.grammar import (
    COMMENT,
    QUERY_DIR,
    comment_query,
    definitions_query,
    defs_query,
    parse,
    too_deep_for_grammar,
)
from llmc.languages import grammar_name
from llmc.tags import Also  # shared with the graph (llmc.graph.extract), below both
from llmc.types import Span

if TYPE_CHECKING:  # pragma: no cover
    from tree_sitter import Node, Tree

log = logging.getLogger(__name__)

_SIGNATURE_CHARS = 300
_DOCSTRING_CHARS = 2000
_HEADER_DOC_CHARS = 300

# A definition node inside one of these (as its only node of that type) takes the
# wrapper's range: decorators, `export`, `template <...>`, `type (...)`.
_WRAPPERS = frozenset(
    {
        "decorated_definition",
        "export_statement",
        "template_declaration",
        "type_declaration",
        "ambient_declaration",
    }
)
# Wrappers that belong in the signature (decorators do not).
_SIGNATURE_WRAPPERS = frozenset({"export_statement", "template_declaration", "type_declaration"})
# Sibling nodes above a definition that belong to it.
_ATTRIBUTES = frozenset(
    {"attribute_item", "decorator", "attribute", "annotation", "marker_annotation"}
)
_FUNCTION_ROLES = frozenset({"function", "method", "constructor", "macro"})
_GENERIC_DEF = re.compile(
    r"function|method|class|struct|interface|trait|impl|module|object|enum|protocol|"
    r"extension|macro|declaration|definition|pair|table|section|rule|message|service|"
    r"resource|block"
)
_GENERIC_SKIP = re.compile(r"import|package|using|include|use_|require")
_NAME_TYPES = frozenset(
    {
        "identifier", "simple_identifier", "type_identifier", "name", "constant", "word",
        "bare_key", "quoted_key", "dotted_key", "property_identifier", "field_identifier",
    }
)  # fmt: skip
_QUALIFIED_NAME = re.compile(r"^[\w$]+(?:(?:\.|::|:)[\w$]+)+$")


def code_spans(
    ctx: Ctx, text: str, trees: dict[Any, Any] | None = None, also: Also | None = None
) -> list[Span]:
    """The spans of ``ctx``'s file, parsed with its language's grammar; with ``trees``, the
    parse is left there under its grammar's name for the graph's extraction to reuse, and
    with ``also`` (another query on the same grammar: the graph's tags), that query's
    matches too, from the same walk of the tree as the definitions (see ``Also``)."""
    if too_deep_for_grammar(ctx.lang, text):
        raise ValueError(f"{ctx.lang} nested too deep for the grammar")
    tree, src = parse(ctx.lang, text)
    grammar = grammar_name(ctx.lang) or ctx.lang
    if trees is not None:
        trees[grammar] = tree
    query = definitions_query(ctx.lang)
    if query is not None:
        if trees is None or also is None or also.grammar != grammar:
            also = None
        return _code_spans(ctx, tree, src, query, trees, also)
    return _generic_spans(ctx, tree, src)


def _end_row(node: Node) -> int:
    row, col = node.end_point
    if col == 0 and row > node.start_point[0]:
        return row - 1
    return row


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _starts_line(src: bytes, node: Node) -> bool:
    line_start = node.start_byte - node.start_point[1]
    return not src[max(0, line_start) : node.start_byte].strip()


def _ends_line(src: bytes, node: Node) -> bool:
    if node.end_point[1] == 0:
        return True
    nl = src.find(b"\n", node.end_byte)
    return not src[node.end_byte : nl if nl >= 0 else len(src)].strip()


def _comment_blocks(lang: str, root: Node, src: bytes) -> dict[int, int]:
    """end row -> start row of each comment that has its lines to itself."""
    query = comment_query(lang)
    if query is None:
        return {}
    import tree_sitter

    ends: dict[int, int] = {}
    for nodes in tree_sitter.QueryCursor(query).captures(root).values():
        for c in nodes:
            _add_comment(ends, src, c)
    return ends


def _add_comment(ends: dict[int, int], src: bytes, c: Node) -> None:
    if not (_starts_line(src, c) and _ends_line(src, c)):
        return
    end, start = _end_row(c), c.start_point[0]
    if start < ends.get(end, start + 1):
        ends[end] = start


def _is_comment(node: Node) -> bool:
    return "comment" in node.type


# ---------------------------------------------------------------------------- code


@dataclass(eq=False)
class _Def:
    node: Node
    role: str  # function | class | module | block
    name: str
    scope: list[str]
    parent: _Def | None = None
    children: list[_Def] = field(default_factory=list)
    qual: list[str] = field(default_factory=list)
    start: int = 0  # 0-based rows of the whole span (leading comments included)
    end: int = 0
    outer: Node | None = None
    comments: list[tuple[int, int]] = field(default_factory=list)


def _clean_name(raw: str, keep_generics: bool = False) -> str:
    name = " ".join(raw.split())
    name = name.strip("\"'`")
    if not keep_generics and not name.startswith("operator"):
        name = re.sub(r"^[*&\s]+|^(?:'\w+\s+|mut\s+|dyn\s+)+", "", name)
        for ch in "<[(":
            i = name.find(ch)
            if i > 0:
                name = name[:i]
    return name.strip()


def _split_name(raw: str) -> tuple[str, list[str]]:
    """``A::B<T>::f`` -> ("f", ["A", "B"])."""
    raw = " ".join(raw.split())
    parts = [p for p in raw.split("::")] if "::" in raw else [raw]
    cleaned = [_clean_name(p) for p in parts]
    cleaned = [p for p in cleaned if p]
    if not cleaned:
        return "", []
    return cleaned[-1], cleaned[:-1]


def _collect_defs(query: Any, root: Node) -> list[_Def]:
    import tree_sitter

    return _defs_of(tree_sitter.QueryCursor(query).matches(root))


def _defs_and_comments(
    query: Any, first: int, root: Node, src: bytes
) -> tuple[list[_Def], dict[int, int], list[Any]]:
    """``_collect_defs``, ``_comment_blocks`` and the ``Also`` query's matches (patterns
    below ``first``) from one walk with ``defs_query``."""
    import tree_sitter

    matches, ends, others = [], {}, []
    for m in tree_sitter.QueryCursor(query).matches(root):
        if m[0] < first:
            others.append(m)
            continue
        comments = m[1].get(COMMENT)
        if comments is None:
            matches.append(m)
            continue
        for c in comments:
            _add_comment(ends, src, c)
    return _defs_of(matches), ends, others


def _defs_of(matches: Any) -> list[_Def]:
    defs: dict[tuple[int, int], _Def] = {}
    for _, caps in matches:
        node, role = None, ""
        for cname, nodes in caps.items():
            if cname.startswith("definition.") and nodes:
                node, role = nodes[0], cname.split(".", 1)[1]
                break
        names = caps.get("name")
        if node is None or not names:
            continue
        key = (node.start_byte, node.end_byte)
        if key in defs:
            continue
        name, scope = _split_name(_text(names[0]))
        if not name or len(name) > 200:
            continue
        if caps.get("scope"):
            receiver = _split_name(_text(caps["scope"][0]))
            scope = [*receiver[1], receiver[0]] if receiver[0] else []
            # JS `Foo.prototype.bar = function`: a method of Foo, as a class would name it
            scope = [s.removesuffix(".prototype") for s in scope if s != "prototype"]
        if role in _FUNCTION_ROLES:
            role = "function"
        elif role != "module":
            role = "class"
        defs[key] = _Def(node=node, role=role, name=name, scope=scope)
    return sorted(defs.values(), key=lambda d: (d.node.start_byte, -d.node.end_byte))


def _nest(defs: list[_Def]) -> list[_Def]:
    """Link parents/children; return the top-level defs, nested-in-function ones dropped."""
    top: list[_Def] = []
    stack: list[_Def] = []
    for d in defs:
        while stack and stack[-1].node.end_byte <= d.node.start_byte:
            stack.pop()
        parent = stack[-1] if stack else None
        stack.append(d)
        if parent is None:
            d.qual = [*d.scope, d.name]
            top.append(d)
        elif parent.role in ("class", "module") and parent.qual:
            d.parent = parent
            d.qual = [*parent.qual, *d.scope, d.name]
            parent.children.append(d)
        # else: inside a function (or a dropped def): part of that span, no qual
    return top


def _outer(node: Node) -> Node:
    n = node
    while True:
        p = n.parent
        if p is None or p.type not in _WRAPPERS:
            return n
        if sum(1 for c in p.named_children if c.type == n.type) != 1:
            return n
        n = p


def _place(d: _Def, src: bytes, comment_ends: dict[int, int], floor: int) -> None:
    """Set d.start/d.end/d.outer: the wrapper range plus leading comments and attributes."""
    outer = _outer(d.node)
    d.outer = outer
    start, end = outer.start_point[0], _end_row(outer)
    attr_ends: dict[int, int] = {}
    sib = outer.prev_named_sibling
    while sib is not None and (_is_comment(sib) or sib.type in _ATTRIBUTES):
        if sib.type in _ATTRIBUTES and _starts_line(src, sib):
            attr_ends.setdefault(_end_row(sib), sib.start_point[0])
        sib = sib.prev_named_sibling
    if sib is not None:
        floor = max(floor, _end_row(sib) + 1)
    while start - 1 >= floor:
        row = start - 1
        if row in comment_ends and comment_ends[row] >= floor:
            d.comments.append((comment_ends[row], row))
            start = comment_ends[row]
        elif row in attr_ends and attr_ends[row] >= floor:
            start = attr_ends[row]
        else:
            break
    d.comments.reverse()
    d.start, d.end = start, max(start, end)


def _find_body(node: Node) -> Node | None:
    body = node.child_by_field_name("body")
    if body is not None:
        return body
    frontier = list(node.named_children)
    for _ in range(3):
        nxt = []
        for c in frontier:
            b = c.child_by_field_name("body")
            if b is not None:
                return b
            nxt.extend(c.named_children)
        frontier = nxt[:50]
    return None


def _signature(d: _Def, src: bytes) -> str:
    node = d.node
    outer = d.outer if d.outer is not None else node
    sig_node = outer if outer.type in _SIGNATURE_WRAPPERS else node
    start = sig_node.start_byte
    body = _find_body(node)
    if body is not None and body.start_byte > start:
        end = body.start_byte
    else:
        nl = src.find(b"\n", start)
        end = nl if 0 <= nl < node.end_byte else node.end_byte
    for c in node.children:
        if start <= c.start_byte < end and _is_comment(c):
            end = c.start_byte
            break
    return _tidy_signature(src[start:end].decode("utf-8", "replace"))


def _tidy_signature(raw: str) -> str:
    sig = " ".join(raw.split())
    sig = re.sub(r"\s*(?:\{|:|=>|=|;|\bdo)$", "", sig).strip()
    return sig[:_SIGNATURE_CHARS]


_STRING_PREFIX = re.compile(r"^[rRuUbBfF]{0,2}(\"\"\"|'''|\"|')")


def _python_docstring(node: Node) -> str:
    body = node.child_by_field_name("body")
    if body is None or body.named_child_count == 0:
        return ""
    first = body.named_children[0]
    if first.type == "expression_statement" and first.named_child_count == 1:
        first = first.named_children[0]
    if first.type != "string":
        return ""
    raw = _text(first)
    m = _STRING_PREFIX.match(raw)
    if not m:
        return ""
    q = m.group(1)
    inner = raw[m.end() :]
    if inner.endswith(q):
        inner = inner[: -len(q)]
    return inspect.cleandoc(inner)


_COMMENT_MARK = re.compile(r"^(?:/\*+!?|\*+/|//[/!]?|#+!?|--+|\*+(?!/)|;+|<!--)\s?")


def _comment_text(ctx: Ctx, blocks: list[tuple[int, int]]) -> str:
    out = []
    for s, e in blocks:
        for line in ctx.lines[s : e + 1]:
            t = _COMMENT_MARK.sub("", line.strip(), count=1)
            t = re.sub(r"\s*(?:\*+/|-->)\s*$", "", t)
            out.append(t.rstrip())
    text = inspect.cleandoc("\n".join(out))
    if ctx.lang == "csharp":
        text = re.sub(r"</?\w+[^>]*>", "", text).strip()
    return text


def _docstring(ctx: Ctx, d: _Def) -> str:
    doc = _python_docstring(d.node) if ctx.lang == "python" else ""
    if not doc and d.comments:
        doc = _comment_text(ctx, d.comments)
    return doc[:_DOCSTRING_CHARS]


def _header_doc(doc: str) -> str:
    para = doc.strip().split("\n\n", 1)[0]
    lines = [line.strip() for line in para.splitlines() if line.strip()][:4]
    return "\n".join(lines)[:_HEADER_DOC_CHARS]


def _emit_def(out: list[Span], ctx: Ctx, d: _Def, src: bytes) -> None:
    qualname = ".".join(d.qual)
    enclosing = ".".join(d.qual[:-1])
    context = f"in {enclosing}" if enclosing else f"in module {ctx.stem}"
    signature = _signature(d, src)
    doc = _docstring(ctx, d)
    header = join_header(ctx.path, context, signature, _header_doc(doc))
    if d.role == "function":
        in_container = d.parent is not None or bool(d.scope)
        kind = "method" if in_container else "function"
        emit(out, ctx, kind, d.name, qualname, d.start + 1, d.end + 1, header, signature, doc)
        return
    kind = "module" if d.role == "module" else "class"
    members = d.children
    if not members or d.end - d.start + 1 <= ctx.max_lines:
        emit(out, ctx, kind, d.name, qualname, d.start + 1, d.end + 1, header, signature, doc)
    else:
        first = min(m.start for m in members)
        s, e = d.start, first - 1
        while e > s and not ctx.lines[e].strip():
            e -= 1
        e = max(e, s)  # a member on the header line: the header line still gets a span
        emit(out, ctx, kind, d.name, qualname, s + 1, e + 1, header, signature, doc)
        gap_header = join_header(ctx.path, f"in {qualname}")
        covered = [(m.start, m.end) for m in members]
        remainder_blocks(out, ctx, first, d.end, covered, d.name, qualname, gap_header)
    for m in members:
        _emit_def(out, ctx, m, src)


def _place_all(defs: list[_Def], src: bytes, comment_ends: dict[int, int], floor: int) -> None:
    for d in defs:
        _place(d, src, comment_ends, floor)
        if d.children:
            inner_floor = (d.outer or d.node).start_point[0] + 1
            _place_all(d.children, src, comment_ends, inner_floor)


def _code_spans(
    ctx: Ctx, tree: Tree, src: bytes, query: Any, trees: dict | None, also: Also | None
) -> list[Span]:
    root = tree.root_node
    combined = defs_query(ctx.lang, also.source if also is not None else "")
    if combined is not None:
        defs, comment_ends, others = _defs_and_comments(*combined, root, src)
        if also is not None and trees is not None:
            trees[also.key] = others
    else:
        defs, comment_ends = _collect_defs(query, root), _comment_blocks(ctx.lang, root, src)
    top = _nest(defs)
    _place_all(top, src, comment_ends, 0)
    out: list[Span] = []
    for d in top:
        _emit_def(out, ctx, d, src)
    covered = [(d.start, d.end) for d in top]
    module_header = join_header(ctx.path, f"module {ctx.stem}")
    remainder_blocks(out, ctx, 0, len(ctx.lines) - 1, covered, ctx.stem, ctx.stem, module_header)
    return _ordered(out)


def _ordered(spans: list[Span]) -> list[Span]:
    return sorted(spans, key=lambda s: (s.start_line, -s.end_line, s.part))


# ---------------------------------------------------------------------------- generic


def _generic_name(node: Node) -> str:
    cand = None
    for fname in ("name", "key"):
        cand = node.child_by_field_name(fname)
        if cand is not None:
            break
    if cand is None:
        for c in node.named_children[:4]:
            if c.type in _NAME_TYPES:
                cand = c
                break
    if cand is None or cand.end_point[0] != cand.start_point[0]:
        return ""
    name = " ".join(_text(cand).split()).strip("\"'`")
    return name if 0 < len(name) <= 80 else ""


def _generic_spans(ctx: Ctx, tree: Tree, src: bytes) -> list[Span]:
    root = tree.root_node
    nodes = [n for n in root.named_children if not _is_comment(n)]
    for _ in range(8):
        if len(nodes) != 1:
            break
        only = nodes[0]
        if _end_row(only) - only.start_point[0] + 1 <= ctx.max_lines or not only.named_children:
            break
        nodes = [n for n in only.named_children if not _is_comment(n)]
    comment_ends = _comment_blocks(ctx.lang, root, src)
    out: list[Span] = []
    covered = []
    for node in nodes:
        if not _GENERIC_DEF.search(node.type) or _GENERIC_SKIP.search(node.type):
            continue
        name = _generic_name(node)
        if not name:
            continue
        symbol, qualname = name, name
        if _QUALIFIED_NAME.match(name):
            parts = [p for p in re.split(r"::|[.:]", name) if p]
            symbol, qualname = parts[-1], ".".join(parts)
        d = _Def(node=node, role="block", name=symbol, scope=[])
        _place(d, src, comment_ends, 0)
        covered.append((d.start, d.end))
        first = ctx.lines[d.outer.start_point[0]] if d.outer is not None else ""
        signature = _tidy_signature(first)
        doc = _comment_text(ctx, d.comments)[:_DOCSTRING_CHARS] if d.comments else ""
        header = join_header(ctx.path, f"in module {ctx.stem}", signature, _header_doc(doc))
        emit(out, ctx, "block", symbol, qualname, d.start + 1, d.end + 1, header, signature, doc)
    module_header = join_header(ctx.path, f"module {ctx.stem}")
    remainder_blocks(out, ctx, 0, len(ctx.lines) - 1, covered, ctx.stem, ctx.stem, module_header)
    return _ordered(out)


__all__ = ["QUERY_DIR", "Also", "code_spans"]
