"""Evaluation of teammed runs: metrics over result rows, statistics across seeds and systems,
and the report (tables, figures, transcripts) built from run directories.

Names are imported on first use, so summarizing a run never loads the plotting stack.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["summarize", "Summarizer", "build_report", "mean_se", "mcnemar", "paired_bootstrap", "ReportError"]

_HOME = {"summarize": "metrics", "Summarizer": "metrics", "build_report": "report", "ReportError": "report",
         "mean_se": "stats", "mcnemar": "stats", "paired_bootstrap": "stats"}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
