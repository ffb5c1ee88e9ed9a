"""Language-model backends: litellm for any provider, the embedded local model, a scripted fake.

The backends a user constructs: `LiteLLMBackend` (a DSPy LM for any litellm model, or an
OpenAI-compatible server with ``api_base``), `OpenAICompatibleClient` (the direct HTTP client of an
OpenAI-compatible server) and `ScriptedLM` (answers from a script, for tests). `MeteredLM` is
their base: it counts calls and tokens.
"""

from typing import TYPE_CHECKING

from teammed.backends.base import MeteredLM
from teammed.backends.scripted import ScriptedCall, ScriptedLM
from teammed.lazy import lazy_exports

if TYPE_CHECKING:
    from teammed.backends.litellm_backend import LiteLLMBackend
    from teammed.backends.openai_http import OpenAICompatibleClient

__all__ = ["MeteredLM", "LiteLLMBackend", "OpenAICompatibleClient", "ScriptedLM", "ScriptedCall"]

# Loaded on first use: the litellm and httpx clients are not imported with the package.
__getattr__, __dir__ = lazy_exports(__name__, {"LiteLLMBackend": "teammed.backends.litellm_backend",
                                               "OpenAICompatibleClient": "teammed.backends.openai_http"}, globals())
