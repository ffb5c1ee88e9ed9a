"""Language-model backends: litellm for any provider, the embedded local model, a scripted fake.

The backends a user constructs: `LiteLLMBackend` (a DSPy LM for any litellm model, or an
OpenAI-compatible server with ``api_base``), `OpenAICompatibleClient` (the direct HTTP client of an
OpenAI-compatible server) and `ScriptedLM` (answers from a script, for tests). `MeteredLM` is
their base: it counts calls and tokens.
"""

from typing import TYPE_CHECKING, Any

from teammed.backends.base import MeteredLM
from teammed.backends.scripted import ScriptedCall, ScriptedLM

if TYPE_CHECKING:
    from teammed.backends.litellm_backend import LiteLLMBackend
    from teammed.backends.openai_http import OpenAICompatibleClient

__all__ = ["MeteredLM", "LiteLLMBackend", "OpenAICompatibleClient", "ScriptedLM", "ScriptedCall"]

# Loaded on first use (PEP 562): the litellm and httpx clients are not imported with the package.
_LAZY = {"LiteLLMBackend": "teammed.backends.litellm_backend",
         "OpenAICompatibleClient": "teammed.backends.openai_http"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'teammed.backends' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
