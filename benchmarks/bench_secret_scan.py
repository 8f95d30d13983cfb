"""Throughput of the secret scan (llmc.index.secrets.scan) over a tree's text files.

    python benchmarks/bench_secret_scan.py DIR [DIR ...]

Prints the CPU model (lscpu), the MB scanned, the best of three passes and MB/s, and how
many files had a finding. The scan runs on every indexed file's text before it is written.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from llmc.index.secrets import scan

SUFFIXES = {".py", ".js", ".ts", ".md", ".rst", ".txt", ".yaml", ".yml", ".toml", ".json",
            ".cfg", ".ini", ".sh", ".go", ".rs", ".java"}  # fmt: skip


def cpu() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((ln.split(":", 1)[1].strip() for ln in out.splitlines()
                 if ln.startswith("Model name")), "unknown")  # fmt: skip


def texts(folder: Path) -> list[tuple[str, str]]:
    out = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.suffix in SUFFIXES and path.stat().st_size < 1_048_576:
            try:
                out.append((str(path.relative_to(folder)), path.read_text(encoding="utf-8")))
            except (UnicodeDecodeError, OSError):
                continue
    return out


def main() -> None:
    print(f"cpu: {cpu()}")
    for arg in sys.argv[1:]:
        files = texts(Path(arg))
        mb = sum(len(t.encode()) for _, t in files) / 1e6
        best, hits = float("inf"), 0
        for _ in range(3):
            started = time.perf_counter()
            hits = sum(1 for rel, text in files if scan(rel, text))
            best = min(best, time.perf_counter() - started)
        print(f"{arg}: {len(files)} files, {mb:.1f} MB, {best:.2f} s, {mb / best:.1f} MB/s, "
              f"{hits} with a finding")  # fmt: skip


if __name__ == "__main__":
    main()
