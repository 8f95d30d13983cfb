"""Searching the team store: the one search pipeline over each repository's shard.

Each published repository is searched by its own ``Searcher`` (routing, exact symbols,
BM25 and dense retrieval, the learned rankers, file-level answers: ``llmc/search``) whose
``Sources`` read the repository's current version in the store (``llmc/team/reader.py``)
instead of a local index; the repositories' ranked lists are merged as a workspace's are
(``llmc/workspace.py``: reciprocal ranks, since one repository's scores do not compare with
another's). Every result names its repository and the commit it was published from.

A searcher keeps its connection and caches (posting lists, documents' lengths) warm across
queries and follows each repository's newest version; the query is embedded once for all
repositories. Searchers run side by side, one thread per repository.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmc.config import Config, TeamConfig
from llmc.errors import LlmcError, ModelError, TeamError
from llmc.search.sources import Models, Sources
from llmc.team.connect import connect, shown_url
from llmc.team.reader import ShardFiles, ShardGone, ShardLexical, ShardReader
from llmc.team.schema import check_schema

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from llmc.search import Searcher
    from llmc.search.threads import ThreadLimiter
    from llmc.search.trace import Trace
    from llmc.store.vectors import VectorMatrix

MAX_REPOS = 64
SEARCHERS_KEPT = 16


class QueryVectors:
    """Query embeddings shared by the repositories' searchers: one query is embedded once
    per model, whichever searcher asks first (the others wait for it). A searcher that got
    no vector (its repository has none) leaves nothing behind for the others."""

    def __init__(self, kept: int = 64):
        self._lock = threading.Lock()
        self._keys: dict[tuple[str, str], threading.Lock] = {}
        self._done: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._kept = kept

    def get(self, model: str, text: str, compute: Callable[[], Any]) -> Any:
        key = (model, text)
        with self._lock:
            if key in self._done:
                return self._done[key]
            lock = self._keys.setdefault(key, threading.Lock())
        with lock:
            with self._lock:
                if key in self._done:
                    return self._done[key]
            vector = compute()
            with self._lock:
                if vector is not None:
                    self._done[key] = vector
                self._keys.pop(key, None)
                while len(self._done) > self._kept:
                    self._done.popitem(last=False)
        return vector


class TeamSources(Sources):
    """What a query of one published repository reads: its shard in the team store."""

    def __init__(
        self, root: Path, cfg: Config, threads: ThreadLimiter, repo: str,
        vectors: QueryVectors, models: Models | None = None,
    ):  # fmt: skip
        super().__init__(root, cfg, threads, models)
        self.repo = repo
        self.shared_vectors = vectors
        self.file_reader: ShardFiles | None = None
        self._matrix_generation: dict[str, int] = {}

    def open(self) -> None:
        if self._store is not None:
            return
        conn = connect(self.cfg.team, autocommit=True, search=True)
        try:
            reader = ShardReader(conn, self.repo)
        except BaseException:
            conn.close()
            raise
        self._store = reader  # type: ignore[assignment]  # Store's reading methods
        self.file_reader = ShardFiles(reader)
        if self.cfg.search.bm25:
            self._open_lexical()
        if self.cfg.search.dense:
            self._check_vector_spaces()

    @property
    def reader(self) -> ShardReader:
        return self.store  # type: ignore[return-value]

    def _open_lexical(self) -> None:
        self.lexical = ShardLexical(self.reader)  # type: ignore[assignment]

    def freshness(self, trace: Trace) -> None:
        self.reader.follow()  # a newer publish: read its version from here on
        super().freshness(trace)

    def knn(self, category: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """A searcher's first query asks the store's HNSW index (nothing to load); from the
        second on, the version's vectors are kept in memory and searched exactly, as local
        search does (``Sources.knn``): one HNSW search on the server costs more than a scan
        in memory, and exact is what local search answers."""
        if category not in self._matrices and self._queries <= 1:
            return self.reader.knn(category, vector, k)
        return self.vector_matrix(category).knn(vector, k)

    def vector_matrix(self, category: str) -> VectorMatrix:
        """``category``'s vectors of the current version, in memory (read once a version)."""
        from llmc.store.vectors import VectorMatrix

        generation = self.reader.generation
        held = self._matrices.get(category)
        if held is None or self._matrix_generation.get(category) != generation:
            held = self._matrices[category] = VectorMatrix.of(
                category, *self.reader.all_vectors(category)
            )
            self._matrix_generation[category] = generation
        return held

    @property
    def disk_root(self) -> Path | None:
        return None  # the store is the only copy: no file is checked on disk

    def whole_files(self, query: str, limit: int) -> list[str]:
        assert self.file_reader is not None
        return [m.path for m in self.file_reader.search(query, limit)]

    def query_vector(self, text: str, category: str, trace: Trace) -> np.ndarray | None:
        """The query's vector, embedded once for every repository searched with the same
        model (``QueryVectors``); this repository's own reasons for none (no vectors, off)
        are said in its own trace."""
        from llmc.models.embedder import resolved_model_id

        def own() -> np.ndarray | None:
            return super(TeamSources, self).query_vector(text, category, trace)

        if category in self.dense_empty or category in self.dense_off:
            return own()
        try:
            model = resolved_model_id(self.cfg.embedding, category)
        except ModelError:
            return own()  # says why in the trace
        vector = self.shared_vectors.get(model, text, own)
        if vector is not None:
            trace.query_vectors.setdefault(model, vector)
        return vector


