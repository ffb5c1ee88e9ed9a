"""litellm, imported on first use and in one place; and the ``teammed`` command's own settings of it.

Importing teammed (or DSPy) does not import litellm, and library code changes none of its settings
nor the environment. The command line (`for_the_command_line`, from `teammed.cli.main`) asks for
prices from the installed litellm's packaged map and no banners on stdout.
"""

from __future__ import annotations

import os
import threading
from typing import Any

__all__ = ["litellm", "for_the_command_line"]

_CLI = threading.Event()


def litellm() -> Any:
    """The litellm module (quiet under the command line)."""
    import litellm as module

    if _CLI.is_set():
        module.suppress_debug_info = True
    return module


def for_the_command_line() -> None:
    """The ``teammed`` command's settings, before anything imports litellm: prices from the installed
    litellm's packaged map (``LITELLM_LOCAL_MODEL_COST_MAP=True`` unless the user set it: the same
    prices online and offline, and no fetch at import), and no "Give Feedback"/"Provider List"
    banner on stdout, which carries results, at each error or unknown model litellm meets."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    _CLI.set()
