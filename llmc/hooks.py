"""Git hooks that keep the index fresh: post-commit, post-merge, post-checkout, post-rewrite.

`llmc hooks install` writes a marked block (``# >>> llmc >>>`` … ``# <<< llmc <<<``) into
each hook in git's hooks directory (``git rev-parse --git-path hooks``, so
``core.hooksPath`` is honoured). An existing executable shell hook keeps its content: the
block goes right after its shebang line. Any other existing hook (another language, or not
executable) is moved to ``<hook>.llmc-chained`` and run by a small sh wrapper after the
block, with its arguments, stdin and exit status; uninstall moves it back.

The block starts `llmc hooks notify <hook>` in a background subshell with stdin, stdout and
stderr detached, so the git command never waits for it and its outcome never depends on it.
When llmc is missing or broken the subshell just exits. ``notify`` tells the daemon to
reindex when one runs; otherwise it runs an incremental index itself, at low priority, and
at most one such run waits behind the current writer (more would find nothing new).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from llmc.errors import DaemonUnavailable, HookError, LlmcError
from llmc.paths import (
    check_state_dir,
    ensure_state_dir,
    gate_state,
    open_state_file,
    printable_name,
    state_dir,
)

F = TypeVar("F", bound=Callable[..., Any])

log = logging.getLogger(__name__)

HOOKS = ("post-commit", "post-merge", "post-checkout", "post-rewrite")
BEGIN = "# >>> llmc >>>"
END = "# <<< llmc <<<"
CHAINED_SUFFIX = ".llmc-chained"
WRAPPER_MARK = "# llmc wrapper: runs the llmc block, then the original hook"
SHELLS = ("sh", "bash", "dash", "zsh", "ksh", "ash", "busybox")
HOOK_LOG = "hooks.log"
PENDING_LOCK = "hooks.pending.lock"
LOG_ROTATE_BYTES = 1024 * 1024


def _git_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


def hooks_dir(root: Path) -> Path:
    """Where git looks for this repository's hooks (core.hooksPath included)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--git-path", "hooks"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=30,
            env=_git_env(),
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise HookError(f"cannot run git: {e}") from None
    if out.returncode != 0:
        raise HookError(f"{root} is not a git repository ({out.stderr.strip()})")
    return (Path(root) / out.stdout.strip()).resolve()


def hooks_path_config(root: Path) -> str | None:
    out = subprocess.run(
        ["git", "config", "--get", "core.hooksPath"],
        cwd=root,
        capture_output=True,
        text=True,
        env=_git_env(),
    )
    return out.stdout.strip() or None if out.returncode == 0 else None


def llmc_executable() -> str:
    """The llmc launcher of this installation, written into the hook as its first choice."""
    here = Path(sys.executable).parent / "llmc"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which("llmc") or "llmc"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def block(hook: str, executable: str) -> str:
    """The marked block: a detached background `llmc hooks notify`, never failing git."""
    return f"""{BEGIN}
# Keeps the llmc index fresh; `llmc hooks uninstall` removes this block. It runs in the
# background with no stdin/stdout/stderr and never changes the outcome of the git command.
(
  unset GIT_DIR GIT_INDEX_FILE GIT_WORK_TREE GIT_PREFIX GIT_COMMON_DIR GIT_OBJECT_DIRECTORY
  llmc_bin={_quote(executable)}
  [ -x "$llmc_bin" ] || llmc_bin=$(command -v llmc 2>/dev/null) || exit 0
  exec "$llmc_bin" hooks notify {hook}
) </dev/null >/dev/null 2>&1 &
{END}
"""


def _strip_block(text: str) -> tuple[str, bool]:
    """Remove every llmc block from ``text``; True when one was there."""
    lines = text.splitlines(keepends=True)
    out, inside, found = [], False, False
    for line in lines:
        s = line.strip()
        if s == BEGIN:
            inside, found = True, True
            continue
        if inside:
            if s == END:
                inside = False
            continue
        out.append(line)
    return "".join(out), found


def _is_shell(text: str) -> bool:
    first = text.split("\n", 1)[0]
    if not first.startswith("#!"):
        return True  # no interpreter line: git runs it with the shell
    words = first[2:].strip().split()
    if not words:
        return True
    prog = os.path.basename(words[0])
    if prog == "env" and len(words) > 1:
        prog = os.path.basename(next((w for w in words[1:] if not w.startswith("-")), ""))
    return prog in SHELLS


def _insert(text: str, blk: str) -> str:
    if text.startswith("#!"):
        first, _, rest = text.partition("\n")
        return f"{first}\n{blk}{rest}"
    return blk + text


def _wrapper(hook: str, blk: str) -> str:
    chained = hook + CHAINED_SUFFIX
    return f"""#!/bin/sh
{WRAPPER_MARK} ({chained}).
{blk}chained="$(dirname "$0")/{chained}"
if [ -x "$chained" ]; then exec "$chained" "$@"; fi
exit 0
"""


