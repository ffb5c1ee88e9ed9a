"""teammed: a clinical team of LLM agents deliberating as one optimizable DSPy program."""

# Nothing teammed does leaves a change in os.environ: litellm is imported with its offline price
# map asked for only during the import (never over a user's setting), see teammed._litellm_env.

from typing import TYPE_CHECKING, Any

from teammed.errors import BackendError, ConfigError, DataError, ProgramMismatchError, TeammedError

if TYPE_CHECKING:
    from teammed.config import PRESETS, TeamworkConfig, preset
    from teammed.types import Question

__all__ = [
    "TeamworkConfig",
    "PRESETS",
    "preset",
    "Question",
    "TeammedError",
    "ConfigError",
    "BackendError",
    "DataError",
    "ProgramMismatchError",
]
__version__ = "0.1.0"

# Loaded on first use (PEP 562): `teammed --help` then needs no pydantic.
_LAZY = {"TeamworkConfig": "teammed.config", "PRESETS": "teammed.config", "preset": "teammed.config",
         "Question": "teammed.types"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'teammed' has no attribute {name!r}")
