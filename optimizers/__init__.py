"""Optimizers: compile teamwork programs with DSPy, and search the special set with Optuna."""

from teammed.optimizers.compile import (
    OPTIMIZERS,
    compile_program,
    evaluate,
    examples_from_questions,
    split_questions,
)
from teammed.optimizers.metrics import accuracy_metric, deliberation_feedback
from teammed.optimizers.report import search_report
from teammed.optimizers.search import open_study, search_special_set
from teammed.optimizers.special_set import SpecialSet, load_special_set, write_special_set
from teammed.programs.load import load_program
from teammed.programs.persist import save_program

__all__ = [
    "OPTIMIZERS",
    "compile_program",
    "evaluate",
    "examples_from_questions",
    "split_questions",
    "accuracy_metric",
    "deliberation_feedback",
    "save_program",
    "load_program",
    "SpecialSet",
    "search_special_set",
    "open_study",
    "write_special_set",
    "load_special_set",
    "search_report",
]
