"""Searching the team store: the one search pipeline over the repositories' shards.

A team search runs one ``Searcher`` (routing, exact symbols, BM25 and dense retrieval, the
learned rankers, file-level answers: ``llmc/search``) whose ``Sources`` read the searched
repositories' current versions in the store (``llmc/team/reader.py``) instead of a local
index. With ``[team] ranking = "union"`` (the default) the repositories are read as one
index: BM25 with their statistics summed, dense similarities from one embedding space,
one ranking pass over every repository's candidates; one repository alone reads exactly
as its local index. With ``"merge"`` each repository is searched by its own searcher and
the ranked lists are merged as a workspace's are (``llmc/workspace.py``: reciprocal ranks).
Every result names its repository and the commit it was published from.

Searchers keep their connection and caches warm across queries and follow each
repository's newest version. What does not depend on which repositories a search joins is
kept once per process (``ShardCaches``): posting lists and each shard's vectors in memory;
the query is embedded once per model.
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
from llmc.errors import ConfigError, LlmcError, ModelError, TeamError
from llmc.search.sources import Models, Sources
from llmc.team.connect import connect, shown_url
from llmc.team.lexical import PostingCache, ShardFiles, ShardLexical
from llmc.team.reader import ShardGone, ShardReader, current_versions, global_id
from llmc.team.schema import check_schema

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from llmc.search import Searcher
    from llmc.search.threads import ThreadLimiter
    from llmc.search.trace import Trace
    from llmc.store.vectors import VectorMatrix

MAX_REPOS = 64
SEARCHERS_KEPT = 16
RANKINGS = ("union", "merge")
SHARED_POSTINGS_BYTES = 128_000_000  # posting lists a process keeps for all its searchers


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


class ShardCaches:
    """What a process keeps of the store's shards for all its searchers, whichever
    repositories each joins: posting lists (``PostingCache``) and each repository's vectors
    of its current version in memory (one ``VectorMatrix`` per repository and category; a
    newer version replaces it)."""

    def __init__(self, postings_bytes: int = SHARED_POSTINGS_BYTES):
        self.postings = PostingCache(postings_bytes)
        self._lock = threading.Lock()
        self._matrices: dict[tuple[str, str], tuple[str, VectorMatrix]] = {}
        self._pool: ThreadPoolExecutor | None = None

    def pool(self) -> ThreadPoolExecutor:
        """Threads for the repositories' vector scans (as many as cores)."""
        with self._lock:
            if self._pool is None:
                workers = max(1, min(4, os.cpu_count() or 1))
                self._pool = ThreadPoolExecutor(workers, thread_name_prefix="llmc-scan")
            return self._pool

    def matrix(self, reader: ShardReader, place: int, category: str) -> VectorMatrix:
        from llmc.store.vectors import VectorMatrix

        version = reader.versions[place]
        key = (version.repo, category)
        with self._lock:
            held = self._matrices.get(key)
            if held is None or held[0] != version.shard:
                ids, rows = reader.all_vectors(category, place)
                held = self._matrices[key] = (version.shard, VectorMatrix.of(category, ids, rows))
        return held[1]


