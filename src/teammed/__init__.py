"""teammed: a clinical team of LLM agents deliberating as one optimizable DSPy program."""

import os as _os

# Importing litellm offline would otherwise stall fetching a remote price map.
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# ruff: noqa: E402

from teammed.config import PRESETS, TeamworkConfig, preset
from teammed.errors import BackendError, ConfigError, DataError, ProgramMismatchError, TeammedError
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
