"""Workspaces: several repositories searched in one ranking, each keeping its own `.llmc/`.

A workspace is a name and a list of repository roots, kept in the *user's* config
directory (``$XDG_CONFIG_HOME/llmc/workspaces.toml``), never in a repository's
``llmc.toml``: a cloned repository must not be able to make llmc read another one.

Merge rule: reciprocal-rank fusion of the per-repository ranked lists. Each member is
searched by its own pipeline (its own BM25 statistics, vectors, learned ranker, config),
and only the *ranks* cross the boundary: a member's scores are not comparable with
another's (BM25 idf depends on the corpus size; the learned ranker's scores are relative
to one query's candidates), but "this is member B's best answer" is. A result's
workspace score is ``1 / (RRF_K + rank)`` (k = 60, as in llmc.search.fusion); ties (the
first of every member, the second of every member, ...) go to the result with exact
evidence (a definition the query names, a quoted path), then to the one whose path,
symbol and snippet hold more of the query's words (a share, the same scale in every
repository), then to the member listed first.
So a small repository's best answer is never buried under a large repository's near
misses: it sits among the first ``len(members)`` results. The member's own score stays
in ``repo_score``.

A member is searched through its daemon when one runs (warm models, fresh index), else
in this process. A member with no index, or an index that fails, is one warning line;
the others still answer. The daemon's ``/v1/search`` and the MCP ``search`` tool take
``workspace`` and run this same code (``llmc.daemon.api``).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmc.errors import LlmcError

log = logging.getLogger(__name__)

WORKSPACES_FILE = "workspaces.toml"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
RRF_K = 60
EXACT_SOURCE = "exact"
MAX_MEMBERS = 64


class UnknownWorkspace(LlmcError):
    """A workspace name the user's workspaces.toml does not hold."""


@dataclass(frozen=True)
class Member:
    """One repository of a workspace: its root and the short name results carry."""

    name: str
    root: Path


# -- storage ------------------------------------------------------------------------------
def workspaces_path() -> Path:
    """``$XDG_CONFIG_HOME/llmc/workspaces.toml`` (``~/.config`` without the variable)."""
    from llmc.config import user_config_path

    return user_config_path().parent / WORKSPACES_FILE


def check_name(name: str) -> str:
    if not NAME_RE.match(name or ""):
        raise LlmcError(
            f"{name!r} is not a workspace name (letters, digits, '_', '.', '-'; at most 64)"
        )
    return name


def load_workspaces(path: Path | None = None) -> dict[str, tuple[Path, ...]]:
    """name → member roots, in the order added; a missing file is no workspaces."""
    import tomllib

    path = path or workspaces_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise LlmcError(f"{path}: cannot read the workspaces ({e})") from e
    table = data.get("workspace", {})
    if not isinstance(table, dict):
        raise LlmcError(f"{path}: [workspace] must be a table of name = {{ paths = [...] }}")
    out: dict[str, tuple[Path, ...]] = {}
    for name, entry in table.items():
        paths = entry.get("paths") if isinstance(entry, dict) else None
        if not NAME_RE.match(name) or not isinstance(paths, list):
            log.warning("%s: workspace %r ignored (expected paths = [...])", path, name)
            continue
        out[name] = tuple(Path(p) for p in paths if isinstance(p, str) and os.path.isabs(p))
    return out


