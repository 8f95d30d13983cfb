"""Per-language knowledge that is not a tree-sitter query: import statements, test files,
names that need no resolution (builtins), and how ``self`` / ``super`` are spelled.

The queries (``queries/<lang>-tags.scm``) find definitions, calls, bases and bindings; the
functions here turn an import statement node into :class:`~llmc.graph.model.Import` records.
A new language is a ``LangSpec`` entry plus a query file.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from llmc.graph.model import Import
from llmc.graph.rules.base import LangRules
from llmc.graph.rules.go import GoRules
from llmc.graph.rules.java import JavaRules
from llmc.graph.rules.javascript import JavaScriptRules
from llmc.graph.rules.python import PythonRules
from llmc.graph.rules.rust import RustRules
from llmc.languages import DOC_LANGS, extension_language, grammar_name

Text = Callable[[Any], str]


@dataclass(frozen=True)
class LangSpec:
    name: str  # llmc language id (llmc.languages)
    query: str  # stem of queries/<query>-tags.scm
    parse_import: Callable[[Any, Text], list[Import]]
    test_file: Callable[[str], bool]
    test_def: Callable[[Any, str, str, bool, Text], bool]
    rules: type[LangRules] = LangRules  # how the family resolves names (llmc.graph.rules)
    self_names: frozenset[str] = frozenset()
    class_names: frozenset[str] = frozenset()  # the self names that denote the class itself
    super_names: frozenset[str] = frozenset()
    # Bare names inside a class body may be its members (Java's implicit ``this``).
    implicit_this: bool = False
    builtins: frozenset[str] = frozenset()

    @property
    def family(self) -> str:
        """Languages that share resolution rules (javascript, typescript, tsx)."""
        return self.rules.family

    @property
    def grammar(self) -> str:
        """The tree-sitter-language-pack grammar (the index's name for it)."""
        return grammar_name(self.name) or self.name


def _string_value(node: Any, text: Text) -> str:
    raw = text(node).strip()
    if len(raw) >= 2 and raw[0] in "\"'`" and raw[-1] == raw[0]:
        return raw[1:-1]
    return raw


# -- Python -------------------------------------------------------------------------------


def _py_imports(node: Any, text: Text) -> list[Import]:
    line = node.start_point[0] + 1
    if node.type == "import_statement":
        out = []
        for child in node.named_children:
            if child.type == "dotted_name":
                out.append(Import(text(child), [], "", line))
            elif child.type == "aliased_import":
                name = child.child_by_field_name("name")
                alias = child.child_by_field_name("alias")
                if name is not None:
                    out.append(Import(text(name), [], text(alias) if alias else "", line))
        return out
    module_node = node.child_by_field_name("module_name")
    level, module = 0, ""
    if module_node is not None:
        if module_node.type == "relative_import":
            for child in module_node.named_children:
                if child.type == "import_prefix":
                    level = text(child).count(".")
                elif child.type == "dotted_name":
                    module = text(child)
        else:
            module = text(module_node)
    names: list[list[str]] = []
    for child in node.named_children:
        if child == module_node:
            continue
        if child.type == "wildcard_import":
            names.append(["*", ""])
        elif child.type == "dotted_name":
            names.append([text(child), text(child)])
        elif child.type == "aliased_import":
            name = child.child_by_field_name("name")
            alias = child.child_by_field_name("alias")
            if name is not None:
                names.append([text(name), text(alias) if alias else text(name)])
    return [Import(module, names, "", line, level)]


def _py_test_file(path: str) -> bool:
    p = PurePosixPath(path)
    return (
        p.name.startswith("test_")
        or p.name.endswith("_test.py")
        or p.name == "conftest.py"
        or any(part in ("tests", "test", "testing") for part in p.parts[:-1])
    )


def _py_test_def(node: Any, name: str, kind: str, file_test: bool, text: Text) -> bool:
    if not file_test:
        return False
    if kind in ("function", "method"):
        return name.startswith("test")
    return kind == "class" and name.startswith("Test")


# -- JavaScript / TypeScript --------------------------------------------------------------


def _js_imports(node: Any, text: Text) -> list[Import]:
    line = node.start_point[0] + 1
    if node.type == "variable_declarator":  # const x = require("./x")
        value = node.child_by_field_name("value")
        args = value.child_by_field_name("arguments") if value is not None else None
        target = node.child_by_field_name("name")
        if args is None or not args.named_children or target is None:
            return []
        module = _string_value(args.named_children[0], text)
        if target.type == "identifier":
            return [Import(module, [], text(target), line, kind="require")]
        names = []
        for child in target.named_children:
            if child.type == "shorthand_property_identifier_pattern":
                names.append([text(child), text(child)])
            elif child.type == "pair_pattern":
                key = child.child_by_field_name("key")
                val = child.child_by_field_name("value")
                if key is not None and val is not None:
                    names.append([text(key), text(val)])
        return [Import(module, names, "", line, kind="require")]
    source = node.child_by_field_name("source")
    if source is None:
        return []
    module = _string_value(source, text)
    names: list[list[str]] = []
    alias = ""
    kind = "reexport" if node.type == "export_statement" else "import"
    for child in node.named_children:
        if child.type == "import_clause":
            for part in child.named_children:
                if part.type == "identifier":
                    names.append(["default", text(part)])
                elif part.type == "namespace_import":
                    ids = [c for c in part.named_children if c.type == "identifier"]
                    if ids:
                        alias = text(ids[0])
                elif part.type == "named_imports":
                    for spec in part.named_children:
                        if spec.type != "import_specifier":
                            continue
                        name = spec.child_by_field_name("name")
                        al = spec.child_by_field_name("alias")
                        if name is not None:
                            names.append([text(name), text(al) if al else text(name)])
        elif child.type == "export_clause":
            for spec in child.named_children:
                if spec.type != "export_specifier":
                    continue
                name = spec.child_by_field_name("name")
                al = spec.child_by_field_name("alias")
                if name is not None:
                    names.append([text(name), text(al) if al else text(name)])
        elif child.type == "namespace_export":
            ids = [c for c in child.named_children if c.type == "identifier"]
            names.append(["*", text(ids[0]) if ids else ""])
    if kind == "reexport" and not names:
        names.append(["*", ""])
    return [Import(module, names, alias, line, kind=kind)]


def _js_test_file(path: str) -> bool:
    p = PurePosixPath(path)
    return (
        ".test." in p.name
        or ".spec." in p.name
        or any(part in ("__tests__", "test", "tests") for part in p.parts[:-1])
    )


def _js_test_def(node: Any, name: str, kind: str, file_test: bool, text: Text) -> bool:
    return False  # tests are anonymous callbacks; the test file is the test node


# -- Go -------------------------------------------------------------------------------------


def _go_imports(node: Any, text: Text) -> list[Import]:
    path = node.child_by_field_name("path")
    if path is None:
        return []
    name = node.child_by_field_name("name")
    return [
        Import(_string_value(path, text), [], text(name) if name else "", node.start_point[0] + 1)
    ]


def _go_test_file(path: str) -> bool:
    return path.endswith("_test.go")


def _go_test_def(node: Any, name: str, kind: str, file_test: bool, text: Text) -> bool:
    return file_test and kind == "function" and name.startswith(("Test", "Benchmark", "Fuzz"))


# -- Rust -----------------------------------------------------------------------------------


def _rust_use_leaves(node: Any, prefix: list[str], text: Text, out: list) -> None:
    t = node.type
    if t in ("identifier", "crate", "self", "super", "metavariable"):
        out.append((prefix + [text(node)], ""))
    elif t == "scoped_identifier":
        out.append((prefix + _rust_segments(text(node)), ""))
    elif t == "use_as_clause":
        path = node.child_by_field_name("path")
        alias = node.child_by_field_name("alias")
        if path is not None:
            out.append((prefix + _rust_segments(text(path)), text(alias) if alias else ""))
    elif t == "use_wildcard":
        inner = [c for c in node.named_children]
        segs = _rust_segments(text(inner[0])) if inner else []
        out.append((prefix + segs + ["*"], ""))
    elif t == "scoped_use_list":
        path = node.child_by_field_name("path")
        lst = node.child_by_field_name("list")
        segs = prefix + (_rust_segments(text(path)) if path is not None else [])
        if lst is not None:
            for child in lst.named_children:
                _rust_use_leaves(child, segs, text, out)
    elif t == "use_list":
        for child in node.named_children:
            _rust_use_leaves(child, prefix, text, out)


def _rust_segments(path: str) -> list[str]:
    return [s.strip() for s in path.split("::") if s.strip()]


def _rust_imports(node: Any, text: Text) -> list[Import]:
    line = node.start_point[0] + 1
    if node.type == "mod_item":
        name = node.child_by_field_name("name")
        return [Import(text(name), [], "", line, kind="mod")] if name is not None else []
    arg = node.child_by_field_name("argument")
    if arg is None:
        return []
    leaves: list = []
    _rust_use_leaves(arg, [], text, leaves)
    out = []
    for segs, alias in leaves:
        if not segs:
            continue
        if segs[-1] == "self" and len(segs) > 1:  # use a::b::{self} binds b
            segs = segs[:-1]
            out.append(Import("::".join(segs[:-1]), [[segs[-1], alias or segs[-1]]], "", line))
        elif segs[-1] == "*":
            out.append(Import("::".join(segs[:-1]), [["*", ""]], "", line))
        else:
            out.append(Import("::".join(segs[:-1]), [[segs[-1], alias or segs[-1]]], "", line))
    return out


def _rust_test_file(path: str) -> bool:
    p = PurePosixPath(path)
    return "tests" in p.parts[:-1] or "benches" in p.parts[:-1]


def _rust_test_def(node: Any, name: str, kind: str, file_test: bool, text: Text) -> bool:
    if kind != "function":
        return False
    prev = node.prev_named_sibling
    while prev is not None and prev.type == "attribute_item":
        if re.search(r"\b(test|tokio::test|rstest)\b", text(prev)):
            return True
        prev = prev.prev_named_sibling
    return False


# -- Java -----------------------------------------------------------------------------------


def _java_imports(node: Any, text: Text) -> list[Import]:
    raw = re.sub(r"\s+", " ", text(node)).strip().rstrip(";").strip()
    raw = raw[len("import") :].strip() if raw.startswith("import") else raw
    kind = "import"
    if raw.startswith("static "):
        kind, raw = "static", raw[len("static ") :].strip()
    raw = raw.replace(" ", "")
    line = node.start_point[0] + 1
    if raw.endswith(".*"):
        return [Import(raw[:-2], [["*", ""]], "", line, kind=kind)]
    module, _, name = raw.rpartition(".")
    return [Import(module, [[name, name]], "", line, kind=kind)]


def _java_test_file(path: str) -> bool:
    p = PurePosixPath(path)
    return (
        p.name.endswith(("Test.java", "Tests.java", "IT.java"))
        or "/src/test/" in f"/{path}"
        or p.name.startswith("Test")
    )


def _java_test_def(node: Any, name: str, kind: str, file_test: bool, text: Text) -> bool:
    if kind != "method":
        return False
    for child in node.named_children:
        if child.type == "modifiers" and re.search(r"@(Test|ParameterizedTest)\b", text(child)):
            return True
    return file_test and name.startswith("test")


# -- the table ------------------------------------------------------------------------------

_JS_BUILTINS = frozenset(
    """require console setTimeout setInterval clearTimeout clearInterval parseInt parseFloat
    isNaN isFinite Promise Object Array JSON Math String Number Boolean Symbol Map Set WeakMap
    WeakSet Date Error TypeError RangeError RegExp fetch URL URLSearchParams encodeURIComponent
    decodeURIComponent structuredClone queueMicrotask describe it test expect beforeEach
    afterEach beforeAll afterAll jest vi super import BigInt Proxy Reflect""".split()
)
_GO_BUILTINS = frozenset(
    """append cap clear close complex copy delete imag len make max min new panic print println
    real recover string int int8 int16 int32 int64 uint uint8 uint16 uint32 uint64 float32
    float64 byte rune bool error any uintptr""".split()
)
_RUST_BUILTINS = frozenset(
    """Some None Ok Err Box Vec String drop Default Option Result Rc Arc RefCell Cell HashMap
    HashSet BTreeMap BTreeSet""".split()
)
_JAVA_BUILTINS = frozenset(
    """String System Math Integer Long Double Float Boolean Character Object List Map Set
    ArrayList HashMap HashSet Arrays Collections Objects Optional Thread StringBuilder
    Exception RuntimeException IllegalArgumentException IllegalStateException""".split()
)

_PY = LangSpec(
    name="python",
    query="python",
    parse_import=_py_imports,
    test_file=_py_test_file,
    test_def=_py_test_def,
    rules=PythonRules,
    self_names=frozenset({"self", "cls"}),
    class_names=frozenset({"cls"}),
    super_names=frozenset({"super()"}),
    builtins=frozenset(dir(builtins)),
)
_JS = dict(
    parse_import=_js_imports,
    test_file=_js_test_file,
    test_def=_js_test_def,
    self_names=frozenset({"this"}),
    super_names=frozenset({"super"}),
    builtins=_JS_BUILTINS,
    rules=JavaScriptRules,
)
SPECS: dict[str, LangSpec] = {
    "python": _PY,
    "javascript": LangSpec(name="javascript", query="javascript", **_JS),
    "typescript": LangSpec(name="typescript", query="typescript", **_JS),
    "tsx": LangSpec(name="tsx", query="typescript", **_JS),
    "go": LangSpec(
        name="go",
        query="go",
        parse_import=_go_imports,
        test_file=_go_test_file,
        test_def=_go_test_def,
        rules=GoRules,
        builtins=_GO_BUILTINS,
    ),
    "rust": LangSpec(
        name="rust",
        query="rust",
        parse_import=_rust_imports,
        test_file=_rust_test_file,
        test_def=_rust_test_def,
        rules=RustRules,
        self_names=frozenset({"self", "Self"}),
        class_names=frozenset({"Self"}),
        builtins=_RUST_BUILTINS,
    ),
    "java": LangSpec(
        name="java",
        query="java",
        parse_import=_java_imports,
        test_file=_java_test_file,
        test_def=_java_test_def,
        rules=JavaRules,
        self_names=frozenset({"this"}),
        super_names=frozenset({"super"}),
        implicit_this=True,
        builtins=_JAVA_BUILTINS,
    ),
}


def spec_for(path: str, lang: str | None) -> LangSpec | None:
    """The language spec for a file: by extension first (the index's table), then by the
    index's language name."""
    name = extension_language(path)
    if name not in SPECS and lang:
        name = lang.lower()
    return SPECS.get(name) if name else None


def is_doc(path: str, lang: str | None, category: str | None) -> bool:
    if extension_language(path) in DOC_LANGS:
        return True
    return (lang or "").lower() in ("markdown", "rst", "restructuredtext")


# Method names so common on library objects that a unique definition in the repository is
# no evidence the call reaches it.
COMMON_METHODS = frozenset(
    """get set add append extend insert remove pop push shift clear copy update items keys
    values close open read write readline flush run start stop join split strip format
    replace find index count sort reverse send call apply bind next map filter reduce forEach
    then catch finally toString equals hashCode length size isEmpty contains put emit on off
    load save dump dumps loads parse render execute fetch wait lock unlock encode decode lower
    upper match search sub group exists mkdir unlink info debug warning error log""".split()
)

__all__ = ["COMMON_METHODS", "LangSpec", "SPECS", "is_doc", "spec_for"]
