"""Evaluation of teammed runs: metrics over result rows, statistics across seeds and systems,
and the report (tables, figures, transcripts) built from run directories."""

from __future__ import annotations

from teammed.evals.metrics import summarize
from teammed.evals.report import ReportError, build_report
from teammed.evals.stats import mcnemar, mean_se, paired_bootstrap

__all__ = ["summarize", "build_report", "mean_se", "mcnemar", "paired_bootstrap", "ReportError"]
