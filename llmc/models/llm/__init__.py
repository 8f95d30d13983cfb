"""Local LLMs behind one call: ``get_llm(cfg).generate(prompt, ...) -> Generation``.

Providers: ``ollama`` (a local ollama server), ``embedded`` (a GGUF model in-process via
llama.cpp; default SmolLM2-135M-Instruct), ``openai`` (any OpenAI-compatible server:
``llm.base_url``), ``none``; ``auto`` picks the first that works.
Any failure to answer raises llmc.errors.LLMUnavailable (LLMTimeout when too slow), one
line long.
"""

# LLMTimeout, LLMUnavailable live in llmc.errors; named here too because llmc/search imports
# them from this package.
from llmc.errors import LLMTimeout, LLMUnavailable
from llmc.models.llm._base import LLM, Generation, NoneLLM
from llmc.models.llm._embedded import EmbeddedLLM, default_model_path, resolve_model_path
from llmc.models.llm._ollama import OllamaLLM, resolve_host
from llmc.models.llm._openai import OpenAILLM
from llmc.models.llm._select import (
    PROVIDERS,
    ProviderStatus,
    clear_cache,
    get_llm,
    provider_statuses,
)

__all__ = [
    "LLM",
    "PROVIDERS",
    "EmbeddedLLM",
    "Generation",
    "LLMTimeout",
    "LLMUnavailable",
    "NoneLLM",
    "OllamaLLM",
    "OpenAILLM",
    "ProviderStatus",
    "clear_cache",
    "default_model_path",
    "get_llm",
    "provider_statuses",
    "resolve_host",
    "resolve_model_path",
]
