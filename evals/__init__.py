"""Evaluation of teammed runs: metrics over result rows, statistics across seeds and systems,
and the report (tables, figures, transcripts) built from run directories.

Names are imported on first use, so summarizing a run never loads the plotting stack.
"""

from __future__ import annotations

from teammed.lazy import lazy_exports

__all__ = ["summarize", "Summarizer", "build_report", "mean_se", "mcnemar", "paired_bootstrap", "ReportError"]

_HOME = {"summarize": "metrics", "Summarizer": "metrics", "build_report": "report", "ReportError": "report",
         "mean_se": "stats", "mcnemar": "stats", "paired_bootstrap": "stats"}
__getattr__, __dir__ = lazy_exports(__name__, {name: f"{__name__}.{home}" for name, home in _HOME.items()}, globals())
