"""litellm, imported on first use and in one place; and the ``teammed`` command's own settings of it.

Importing teammed (or DSPy) does not import litellm, and library code changes none of its settings
nor, after the import, the environment. When teammed is the first to import litellm and the user has
not set ``LITELLM_LOCAL_MODEL_COST_MAP``, it is set for the import only (litellm reads it there, to
take its packaged price map instead of fetching one, which stalls and warns offline) and removed
again. The command line (`for_the_command_line`, from `teammed.cli.main`) keeps it for the process
and asks for no banners on stdout.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

__all__ = ["litellm", "for_the_command_line"]

_CLI, _IMPORTING, _PACKAGED_MAP = threading.Event(), threading.Lock(), "LITELLM_LOCAL_MODEL_COST_MAP"


def litellm() -> Any:
    """The litellm module (quiet under the command line); its packaged price map unless the user chose."""
    if "litellm" not in sys.modules:
        with _IMPORTING:
            chose = _PACKAGED_MAP in os.environ
            os.environ[_PACKAGED_MAP] = os.environ.get(_PACKAGED_MAP, "True")
            try:
                import litellm  # noqa: F401
            finally:
                if not chose:
                    os.environ.pop(_PACKAGED_MAP, None)
    import litellm as module

    if _CLI.is_set():
        module.suppress_debug_info = True
    return module


def for_the_command_line() -> None:
    """The ``teammed`` command's settings, before anything imports litellm: prices from the installed
    litellm's packaged map (``LITELLM_LOCAL_MODEL_COST_MAP=True`` unless the user set it: the same
    prices online and offline, and no fetch at import), and no "Give Feedback"/"Provider List"
    banner on stdout, which carries results, at each error or unknown model litellm meets."""
    os.environ.setdefault(_PACKAGED_MAP, "True")
    _CLI.set()
