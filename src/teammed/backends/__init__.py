"""Language-model backends: litellm for any provider, the embedded local model, a scripted fake."""

from teammed.backends.base import MeteredLM
from teammed.backends.scripted import ScriptedCall, ScriptedLM

__all__ = ["MeteredLM", "ScriptedLM", "ScriptedCall"]
