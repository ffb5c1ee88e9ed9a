"""teammed: a clinical team of LLM agents deliberating as one optimizable DSPy program."""

# Importing or calling teammed changes no process-global state (os.environ, the garbage collector,
# litellm's settings); the `teammed` command's own settings: teammed._litellm.for_the_command_line.

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
