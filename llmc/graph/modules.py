"""Where an import points: each language's rules for turning an import into repository files.

* Python: packages (``__init__.py``), source roots (``src/`` layouts, script and test dirs),
  relative imports with leading dots, namespace packages.
* JavaScript / TypeScript: relative paths with extension probing (``.ts`` for ``.js``),
  ``index`` files, the ``@/`` and ``~/`` aliases for ``src/``.
* Go: module paths from ``go.mod``; an import names a package directory.
* Rust: crate roots (``lib.rs``, ``main.rs``), ``mod`` files (``a.rs`` or ``a/mod.rs``),
  ``crate::`` / ``self::`` / ``super::`` paths, sibling crates by name.
* Java: package declarations (not directories) → fully qualified class names.

Only the file list and the facts are used, plus ``go.mod`` files read from disk.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections import defaultdict
from pathlib import Path, PurePosixPath

from llmc.graph.model import FileFacts
from llmc.safe_read import read_inside

log = logging.getLogger(__name__)

PY_EXTS = (".py", ".pyi")
JS_EXTS = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".d.ts")
_JS_SWAP = {".js": (".ts", ".tsx"), ".jsx": (".tsx",), ".mjs": (".mts",), ".cjs": (".cts",)}


def _dir(path: str) -> str:
    return posixpath.dirname(path)


def _join(*parts: str) -> str:
    kept = [p for p in parts if p]
    return posixpath.normpath(posixpath.join(*kept)) if kept else ""


class ModuleIndex:
    """Indexes of the repository's files for every language's import rules."""

    def __init__(self, facts: dict[str, FileFacts], repo_root: Path | None = None):
        self.facts = facts
        self.repo_root = Path(repo_root) if repo_root is not None else None
        self.paths = set(facts)
        self._py_memo: dict[tuple, str | None] = {}
        self._by_basename: dict[str, list[str]] | None = None  # made when first asked
        self.dirs: set[str] = set()
        for p in self.paths:
            d = _dir(p)
            while d and d not in self.dirs:
                self.dirs.add(d)
                d = _dir(d)
        self._python()
        self._go(repo_root)
        self._rust()
        self._java()

    # -- Python -------------------------------------------------------------------------
    def ending_with(self, tail: str) -> list[str]:
        """The files whose path is ``tail`` or ends with ``/tail``, in the files' order.
        By base name first: a scan of every path for each doc mention that names a
        relative path made the graph's time grow with mentions x files (on 100k files,
        most of its 14 minutes)."""
        if self._by_basename is None:
            self._by_basename = {}
            for p in self.facts:
                self._by_basename.setdefault(posixpath.basename(p), []).append(p)
        near = self._by_basename.get(posixpath.basename(tail), ())
        return [p for p in near if p == tail or p.endswith("/" + tail)]

    def _python(self) -> None:
        py = [p for p in self.paths if p.endswith(PY_EXTS)]
        self.py_pkg_dirs = {_dir(p) for p in py if PurePosixPath(p).stem == "__init__"}
        py_dirs = {_dir(p) for p in py}
        if self.repo_root is not None:  # an empty __init__.py is not indexed, but counts
            for d in py_dirs - self.py_pkg_dirs:
                if d and (self.repo_root / d / "__init__.py").is_file():
                    self.py_pkg_dirs.add(d)
        # A directory of modules inside a package is importable through it (PEP 420).
        for d in sorted(py_dirs, key=lambda x: x.count("/")):
            if d and d not in self.py_pkg_dirs and _dir(d) in self.py_pkg_dirs:
                self.py_pkg_dirs.add(d)
        self.py_module: dict[str, str] = {}  # path -> dotted module name
        self.py_root: dict[str, str] = {}  # path -> source root it is importable from
        self.py_by_module: dict[str, list[str]] = defaultdict(list)
        roots: set[str] = {""}
        for p in py:
            d = _dir(p)
            root = d
            while root and root in self.py_pkg_dirs:  # first ancestor that is not a package
                root = _dir(root)
            rel = p[len(root) + 1 :] if root else p
            parts = rel.rsplit(".", 1)[0].split("/")
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join(parts)
            self.py_module[p] = name
            self.py_root[p] = root
            if name:
                self.py_by_module[name].append(p)
            if d in self.py_pkg_dirs:
                roots.add(root)
        if "src" in self.dirs:
            roots.add("src")
        self.py_roots = sorted(roots, key=lambda r: (r.count("/"), r))
        self.py_top = {m.split(".")[0] for m in self.py_by_module}
        self.py_top |= {d.split("/")[-1] for d in self.dirs if _dir(d) in self.py_roots}

    def _py_at(self, base: str) -> str | None:
        """The file (or namespace dir, ``dir/``) for module path ``base`` (slashes)."""
        for ext in PY_EXTS:
            if base + ext in self.paths:
                return base + ext
        for ext in PY_EXTS:
            init = _join(base, "__init__" + ext)
            if init in self.paths:
                return init
        if base in self.dirs:
            return base + "/"
        return None

    def resolve_python(self, module: str, level: int, importer: str) -> str | None:
        """File (or ``dir/`` for a namespace package) that ``import module`` names."""
        # The answer depends on the importer only through its directory (and, for a file
        # that is not a Python module, its missing source root): memoised per directory.
        key = (module, level, _dir(importer), importer in self.py_root)
        try:
            return self._py_memo[key]
        except KeyError:
            hit = self._py_memo[key] = self._resolve_python(module, level, importer)
            return hit

    def _resolve_python(self, module: str, level: int, importer: str) -> str | None:
        rel = module.replace(".", "/")
        if level:
            base = _dir(importer)
            for _ in range(level - 1):
                base = _dir(base)
            if not rel:
                hit = self._py_at(base) if base else None
                return hit or (base + "/" if base in self.dirs else None)
            return self._py_at(_join(base, rel))
        if not rel:
            return None
        candidates = [self.py_root.get(importer, "")]
        if _dir(importer) not in self.py_pkg_dirs:
            # Scripts and test dirs see their own dir; pytest puts each conftest's dir on
            # sys.path too, so a test may import from an ancestor (`from conftest import`).
            d = _dir(importer)
            while d:
                candidates.append(d)
                d = _dir(d)
        candidates += self.py_roots
        for root in dict.fromkeys(candidates):
            hit = self._py_at(_join(root, rel))
            if hit and not (hit.endswith("/") and root not in self.py_roots):
                return hit
        hits = self.py_by_module.get(module, [])
        if len(hits) == 1:
            return hits[0]
        return None

    def python_internal(self, module: str, level: int) -> bool:
        return bool(level) or module.split(".")[0] in self.py_top

    def py_submodule(self, container: str, name: str) -> str | None:
        """``name`` as a submodule of the package ``container`` (an __init__ file or dir/)."""
        if container.endswith("/"):
            base = container[:-1]
        elif PurePosixPath(container).stem == "__init__":
            base = _dir(container)
        else:
            return None
        return self._py_at(_join(base, name))

    # -- JavaScript / TypeScript ------------------------------------------------------------
    def resolve_js(self, spec: str, importer: str) -> str | None:
        if spec.startswith(("./", "../")) or spec in (".", ".."):
            base = _join(_dir(importer), spec)
        elif spec.startswith("/"):
            base = spec.lstrip("/")
        elif spec.startswith(("@/", "~/")):
            base = _join("src", spec[2:])
        else:
            return None
        if base in self.paths:
            return base
        stem, ext = posixpath.splitext(base)
        for alt in _JS_SWAP.get(ext, ()):
            if stem + alt in self.paths:
                return stem + alt
        for e in JS_EXTS:
            if base + e in self.paths:
                return base + e
        for e in JS_EXTS:
            index = _join(base, "index" + e)
            if index in self.paths:
                return index
        return None

    @staticmethod
    def js_internal(spec: str) -> bool:
        return spec.startswith((".", "/", "@/", "~/"))

    # -- Go -------------------------------------------------------------------------------
    def _go(self, repo_root: Path | None) -> None:
        self.go_files: dict[str, list[str]] = defaultdict(list)
        for p in self.paths:
            if p.endswith(".go"):
                self.go_files[_dir(p)].append(p)
        self.go_modules: list[tuple[str, str]] = []  # (module path, dir)
        if not self.go_files or repo_root is None:
            return
        seen: set[str] = set()
        for d in list(self.go_files):
            cur = d
            while cur not in seen:
                seen.add(cur)
                try:
                    rel = f"{cur}/go.mod" if cur else "go.mod"
                    text = read_inside(repo_root, rel, 1 << 20).decode("utf-8", "replace")
                except OSError:  # missing, or a path out of the repository
                    text = ""
                m = re.search(r"^\s*module\s+(\S+)", text, re.M)
                if m:
                    self.go_modules.append((m.group(1).strip('"'), cur))
                if not cur:
                    break
                cur = _dir(cur)
        self.go_modules.sort(key=lambda md: -len(md[0]))

    def resolve_go(self, import_path: str) -> str | None:
        """The repository directory of a Go package import, or None."""
        for mod, d in self.go_modules:
            if import_path == mod or import_path.startswith(mod + "/"):
                sub = _join(d, import_path[len(mod) :].lstrip("/"))
                return sub if sub in self.go_files else None
        if self.go_modules:
            return None
        parts = import_path.split("/")  # no go.mod (GOPATH style): the longest matching suffix
        for i in range(len(parts)):
            cand = "/".join(parts[i:])
            if cand in self.go_files:
                return cand
        return None

    def go_internal(self, import_path: str) -> bool:
        if any(import_path == m or import_path.startswith(m + "/") for m, _ in self.go_modules):
            return True
        return self.resolve_go(import_path) is not None

    def go_package_files(self, d: str) -> list[str]:
        return sorted(p for p in self.go_files.get(d, ()) if not p.endswith("_test.go"))

    def go_package_name(self, d: str) -> str:
        for p in sorted(self.go_files.get(d, ())):
            f = self.facts.get(p)
            if f and f.module and not f.module.endswith("_test"):
                return f.module
        last = d.rsplit("/", 1)[-1]
        return last

    # -- Rust -----------------------------------------------------------------------------
    def _rust(self) -> None:
        rs = [p for p in self.paths if p.endswith(".rs")]
        self.rust_mod: dict[tuple[str, tuple[str, ...]], str] = {}
        self.rust_of: dict[str, tuple[str, tuple[str, ...]]] = {}
        self.rust_crates: dict[str, str] = {}  # crate name -> crate dir
        crate_dirs = {_dir(p) for p in rs if PurePosixPath(p).name in ("lib.rs", "main.rs")}
        by_depth = sorted(crate_dirs, key=len, reverse=True)
        for p in rs:
            d = _dir(p)
            crate = next((c for c in by_depth if not c or d == c or d.startswith(c + "/")), d)
            rel = p[len(crate) + 1 :] if crate else p
            segs = rel[: -len(".rs")].split("/")
            if segs[-1] == "mod" or (len(segs) == 1 and segs[0] in ("lib", "main")):
                segs = segs[:-1]
            key = (crate, tuple(segs))
            self.rust_mod.setdefault(key, p)
            self.rust_of[p] = key
        for c in crate_dirs:
            parent = _dir(c) if c.endswith("src") else c
            name = (parent.rsplit("/", 1)[-1] if parent else "crate").replace("-", "_")
            self.rust_crates.setdefault(name, c)

    def rust_module(self, importer: str, segs: list[str]) -> tuple[str | None, list[str], bool]:
        """Walk a ``use`` or call path: (module file, remaining segments, internal?)."""
        crate, cur = self.rust_of.get(importer, ("", ()))
        if not segs:
            return None, [], False
        head = segs[0]
        if head == "crate":
            base: tuple[str, ...] = ()
            rest = list(segs[1:])
        elif head == "self":
            base, rest = cur, list(segs[1:])
        elif head == "super":
            base, rest = cur, list(segs)
            while rest and rest[0] == "super":
                base, rest = base[:-1], rest[1:]
        elif (crate, cur + (head,)) in self.rust_mod:
            base, rest = cur, list(segs)
        elif (crate, (head,)) in self.rust_mod:
            base, rest = (), list(segs)
        elif head in self.rust_crates:
            crate, base, rest = self.rust_crates[head], (), list(segs[1:])
        else:
            return None, list(segs), False
        mod = tuple(base)
        while rest and (crate, mod + (rest[0],)) in self.rust_mod:
            mod, rest = mod + (rest[0],), rest[1:]
        return self.rust_mod.get((crate, mod)), rest, True

    def rust_child(self, importer: str, name: str) -> str | None:
        """The file of ``mod name;`` declared in ``importer`` (``name.rs`` or ``name/mod.rs``)."""
        crate, cur = self.rust_of.get(importer, ("", ()))
        return self.rust_mod.get((crate, cur + (name,)))

    # -- Java -----------------------------------------------------------------------------
    def _java(self) -> None:
        self.java_pkg_files: dict[str, list[str]] = defaultdict(list)
        for p, f in self.facts.items():
            if p.endswith(".java"):
                self.java_pkg_files[f.module].append(p)
        self.java_prefixes = {".".join(pk.split(".")[:2]) for pk in self.java_pkg_files if pk}

    def java_internal(self, module: str) -> bool:
        return (
            module in self.java_pkg_files or ".".join(module.split(".")[:2]) in self.java_prefixes
        )


__all__ = ["ModuleIndex"]