def team_root(team: TeamConfig, repo: str) -> Path:
    """A private directory for one store's repository: where its searcher keeps what it
    learns (stage costs, HyDE's cache), as ``.llmc/`` of a local repository would."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llmc" / "team"
    key = hashlib.sha256(f"{shown_url(team.url)}\0{repo}".encode()).hexdigest()[:16]
    root = base / key
    (root / ".llmc").mkdir(parents=True, exist_ok=True, mode=0o700)
    return root


def _shard_gone(e: BaseException | None) -> bool:
    while e is not None:
        if isinstance(e, ShardGone):
            return True
        e = e.__cause__ or e.__context__
    return False


class TeamSearch:
    """Warm searchers of a team store's repositories, and the merged answer over them."""

    def __init__(self, cfg: Config, load: Callable[[Path], Config]):
        """``cfg``: the user's config naming the store; ``load(root)``: the config a
        repository's searcher runs under (the user's, with the caller's overrides)."""
        if not (cfg.team.url or cfg.team.search_url):
            raise TeamError("no team store configured: set [team] url in your user config")
        self.cfg = cfg
        self.load = load
        self.vectors = QueryVectors()
        self._searchers: OrderedDict[str, Searcher] = OrderedDict()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def repos(self) -> list[str]:
        conn = connect(self.cfg.team, autocommit=True, search=True)
        try:
            if not check_schema(conn):
                return []
            return [r[0] for r in conn.execute("SELECT name FROM llmc.repos ORDER BY name")]
        finally:
            conn.close()

    def searcher(self, repo: str) -> Searcher:
        from llmc.search import Searcher

        with self._lock:
            found = self._searchers.get(repo)
            if found is not None:
                self._searchers.move_to_end(repo)
                return found
        root = team_root(self.cfg.team, repo)
        cfg = self.load(root)

        def sources(root: Path, cfg: Config, threads: ThreadLimiter) -> Sources:
            return TeamSources(root, cfg, threads, repo, self.vectors)

        searcher = Searcher(root, cfg, sources=sources)
        with self._lock:
            self._searchers[repo] = searcher
            while len(self._searchers) > SEARCHERS_KEPT:
                self._searchers.popitem(last=False)[1].close()
        return searcher

    def ask(self, repo: str, params: dict[str, Any]) -> dict[str, Any]:
        """One repository's answer (``Answer.to_json``), with its version's commit."""
        from llmc.search.answer import answer

        searcher = self.searcher(repo)
        for attempt in (1, 2):
            try:
                found = answer(
                    searcher, params["query"], k=params.get("k"), route=params.get("route"),
                    explain=bool(params.get("explain")), group=params.get("group", "span"),
                )  # fmt: skip
                break
            except Exception as e:
                if attempt == 2 or not _shard_gone(e):
                    raise
                searcher.sources.reader.follow()  # type: ignore[attr-defined]  # a newer version
        version = searcher.sources.reader.version  # type: ignore[attr-defined]
        return found.to_json() | {"commit": version.commit, "generation": version.generation}

    def answer(
        self, query: str, repos: Sequence[str] = (), k: int | None = None,
        route: str | None = None, group: str = "span", explain: bool = False,
    ) -> dict[str, Any]:  # fmt: skip
        """Search ``repos`` (empty: every published repository) and merge their answers.

        The merge takes every repository's first result, then every second, ... (its
        scores are ranks), so the top ``k`` of ``n`` repositories lie within each one's
        top ``ceil(k / n)``: each is asked for one more than that (a smaller k is a prefix
        of the same order, llmc/search/results.py), and asked again for ``k`` only when too
        few came back to fill ``k`` while it had more."""
        names = list(dict.fromkeys(repos)) or self.repos()
        if not names:
            raise TeamError("the team store holds no repository yet (`llmc team push`)")
        if len(names) > MAX_REPOS:
            raise TeamError(f"at most {MAX_REPOS} repositories in one team search")
        want = k or self.cfg.search.k
        each = min(want, -(-want // len(names)) + 1)
        params = {"query": query, "k": each, "route": route, "group": group, "explain": explain}
        answers = dict(zip(names, self._ask_all(names, params), strict=True))
        key = "files" if group == "file" else "results"
        held = sum(len(a[key]) for a, _ in answers.values() if a is not None)
        full = [n for n, (a, _) in answers.items() if a is not None and len(a[key]) >= each]
        if each < want and held < want and full:
            answers.update(zip(full, self._ask_all(full, params | {"k": want}), strict=True))
        return merged(query, [(n, *answers[n]) for n in names], want, group)

    def _ask_all(
        self, names: Sequence[str], params: dict[str, Any]
    ) -> list[tuple[dict[str, Any] | None, str | None]]:
        """Each repository's answer (or why it failed), asked side by side."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="llmc-team")
        futures = [self._pool.submit(self.ask, name, params) for name in names]
        out: list[tuple[dict[str, Any] | None, str | None]] = []
        for future in futures:
            try:
                out.append((future.result(), None))
            except LlmcError as e:
                out.append((None, str(e)))
        return out

    def close(self) -> None:
        with self._lock:
            old = list(self._searchers.values())
            self._searchers.clear()
        for searcher in old:
            searcher.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def __enter__(self) -> TeamSearch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SHARED: dict[str, TeamSearch] = {}
_SHARED_LOCK = threading.Lock()


def shared_team_search(cfg: Config) -> TeamSearch:
    """The process-wide searchers of the store ``cfg`` names (a daemon's, `llmc mcp`'s),
    kept warm across queries. Each repository's searcher runs under the user's config (no
    repository's ``llmc.toml``, no request's settings), as `llmc search --team` does."""
    key = cfg.team.url
    with _SHARED_LOCK:
        found = _SHARED.get(key)
        if found is None:
            from llmc.config import load_config

            found = _SHARED[key] = TeamSearch(cfg, load_config)
        return found


def merged(
    query: str, answers: Sequence[tuple[str, dict[str, Any] | None, str | None]], k: int,
    group: str = "span",
) -> dict[str, Any]:  # fmt: skip
    """The repositories' answers in one ranking (``workspace.merge``'s rule), each result
    naming its repository and commit; a repository that failed is one warning."""
    from llmc.workspace import Member, merge

    key = "files" if group == "file" else "results"
    lists, warnings, about, errors = [], [], [], []
    for name, found, error in answers:
        if found is None:
            warnings.append(f"team repository {name} left out: {error}")
            errors.append(f"{name}: {error}")
            about.append({"repo": name, "error": error})
            continue
        member = Member(name, Path(name))
        rows = [r | {"commit": found["commit"]} for r in found.get(key, [])]
        lists.append((member, rows))
        warnings += [f"{name}: {w}" for w in found.get("warnings", []) if w != "no results"]
        about.append(
            {"repo": name, "commit": found["commit"], "generation": found["generation"],
             "results": len(rows), "route": found.get("route"), "took_ms": found.get("took_ms")}
        )  # fmt: skip
    if not lists:
        raise TeamError(f"no repository of the team store could answer ({'; '.join(errors)})")
    rows = [{k: v for k, v in r.items() if k != "repo_root"} for r in merge(lists, k, query)]
    out: dict[str, Any] = {"query": query, "team": True, "repos": about, "warnings": warnings}
    if group == "file":
        out["group"] = "file"
    out[key] = rows
    return out


__all__ = [
    "QueryVectors",
    "TeamSearch",
    "TeamSources",
    "merged",
    "shared_team_search",
    "team_root",
]