def _toml_string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's, for what json.dumps writes; TOML also
    wants DEL escaped). A path that is not valid UTF-8 (a lone surrogate from an undecodable
    name) cannot be written in TOML at all: one clear line."""
    import json

    if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        shown = value.encode("utf-8", "backslashreplace").decode()
        raise LlmcError(f"{shown}: the path is not valid UTF-8; a workspace cannot record it")
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def save_workspaces(workspaces: dict[str, tuple[Path, ...]], path: Path | None = None) -> Path:
    """Write the file atomically (temp + rename), 0600, its directory created 0700."""
    path = path or workspaces_path()
    lines = ["# llmc workspaces (`llmc workspace add|list|remove`)", ""]
    for name, roots in sorted(workspaces.items()):
        lines.append(f"[workspace.{_toml_string(name)}]")
        lines.append("paths = [" + ", ".join(_toml_string(str(r)) for r in roots) + "]")
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
    os.replace(tmp, path)
    return path


def add(name: str, paths: Sequence[Path]) -> tuple[Path, ...]:
    """Add repository roots to workspace ``name`` (created if new); its members after."""
    check_name(name)
    workspaces = load_workspaces()
    roots = list(workspaces.get(name, ()))
    for p in paths:
        root = Path(p).expanduser().resolve()
        if not root.is_dir():
            raise LlmcError(f"{p}: not a directory")
        if root not in roots:
            roots.append(root)
    if len(roots) > MAX_MEMBERS:
        raise LlmcError(f"a workspace holds at most {MAX_MEMBERS} repositories")
    workspaces[name] = tuple(roots)
    save_workspaces(workspaces)
    return workspaces[name]


def remove(name: str, paths: Sequence[Path] = ()) -> tuple[Path, ...]:
    """Remove ``paths`` from workspace ``name``, or the whole workspace without paths (or
    once it has no member left). Returns the members left."""
    workspaces = load_workspaces()
    if name not in workspaces:
        raise UnknownWorkspace(f"no workspace {name!r} (`llmc workspace list` shows them)")
    if paths:
        drop = {Path(p).expanduser().resolve() for p in paths}
        unknown = sorted(str(p) for p in drop if p not in workspaces[name])
        if unknown:
            raise LlmcError(f"not in workspace {name!r}: {', '.join(unknown)}")
        left = tuple(r for r in workspaces[name] if r not in drop)
    else:
        left = ()
    if left:
        workspaces[name] = left
    else:
        del workspaces[name]
    save_workspaces(workspaces)
    return left


def short_names(roots: Sequence[Path]) -> list[str]:
    """Each root's directory name; names that collide take their parent's name too."""
    bare = [r.name or str(r) for r in roots]
    return [
        f"{r.parent.name}/{r.name}" if bare.count(name) > 1 else name
        for r, name in zip(roots, bare, strict=True)
    ]


def members(name: str) -> tuple[Member, ...]:
    """The members of workspace ``name``; UnknownWorkspace when there is no such one."""
    if not NAME_RE.match(name or ""):
        raise UnknownWorkspace(f"{name!r} is not a workspace name")
    roots = load_workspaces().get(name)
    if not roots:
        raise UnknownWorkspace(
            f"no workspace {name!r} (`llmc workspace add {name} PATH...` makes one)"
        )
    return tuple(Member(n, r) for n, r in zip(short_names(roots), roots, strict=True))


# -- the merge ------------------------------------------------------------------------------
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def _words(text: str) -> set[str]:
    """Lower-cased words of ``text``, identifiers split (snake_case, camelCase)."""
    return {w.lower() for w in _WORD.findall(text) if len(w) > 1}


def _coverage(words: set[str], result: dict[str, Any]) -> float:
    """The share of the query's words a result's path, symbol and snippet contain: a
    tie-break that does not depend on the size of the result's repository."""
    if not words:
        return 0.0
    seen = _words(" ".join(str(result.get(f) or "") for f in ("path", "symbol", "snippet")))
    return len(words & seen) / len(words)


def merge(
    lists: Sequence[tuple[Member, Sequence[dict[str, Any]]]], k: int, query: str = ""
) -> list[dict]:
    """Reciprocal-rank fusion of per-member ranked lists (see the module docstring).

    Each result (a ``--json`` result object) comes back with ``repo`` (the member's short
    name), ``repo_root``, ``repo_score`` (its score in its own repository) and ``score``,
    its workspace score ``1 / (RRF_K + rank)``."""
    words = _words(query)
    scored = []
    for order, (member, results) in enumerate(lists):
        for rank, r in enumerate(results, 1):
            exact = EXACT_SOURCE in (r.get("sources") or ())
            scored.append((1.0 / (RRF_K + rank), exact, _coverage(words, r), -order, member, r))
    scored.sort(key=lambda t: t[:4], reverse=True)
    out = []
    for fused, _, _, _, member, r in scored[:k]:
        out.append(
            {
                **r,
                "repo": member.name,
                "repo_root": str(member.root),
                "repo_score": r.get("score", 0.0),
                "score": round(fused, 6),
            }
        )
    return out


Ask = Callable[[Member, dict[str, Any]], dict[str, Any]]


def search(
    name: str, query: str, ask: Ask, k: int | None = None, route: str | None = None
) -> dict[str, Any]:
    """Search every member of workspace ``name`` with ``ask(member, params)`` (a member's
    ``--json`` answer) and merge. A member that fails is one warning; all failing raise."""
    found = members(name)
    k = k or 10
    params = {"query": query, "k": k, "route": route}
    lists: list[tuple[Member, Sequence[dict[str, Any]]]] = []
    warnings: list[str] = []
    about: list[dict[str, Any]] = []
    errors: list[str] = []
    for member in found:
        try:
            answer = ask(member, params)
        except LlmcError as e:
            line = f"workspace {name!r}: {member.name} ({member.root}) left out: {e}"
            log.debug("%s", line)
            warnings.append(line)
            errors.append(str(e))
            about.append({"name": member.name, "root": str(member.root), "error": str(e)})
            continue
        results = answer.get("results", [])
        lists.append((member, results))
        warnings.extend(
            f"{member.name}: {w}" for w in answer.get("warnings", []) if w != "no results"
        )
        about.append(
            {
                "name": member.name,
                "root": str(member.root),
                "results": len(results),
                "route": answer.get("route"),
                "took_ms": answer.get("took_ms"),
            }
        )
    if not lists:
        raise LlmcError(f"workspace {name!r}: no member could answer ({'; '.join(errors)})")
    return {
        "query": query,
        "workspace": name,
        "results": merge(lists, k, query),
        "members": about,
        "warnings": warnings,
    }