class TeamSources(Sources):
    """What a query of published repositories reads: their shards in the team store."""

    def __init__(
        self, root: Path, cfg: Config, threads: ThreadLimiter, repos: Sequence[str],
        vectors: QueryVectors, shared: ShardCaches | None = None, models: Models | None = None,
    ):  # fmt: skip
        super().__init__(root, cfg, threads, models)
        self.repos = list(repos)
        self.shared_vectors = vectors
        self.shared = shared or ShardCaches()
        self.file_reader: ShardFiles | None = None
        self._warm: set[str] = set()

    def open(self) -> None:
        if self._store is not None:
            return
        conn = connect(self.cfg.team, autocommit=True, search=True)
        try:
            reader = ShardReader(conn, self.repos)
        except BaseException:
            conn.close()
            raise
        self._store = reader  # type: ignore[assignment]  # Store's reading methods
        self.file_reader = ShardFiles(reader, self.shared.postings)
        if self.cfg.search.bm25:
            self._open_lexical()
        if self.cfg.search.dense:
            self._check_vector_spaces()

    @property
    def reader(self) -> ShardReader:
        return self.store  # type: ignore[return-value]

    def _open_lexical(self) -> None:
        self.lexical = ShardLexical(self.reader, self.shared.postings)  # type: ignore[assignment]

    def freshness(self, trace: Trace) -> None:
        self.reader.follow()  # a newer publish: read its version from here on
        super().freshness(trace)

    def knn(self, category: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """A searcher's first query asks the store's HNSW indexes (nothing to load); from
        the second on, each repository's vectors are kept in memory (``ShardCaches``) and
        searched exactly, as local search does (``Sources.knn``): one HNSW search on the
        server costs more than a scan in memory, and exact is what local search answers.
        Several repositories' nearest are merged by similarity (one embedding space)."""
        if category not in self._warm and self._queries <= 1:
            return self.reader.knn(category, vector, k)
        self._warm.add(category)
        places = self.reader.space_places(category)

        def nearest(place: int) -> list[tuple[int, float]]:
            hits = self.shared.matrix(self.reader, place, category).knn(vector, k)
            return [(global_id(place, i), sim) for i, sim in hits]

        if len(places) == 1:
            return nearest(places[0])
        # each repository's scan is a matrix product that lets go of the GIL: side by side
        found = [hit for hits in self.shared.pool().map(nearest, places) for hit in hits]
        return sorted(found, key=lambda hit: (-hit[1], hit[0]))[:k]

    def warm_vectors(self, category: str) -> None:
        for place in self.reader.space_places(category):
            self.shared.matrix(self.reader, place, category)
        self._warm.add(category)

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


def team_root(team: TeamConfig, repos: str | Sequence[str]) -> Path:
    """A private directory for a search of one store's repositories: where its searcher
    keeps what it learns (stage costs, HyDE's cache), as ``.llmc/`` of a local repository
    would."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llmc" / "team"
    names = "\0".join([repos] if isinstance(repos, str) else repos)
    key = hashlib.sha256(f"{shown_url(team.url)}\0{names}".encode()).hexdigest()[:16]
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
    """Warm searchers of a team store's repositories, and the answer over them."""

    def __init__(self, cfg: Config, load: Callable[[Path], Config]):
        """``cfg``: the user's config naming the store; ``load(root)``: the config a
        searcher runs under (the user's, with the caller's overrides)."""
        if not (cfg.team.url or cfg.team.search_url):
            raise TeamError("no team store configured: set [team] url in your user config")
        if cfg.team.ranking not in RANKINGS:
            raise ConfigError(
                f"team.ranking must be one of {', '.join(RANKINGS)}, got {cfg.team.ranking!r}"
            )
        self.cfg = cfg
        self.load = load
        self.vectors = QueryVectors()
        self.shared = ShardCaches()
        self._searchers: OrderedDict[tuple[str, ...], Searcher] = OrderedDict()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._conn: Any = None  # the versions check's

    def _connect(self) -> Any:
        return connect(self.cfg.team, autocommit=True, search=True)

    def _problems(self, names: list[str]) -> dict[str, str]:
        """Which of ``names`` cannot be read, and why (``current_versions``), on a
        connection kept for it (opened again once if the server dropped it)."""
        import psycopg

        with self._lock:
            for attempt in (1, 2):
                try:
                    if self._conn is None or self._conn.closed:
                        self._conn = self._connect()
                    return current_versions(self._conn, names)[1]
                except psycopg.OperationalError as e:
                    self._conn = None
                    if attempt == 2:
                        raise TeamError(f"the team store stopped answering: {e}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def repos(self) -> list[str]:
        conn = self._connect()
        try:
            if not check_schema(conn):
                return []
            return [r[0] for r in conn.execute("SELECT name FROM llmc.repos ORDER BY name")]
        finally:
            conn.close()

    def searcher(self, repos: str | Sequence[str]) -> Searcher:
        """The warm searcher of ``repos`` (one name, or several read as one index)."""
        from llmc.search import Searcher

        key = (repos,) if isinstance(repos, str) else tuple(repos)
        with self._lock:
            found = self._searchers.get(key)
            if found is not None:
                self._searchers.move_to_end(key)
                return found
        root = team_root(self.cfg.team, key)
        cfg = self.load(root)

        def sources(root: Path, cfg: Config, threads: ThreadLimiter) -> Sources:
            return TeamSources(root, cfg, threads, key, self.vectors, self.shared)

        searcher = Searcher(root, cfg, sources=sources)
        with self._lock:
            self._searchers[key] = searcher
            while len(self._searchers) > SEARCHERS_KEPT:
                self._searchers.popitem(last=False)[1].close()
        return searcher

    def _answer_of(self, searcher: Searcher, params: dict[str, Any]) -> dict[str, Any]:
        """``searcher``'s answer (``Answer.to_json``), asked again on the newer version
        when a publish dropped the shard under the query."""
        from llmc.search.answer import answer

        for attempt in (1, 2):
            try:
                found = answer(
                    searcher, params["query"], k=params.get("k"), route=params.get("route"),
                    explain=bool(params.get("explain")), group=params.get("group", "span"),
                )  # fmt: skip
                return found.to_json()
            except Exception as e:
                if attempt == 2 or not _shard_gone(e):
                    raise
                searcher.sources.reader.follow()  # type: ignore[attr-defined]  # a newer version
        raise AssertionError("unreachable")  # pragma: no cover

    def ask(self, repo: str, params: dict[str, Any]) -> dict[str, Any]:
        """One repository's answer (``Answer.to_json``), with its version's commit."""
        searcher = self.searcher(repo)
        found = self._answer_of(searcher, params)
        version = searcher.sources.reader.version  # type: ignore[attr-defined]
        return found | {"commit": version.commit, "generation": version.generation}

    def answer(
        self, query: str, repos: Sequence[str] = (), k: int | None = None,
        route: str | None = None, group: str = "span", explain: bool = False,
    ) -> dict[str, Any]:  # fmt: skip
        """Search ``repos`` (empty: every published repository): one ranking over them
        (``[team] ranking``: ``union``), or each ranked alone and merged (``merge``)."""
        names = list(dict.fromkeys(repos)) or self.repos()
        if not names:
            raise TeamError("the team store holds no repository yet (`llmc team push`)")
        if len(names) > MAX_REPOS:
            raise TeamError(f"at most {MAX_REPOS} repositories in one team search")
        want = k or self.cfg.search.k
        params = {"query": query, "k": want, "route": route, "group": group, "explain": explain}
        if self.cfg.team.ranking == "merge":
            return self._merged(names, params)
        return self._joined(sorted(names), params)

    def _joined(self, names: list[str], params: dict[str, Any]) -> dict[str, Any]:
        """One searcher over the repositories that can be read (each other one is a
        warning), its results given back their repositories' own paths and commits."""
        problems = self._problems(names)
        readable = [n for n in names if n not in problems]
        if not readable:
            errors = "; ".join(f"{n}: {why}" for n, why in problems.items())
            raise TeamError(f"no repository of the team store could answer ({errors})")
        searcher = self.searcher(tuple(readable))
        found = self._answer_of(searcher, params)
        reader: ShardReader = searcher.sources.reader  # type: ignore[attr-defined]
        return joined_answer(found, reader, problems, params.get("group", "span"))

    def _merged(self, names: list[str], params: dict[str, Any]) -> dict[str, Any]:
        """Each repository asked for one more than ``ceil(k / n)``: the merge takes every
        repository's first result, then every second, ... (its scores are ranks), so the
        top ``k`` of ``n`` repositories lie within each one's top ``ceil(k / n)`` (a smaller
        k is a prefix of the same order, llmc/search/results.py); asked again for ``k`` only
        when too few came back to fill ``k`` while it had more."""
        want = params["k"]
        each = min(want, -(-want // len(names)) + 1)
        answers = dict(zip(names, self._ask_all(names, params | {"k": each}), strict=True))
        key = "files" if params["group"] == "file" else "results"
        held = sum(len(a[key]) for a, _ in answers.values() if a is not None)
        full = [n for n, (a, _) in answers.items() if a is not None and len(a[key]) >= each]
        if each < want and held < want and full:
            answers.update(zip(full, self._ask_all(full, params), strict=True))
        return merged(params["query"], [(n, *answers[n]) for n in names], want, params["group"])

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
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        for searcher in old:
            searcher.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def __enter__(self) -> TeamSearch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def joined_answer(
    found: dict[str, Any], reader: ShardReader, problems: dict[str, str], group: str = "span"
) -> dict[str, Any]:
    """One searcher's answer over several repositories (``Answer.to_json``, paths shown as
    ``repo/path``) as a team answer: each result with its repository, its own path and
    the commit it was published from; a repository that could not be read is a warning."""
    key = "files" if group == "file" else "results"
    rows, counts = [], dict.fromkeys(reader.repos, 0)
    for row in found.get(key, []):
        place, path = reader.place_of(row["path"]) or (0, row["path"])
        version = reader.versions[place]
        counts[version.repo] += 1
        rows.append(row | {"repo": version.repo, "path": path, "commit": version.commit})
    about: list[dict[str, Any]] = [
        {"repo": v.repo, "commit": v.commit, "generation": v.generation,
         "results": counts[v.repo], "route": found.get("route"), "took_ms": found.get("took_ms")}
        for v in reader.versions
    ]  # fmt: skip
    warnings = [f"team repository {n} left out: {why}" for n, why in problems.items()]
    about += [{"repo": n, "error": why} for n, why in problems.items()]
    out: dict[str, Any] = {
        "query": found.get("query"), "team": True, "ranking": "union", "repos": about,
        "warnings": warnings + [w for w in found.get("warnings", []) if w != "no results"],
    }  # fmt: skip
    if group == "file":
        out["group"] = "file"
    out[key] = rows
    return out


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
    out: dict[str, Any] = {
        "query": query, "team": True, "ranking": "merge", "repos": about, "warnings": warnings,
    }  # fmt: skip
    if group == "file":
        out["group"] = "file"
    out[key] = rows
    return out


__all__ = [
    "QueryVectors",
    "ShardCaches",
    "TeamSearch",
    "TeamSources",
    "joined_answer",
    "merged",
    "shared_team_search",
    "team_root",
]
