"""Importing this module lets litellm load its packaged price map instead of fetching one.

litellm (which DSPy imports) downloads its model cost map at import unless
``LITELLM_LOCAL_MODEL_COST_MAP`` is true: offline, that stalls the import on retries. The
subpackages that import DSPy or litellm import this module first. It sets the variable only
when the user has not (``os.environ.setdefault``), and ``import teammed`` alone never imports
it, so it leaves ``os.environ`` as it was.
"""

from __future__ import annotations

import os

__all__ = ["VARIABLE"]

VARIABLE = "LITELLM_LOCAL_MODEL_COST_MAP"

os.environ.setdefault(VARIABLE, "True")