def hide_roots(text: str, found: Sequence[Member]) -> str:
    """``text`` with each member's absolute root (as stored and as resolved) replaced by
    its short name: ``/src/old/llmc.toml`` reads ``old/llmc.toml``. Longest root first, so
    a member nested in another keeps its own name."""
    roots = {}
    for m in found:
        for root in (str(m.root), str(m.root.resolve())):
            roots.setdefault(root, m.name)
    for root in sorted(roots, key=len, reverse=True):
        text = text.replace(f"{roots[root]} ({root})", roots[root]).replace(root, roots[root])
    return text


def without_roots(answer: dict[str, Any], found: Sequence[Member]) -> dict[str, Any]:
    """``answer`` for a client of a daemon: members by their short names only, no absolute
    root of any repository (``repo_root``, a member's ``root``, roots quoted in warnings and
    in a member's ``error``). Results' paths are relative to their member already."""
    members = []
    for m in answer.get("members", []):
        m = {k: v for k, v in m.items() if k != "root"}
        if isinstance(m.get("error"), str):
            m["error"] = hide_roots(m["error"], found)
        members.append(m)
    return {
        **answer,
        "results": [
            {k: v for k, v in r.items() if k != "repo_root"} for r in answer.get("results", [])
        ],
        "members": members,
        "warnings": [hide_roots(line, found) for line in answer.get("warnings", [])],
    }


# -- asking a member ------------------------------------------------------------------------
# ``llmc.daemon.client.try_daemon``'s shape: (root, endpoint, params, config) -> the answer,
# or None when no daemon answers. The caller hands it in (the CLI, the daemon), so this
# module stands below daemon/ and never imports it.
DaemonAsk = Callable[[Path, str, dict[str, Any], Any], "dict[str, Any] | None"]


class MemberSearchers:
    """In-process searchers of members without a daemon, opened on first use and kept
    (at most ``limit``, least recently used closed first) until ``close()``."""

    def __init__(
        self,
        overrides: dict[str, Any] | None = None,
        limit: int = 8,
        daemon: DaemonAsk | None = None,
    ):
        self.overrides = dict(overrides or {})
        self.limit = limit
        self.daemon = daemon  # how to ask a member's daemon (handed down: no import up)
        self._open: OrderedDict[Path, Any] = OrderedDict()
        self._lock = threading.Lock()

    def config(self, root: Path) -> Any:
        from llmc.config import load_config

        return load_config(root, self.overrides)

    def searcher(self, root: Path) -> Any:
        from llmc.search import Searcher

        with self._lock:
            found = self._open.get(root)
            if found is not None:
                self._open.move_to_end(root)
                return found
            searcher = Searcher(root, self.config(root))
            self._open[root] = searcher
            while len(self._open) > self.limit:
                self._open.popitem(last=False)[1].close()
            return searcher

    def ask(self, member: Member, params: dict[str, Any], use_daemon: bool = True) -> dict:
        """The member's answer: its daemon's when one runs, else this process's."""
        from llmc.paths import DB_NAME, state_dir

        if not (state_dir(member.root) / DB_NAME).is_file():
            raise LlmcError("no index (run `llmc index` there)")
        cfg = self.config(member.root)
        if use_daemon and self.daemon is not None:
            answer = self.daemon(member.root, "search", dict(params), cfg)
            if answer is not None:
                return answer
        response = self.searcher(member.root).search(
            params["query"], k=params.get("k"), route=params.get("route")
        )
        return response.to_json()

    def close(self) -> None:
        with self._lock:
            old = list(self._open.values())
            self._open.clear()
        for s in old:
            s.close()

    def __enter__(self) -> MemberSearchers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SHARED: MemberSearchers | None = None
_SHARED_LOCK = threading.Lock()


def shared_searchers(daemon: DaemonAsk | None = None) -> MemberSearchers:
    """The process-wide searchers a daemon or `llmc mcp` keeps warm across queries
    (``daemon``: how to ask the other members' daemons, set by the first caller)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = MemberSearchers(daemon=daemon)
        return _SHARED


__all__ = [
    "RRF_K",
    "Member",
    "UnknownWorkspace",
    "MemberSearchers",
    "add",
    "hide_roots",
    "load_workspaces",
    "members",
    "merge",
    "remove",
    "search",
    "shared_searchers",
    "without_roots",
    "workspaces_path",
]
