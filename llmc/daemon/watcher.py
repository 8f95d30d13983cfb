"""Watch the work tree and turn bursts of changes into single reindex requests.

Events are filtered with the indexer's own rules (``index.skip_dirs``, secret-file
patterns, ``index.include``/``exclude``; ``.git/`` and ``.llmc/`` are in skip_dirs), then
batched: a batch is handed over once no event came for ``debounce_s`` (or after
``max_delay_s`` of non-stop events), so a checkout touching a thousand files is one
reindex. Before a batch goes out, ``git check-ignore`` drops git-ignored paths in one call;
a batch of only ignored paths is dropped. The reindex itself is `llmc index`'s incremental
run, which walks the tree, so a path the filter missed costs a stat, never a wrong index.

Watches are placed on the root (not recursive) and on each top-level directory that is not
skipped (recursive), so ``node_modules/``, ``.venv/`` or ``.git/`` at the top cost no inotify
watches. Top-level directories created, renamed or deleted later are re-watched, and the
files a new one already holds when its watch is placed join the batch (they sent no event).

Memory is bounded whatever the burst (a branch switch of 100k files, a build writing into
the tree): at most ``MAX_PENDING_PATHS`` paths are kept for a batch, the rest only counted.
Such a batch skips the ignore check (the paths it would need are gone; an all-ignored
sample must not drop the change beside it) and goes out as one reindex, which walks the
tree anyway; the reindex only logs and counts the paths it is given.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pathspec
from watchdog.events import FileSystemEventHandler

from llmc.config import Config
from llmc.index.walk import is_secret

log = logging.getLogger(__name__)

IGNORED_EVENTS = frozenset({"opened", "closed_no_write"})
TEMP_SUFFIXES = ("~", ".swp", ".swx", ".swo", ".tmp", ".part", ".crdownload")
TEMP_PREFIXES = (".#",)
TEMP_NAMES = frozenset({"4913"})  # vim's write test
MAX_PENDING_PATHS = 10_000  # paths kept for one batch; more are counted, not kept


class PathFilter:
    """Which repo-relative paths may matter to the index (cheap, no I/O)."""

    def __init__(self, cfg: Config):
        icfg = cfg.index
        self.skip_dirs = set(icfg.skip_dirs) | {".git", ".llmc"}
        self.index_secrets = icfg.index_secrets
        self.include = pathspec.GitIgnoreSpec.from_lines(icfg.include) if icfg.include else None
        self.exclude = pathspec.GitIgnoreSpec.from_lines(icfg.exclude) if icfg.exclude else None

    def __call__(self, rel: str, is_dir: bool = False) -> bool:
        if not rel or rel == ".":
            return False
        parts = rel.split("/")
        if any(p in self.skip_dirs for p in (parts if is_dir else parts[:-1])):
            return False
        if rel == "llmc.toml":
            return True  # config: the daemon reloads it
        if is_dir:
            return True  # a moved or deleted directory: the indexer sorts it out
        name = parts[-1]
        if name in TEMP_NAMES or name.endswith(TEMP_SUFFIXES) or name.startswith(TEMP_PREFIXES):
            return False
        if not self.index_secrets and is_secret(rel):
            return False
        if self.exclude is not None and self.exclude.match_file(rel):
            return False
        return not (self.include is not None and not self.include.match_file(rel))


def git_ignored(root: Path, paths: Iterable[str]) -> set[str]:
    """The subset of ``paths`` git ignores (one ``git check-ignore`` call; empty off git)."""
    paths = [p for p in paths if p != "llmc.toml"]
    if not paths or not (root / ".git").exists():
        return set()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:
        out = subprocess.run(
            ["git", "check-ignore", "--stdin", "-z"],
            cwd=root,
            input="\0".join(paths).encode("utf-8", "surrogateescape") + b"\0",
            capture_output=True,
            timeout=30,
            env=env,
        )
    except (OSError, subprocess.SubprocessError) as e:
        log.debug("git check-ignore failed: %s", e)
        return set()
    if out.returncode not in (0, 1):
        return set()
    return {p for p in out.stdout.decode("utf-8", "surrogateescape").split("\0") if p}


class Watcher:
    """Debounced, batched, filtered file-system events for one repository."""

    def __init__(
        self,
        root: Path,
        cfg: Config,
        on_batch: Callable[[list[str]], None],
        debounce_s: float = 0.3,
        max_delay_s: float = 5.0,
        max_pending: int = MAX_PENDING_PATHS,
    ):
        self.root = Path(root).resolve()
        self.filter = PathFilter(cfg)
        self.on_batch = on_batch
        self.debounce_s = debounce_s
        self.max_delay_s = max_delay_s
        self._cond = threading.Condition()
        self._paths: set[str] = set()
        self.max_pending = max(1, max_pending)
        self._overflow = 0  # paths of this batch counted but not kept
        self._config = False  # llmc.toml changed in this batch (kept even in an overflow)
        self._first = 0.0
        self._last = 0.0
        self._stopping = False
        self._observer: Any = None
        self._watches: dict[str, Any] = {}
        self._thread: threading.Thread | None = None
        self.events = 0
        self.batches = 0
        self.dropped_batches = 0
        self.ignored_paths = 0  # changed paths dropped because git ignores them
        self.paths = 0  # changed paths handed over, overflowed ones included
        self.overflow_batches = 0  # batches over max_pending paths
        self.last_batch: dict[str, Any] | None = None

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        from watchdog.observers import Observer

        self._observer = Observer()
        handler = _Handler(self)
        self._handler = handler
        self._observer.schedule(handler, str(self.root), recursive=False)
        for entry in sorted(os.scandir(self.root), key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False):
                self._watch_top(entry.name)
        self._observer.start()
        self._thread = threading.Thread(target=self._loop, name="llmc-watch", daemon=True)
        self._thread.start()
        log.info("watching %s (%d top-level directories)", self.root, len(self._watches))

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(5)
        if self._thread is not None:
            self._thread.join(5)

    def _watch_top(self, name: str) -> None:
        if not self.filter(name, is_dir=True) or name in self._watches:
            return
        if name in git_ignored(self.root, [name]):
            return
        try:
            self._watches[name] = self._observer.schedule(
                self._handler, str(self.root / name), recursive=True
            )
        except OSError as e:  # e.g. the inotify watch limit
            log.warning("cannot watch %s/: %s", name, e)

    def _files_under(self, top: str) -> list[str]:
        """The files already in top-level directory ``top`` once it is watched: those
        written between its creation (or move into the tree) and its watch sent no event
        (a checkout fills a new directory faster than a watch is placed). At most
        ``max_pending`` + 1 of them: past that the batch overflows anyway."""
        if top not in self._watches:
            return []
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root / top):
            here = Path(dirpath).relative_to(self.root).as_posix()
            dirnames[:] = [d for d in dirnames if self.filter(f"{here}/{d}", is_dir=True)]
            out += [r for f in filenames if self.filter(r := f"{here}/{f}")]
            if len(out) > self.max_pending:
                return out[: self.max_pending + 1]
        return out

    def _unwatch_top(self, name: str) -> None:
        watch = self._watches.pop(name, None)
        if watch is not None:
            with contextlib.suppress(Exception):
                self._observer.unschedule(watch)

    # -- events -----------------------------------------------------------------------------
    def _rel(self, path: str | bytes) -> str | None:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        try:
            rel = Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return None
        return None if rel == "." else rel

    def event(self, event_type: str, src: str | bytes, dest: str | bytes, is_dir: bool) -> None:
        if event_type in IGNORED_EVENTS:
            return
        if is_dir and event_type == "modified":
            return  # a directory's mtime: its entries' own events carry the news
        rels = [r for r in (self._rel(src), self._rel(dest) if dest else None) if r]
        found: list[str] = []
        for rel in rels:
            if is_dir and "/" not in rel:  # a top-level directory came, went or moved
                if event_type in ("deleted", "moved") and rel == self._rel(src):
                    self._unwatch_top(rel)
                if (self.root / rel).is_dir():
                    self._unwatch_top(rel)  # a renamed dir's old watch reports stale paths
                    self._watch_top(rel)
                    found += self._files_under(rel)
        keep = [r for r in rels if self.filter(r, is_dir=is_dir)] + found
        if not keep:
            return
        now = time.monotonic()
        with self._cond:
            if not self._paths and not self._overflow:
                self._first = now
            self._config = self._config or "llmc.toml" in keep
            room = self.max_pending - len(self._paths)
            if room >= len(keep):
                self._paths.update(keep)
            else:
                fresh = [r for r in keep if r not in self._paths]
                self._paths.update(fresh[: max(room, 0)])
                self._overflow += len(fresh) - max(room, 0)
            self._last = now
            self.events += 1
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._paths and not self._overflow and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                while not self._stopping:
                    now = time.monotonic()
                    deadline = min(self._last + self.debounce_s, self._first + self.max_delay_s)
                    if now >= deadline:
                        break
                    self._cond.wait(deadline - now)
                batch, self._paths = sorted(self._paths), set()
                overflow, self._overflow = self._overflow, 0
                config, self._config = self._config, False
            if config and "llmc.toml" not in batch:
                batch.append("llmc.toml")
            self._flush(batch, overflow)

    def _flush(self, batch: list[str], overflow: int = 0) -> None:
        if overflow:
            kept = batch  # too many to check: the reindex walks the tree anyway
        else:
            ignored = git_ignored(self.root, batch)
            kept = [p for p in batch if p not in ignored]
            self.ignored_paths += len(batch) - len(kept)
            if not kept:
                self.dropped_batches += 1
                log.debug("watcher: %d changed paths, all git-ignored", len(batch))
                return
        self.batches += 1
        self.overflow_batches += bool(overflow)
        total = len(kept) + overflow
        self.paths += total
        self.last_batch = {
            "at": time.time(), "paths": total, "overflow": overflow, "sample": kept[:5],
        }  # fmt: skip
        from llmc.daemon.reindex import loggable  # a file name may hold a newline

        log.info(
            "watcher: %d changed paths%s (%s)",
            total,
            f", {overflow} of them counted only" if overflow else "",
            ", ".join(map(loggable, kept[:3])),
        )
        try:
            self.on_batch(kept)
        except Exception:  # noqa: BLE001 - the watcher outlives a failing consumer
            log.exception("watcher: handling a batch failed")

    def to_json(self) -> dict[str, Any]:
        with self._cond:
            pending = len(self._paths) + self._overflow
        return {
            "enabled": True,
            "watches": len(self._watches) + 1,
            "events": self.events,
            "batches": self.batches,
            "ignored_batches": self.dropped_batches,
            "ignored_paths": self.ignored_paths,
            "paths": self.paths,
            "overflow_batches": self.overflow_batches,
            "max_pending_paths": self.max_pending,
            "pending_paths": pending,
            "last_batch": self.last_batch,
            "debounce_ms": round(self.debounce_s * 1000),
        }


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: Watcher):
        super().__init__()
        self.watcher = watcher

    def on_any_event(self, event: Any) -> None:
        try:
            self.watcher.event(
                event.event_type,
                event.src_path,
                getattr(event, "dest_path", ""),
                event.is_directory,
            )
        except Exception:  # noqa: BLE001 - an odd event must not kill the observer thread
            log.exception("watcher: bad event %r", event)


__all__ = ["MAX_PENDING_PATHS", "PathFilter", "Watcher", "git_ignored"]