def _write(path: Path, text: str, mode: int) -> None:
    """Temp file and rename. The hooks folder may be tracked (``core.hooksPath`` naming a
    folder of the repository), so a temp name already there (a link a commit planted) is
    removed, never written through: the temp file is created ``O_EXCL | O_NOFOLLOW``."""
    tmp = path.with_name(f".{path.name}.llmc-tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, mode, follow_symlinks=False)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _executable_mode(mode: int) -> int:
    return (
        mode
        | stat.S_IXUSR
        | (stat.S_IXGRP if mode & stat.S_IRGRP else 0)
        | (stat.S_IXOTH if mode & stat.S_IROTH else 0)
    )


@dataclass(frozen=True)
class HookState:
    hook: str
    path: str
    state: str  # installed | chained | absent | other (a hook without llmc)
    detail: str = ""

    def to_json(self) -> dict[str, str]:
        return {"hook": self.hook, "path": self.path, "state": self.state, "detail": self.detail}


def _os_errors(action: str) -> Callable[[F], F]:
    """An OSError (a hooks path that is a file, a directory we may not write...) becomes
    one HookError line naming the path, not a traceback."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except OSError as e:
                where = f"{e.filename}: " if e.filename else ""
                raise HookError(f"cannot {action} hooks: {where}{e.strerror or e}") from None

        return run  # type: ignore[return-value]

    return wrap


@_os_errors("install")
def install(root: Path, executable: str | None = None) -> list[HookState]:
    """Install (or update) the llmc block in every hook; never lose an existing hook."""
    directory = hooks_dir(root)
    directory.mkdir(parents=True, exist_ok=True)
    ensure_state_dir(root)  # `.llmc/` opts this repository in (see notify)
    exe = executable or llmc_executable()
    out = []
    for hook in HOOKS:
        path = directory / hook
        blk = block(hook, exe)
        chained = directory / (hook + CHAINED_SUFFIX)
        if not path.exists() and not path.is_symlink():
            _write(path, "#!/bin/sh\n" + blk, 0o755)
            out.append(HookState(hook, str(path), "installed", "new hook"))
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            text = None
        mode = path.stat().st_mode & 0o7777 if path.exists() else 0o755
        if text is not None and WRAPPER_MARK in text:
            _write(path, _wrapper(hook, blk), _executable_mode(mode))
            out.append(HookState(hook, str(path), "chained", f"runs {chained.name} after llmc"))
        elif (
            text is not None
            and not path.is_symlink()
            and os.access(path, os.X_OK)
            and _is_shell(text)
        ):
            stripped, _ = _strip_block(text)
            _write(path, _insert(stripped, blk), mode)
            out.append(HookState(hook, str(path), "installed", "block added to existing hook"))
        else:
            if chained.exists() or chained.is_symlink():
                raise HookError(f"{chained} already exists; move it away and retry")
            os.replace(path, chained)
            _write(path, _wrapper(hook, blk), 0o755)
            out.append(HookState(hook, str(path), "chained", f"kept as {chained.name}"))
    return out


@_os_errors("uninstall")
def uninstall(root: Path) -> list[HookState]:
    """Remove the llmc block; restore chained hooks; delete hooks that held only llmc."""
    directory = hooks_dir(root)
    out = []
    for hook in HOOKS:
        path = directory / hook
        chained = directory / (hook + CHAINED_SUFFIX)
        try:
            text = path.read_text(encoding="utf-8") if path.is_file() else None
        except (UnicodeDecodeError, OSError):
            text = None
        if text is not None and WRAPPER_MARK in text:
            if chained.exists() or chained.is_symlink():
                os.replace(chained, path)
                out.append(HookState(hook, str(path), "other", "original hook restored"))
            else:
                path.unlink()
                out.append(HookState(hook, str(path), "absent", "removed"))
            continue
        if text is None:
            out.append(HookState(hook, str(path), "absent" if not path.exists() else "other"))
            continue
        stripped, found = _strip_block(text)
        if not found:
            out.append(HookState(hook, str(path), "other", "no llmc block"))
        elif stripped.strip() in ("", "#!/bin/sh"):
            path.unlink()
            out.append(HookState(hook, str(path), "absent", "removed"))
        else:
            _write(path, stripped, path.stat().st_mode & 0o7777)
            out.append(HookState(hook, str(path), "other", "llmc block removed"))
    return out


def status(root: Path) -> list[HookState]:
    directory = hooks_dir(root)
    out = []
    for hook in HOOKS:
        path = directory / hook
        try:
            text = path.read_text(encoding="utf-8") if path.is_file() else None
        except (UnicodeDecodeError, OSError):
            text = ""
        if text is None:
            out.append(HookState(hook, str(path), "absent"))
        elif WRAPPER_MARK in text:
            out.append(HookState(hook, str(path), "chained", f"runs {hook}{CHAINED_SUFFIX}"))
        elif BEGIN in text:
            executable = os.access(path, os.X_OK)
            out.append(
                HookState(
                    hook,
                    str(path),
                    "installed" if executable else "other",
                    "" if executable else "llmc block present but the hook is not executable",
                )
            )
        else:
            out.append(HookState(hook, str(path), "other", "a hook without the llmc block"))
    return out


# -- what the hook runs -----------------------------------------------------------------------
class _ReleaseOnStart:
    """Indexer progress that frees the "pending" slot once this run holds the writer lock.

    The indexer calls ``phase("scanning")`` right after taking the lock and before it
    walks the tree; from then on a newer change needs a newer run, so the next hook may
    queue.
    """

    def __init__(self, fd: int):
        self.fd: int | None = fd

    def _release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def phase(self, name: str, total: int | None) -> None:
        self._release()

    def advance(self, n: int = 1) -> None:
        pass

    def note(self, message: str) -> None:
        log.info("%s", message)


class _OneLineFormatter(logging.Formatter):
    """One record, one line: a file name with a newline (or ESC) in it is written as
    ``\\xNN``, so repository content can neither forge a record nor smuggle a line of code
    into whatever the log is."""

    def format(self, record: logging.LogRecord) -> str:
        return printable_name(super().format(record))


def _hook_logger(root: Path) -> logging.StreamHandler | None:
    """The hook's log, ``.llmc/hooks.log``, opened only after the state gate and never
    through a link (``open_state_file``)."""
    path = state_dir(root) / HOOK_LOG
    with contextlib.suppress(OSError):
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_size > LOG_ROTATE_BYTES:
            os.replace(path, path.with_name(HOOK_LOG + ".1"))  # renames a link, never follows
    try:
        fd = open_state_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    except OSError as e:
        log.debug("no hook log at %s: %s", path, e)
        return None
    handler = logging.StreamHandler(os.fdopen(fd, "a", encoding="utf-8"))
    handler.setFormatter(_OneLineFormatter("%(asctime)s pid %(process)d %(message)s"))
    handler.setLevel(logging.INFO)
    return handler


def notify(root: Path, hook: str) -> str:
    """What a hook runs: ask the daemon to reindex, else index here. Returns what it did:
    ``disabled`` (no ``.llmc/`` here), ``refused`` (a ``.llmc`` llmc will not use: a link,
    a file, state it cannot remove), ``daemon``, ``queued-behind`` (another waiting run
    will cover this change) or ``indexed``."""
    for var in [v for v in os.environ if v.startswith("GIT_")]:
        del os.environ[var]
    try:
        if not os.path.isdir(check_state_dir(root)):
            return "disabled"
        gate_state(root, force=True)  # before anything under .llmc/ is opened
    except LlmcError as e:
        log.warning("%s: not run: %s", hook, e)
        return "refused"
    handler = _hook_logger(root)
    llmc_log = logging.getLogger("llmc")
    level = llmc_log.level
    if handler is not None:
        llmc_log.addHandler(handler)
        if level == logging.NOTSET or level > logging.INFO:
            llmc_log.setLevel(logging.INFO)
    try:
        return _notify(root, hook)
    except Exception as e:
        log.warning("%s: failed: %s", hook, e)
        raise
    finally:
        if handler is not None:
            llmc_log.removeHandler(handler)
            llmc_log.setLevel(level)
            handler.close()
            handler.stream.close()


def _notify(root: Path, hook: str) -> str:
    from llmc.daemon.client import request

    try:
        request(root, "reindex", {"reason": f"hook:{hook}"}, connect_timeout=1.0, timeout=10.0)
        log.info("%s: asked the daemon to reindex", hook)
        return "daemon"
    except DaemonUnavailable:
        pass
    except LlmcError as e:
        log.info("%s: daemon refused (%s); indexing here", hook, e)
    fd = open_state_file(state_dir(root) / PENDING_LOCK, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        log.info("%s: another hook run is already waiting; it will see this change", hook)
        return "queued-behind"
    progress = _ReleaseOnStart(fd)
    try:
        with contextlib.suppress(OSError):
            os.nice(10)
        from llmc.config import load_config
        from llmc.index.indexer import Indexer

        started = time.monotonic()
        cfg = load_config(root)
        summary = Indexer(root, cfg, progress).run()
        log.info(
            "%s: indexed %d files, removed %d in %.1fs (generation %d)",
            hook,
            summary.files_indexed,
            summary.files_removed,
            time.monotonic() - started,
            summary.generation,
        )
        from llmc.team.publish import publish_after_index

        publish_after_index(root, cfg, hook)  # team.publish: to the team store
        return "indexed"
    finally:
        progress._release()


__all__ = [
    "BEGIN",
    "END",
    "HOOKS",
    "HookState",
    "block",
    "hooks_dir",
    "install",
    "notify",
    "status",
    "uninstall",
]
