"""teammed: a clinical team of LLM agents deliberating as one optimizable DSPy program."""

# Importing or calling teammed changes no process-global state (os.environ, the garbage collector,
# litellm's settings); the `teammed` command's own settings: teammed._litellm.for_the_command_line.

from typing import TYPE_CHECKING

from teammed.errors import BackendError, ConfigError, DataError, ProgramMismatchError, TeammedError
from teammed.lazy import lazy_exports

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

# Loaded on first use: `teammed --help` then needs no pydantic.
__getattr__, __dir__ = lazy_exports(__name__, {"TeamworkConfig": "teammed.config", "PRESETS": "teammed.config",
                                               "preset": "teammed.config", "Question": "teammed.types"}, globals())
