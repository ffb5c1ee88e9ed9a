"""litellm, imported with its packaged price map (`litellm`), leaving ``os.environ`` as it was.

litellm downloads its model cost map at import unless ``LITELLM_LOCAL_MODEL_COST_MAP`` is true:
offline, that stalls the import on retries. teammed imports litellm only here: when the user has
not set the variable, it is set for the import and removed again, so no teammed import or call
leaves a change in the process's environment (a child process never inherits one). A user's own
value, true or false, is only read.
"""

from __future__ import annotations

import os
import threading
from types import ModuleType

__all__ = ["VARIABLE", "litellm"]

VARIABLE = "LITELLM_LOCAL_MODEL_COST_MAP"

_LOCK = threading.Lock()
_MODULE: ModuleType | None = None


def litellm() -> ModuleType:
    """The litellm module, imported on first use (see the module's docstring)."""
    global _MODULE
    if _MODULE is None:
        with _LOCK:
            if _MODULE is None:
                _MODULE = _import()
    return _MODULE


def _import() -> ModuleType:
    if VARIABLE in os.environ:
        import litellm as module
    else:
        os.environ[VARIABLE] = "True"
        try:
            import litellm as module
        finally:
            os.environ.pop(VARIABLE, None)
    module.suppress_debug_info = True  # no "Give Feedback / Get Help" banners on stderr
    return module
