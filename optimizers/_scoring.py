"""Run a program over labelled questions and score each one: the optimizers' evaluation loop.

Each question is answered by `teammed.answering.answer`, as ``run`` answers it, so a scored row is the
`ResultRow` ``run`` would write (without the run's identity). A failing question is scored wrong (it
stays in the denominator) rather than retried or dropped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import dspy

from teammed.answering import answer
from teammed.errors import DataError
from teammed.programs.parallel import parallel_map
from teammed.records import ResultRow
from teammed.types import Question

__all__ = ["score_questions", "require_labels", "accuracy_of", "standard_error", "mean_of", "tokens_of", "cell_result"]


def require_labels(questions: Sequence[Question]) -> None:
    """Refuse a question without a gold answer: scoring (and tuning) needs labelled questions."""
    for q in questions:
        if q.answer_idx is None:
            raise DataError(f"question {q.id!r} has no gold answer; optimizers and evaluation need labelled "
                            f"questions (drop it or use a split with answers)")


def score_questions(
    program: dspy.Module, questions: Sequence[Question], lm: dspy.BaseLM, *, num_threads: int = 1
) -> list[ResultRow]:
    """One `ResultRow` per question, in input order (`teammed.answering.answer`)."""
    require_labels(questions)

    def one(question: Question) -> ResultRow:
        return answer(program, question, lm).row

    if num_threads <= 1:
        return [one(q) for q in questions]
    return parallel_map(one, questions, max_workers=min(num_threads, len(questions)))


def tokens_of(row: ResultRow) -> int:
    """A row's billable tokens, prompt and completion (the same whether or not a cache answered)."""
    return row.prompt_tokens + row.completion_tokens


def cell_result(rows: Sequence[ResultRow]) -> dict[str, Any]:
    """Scored rows as a work-queue cell keeps them: per-question outcomes, accuracy and billable spend."""
    correct = [bool(r.correct) for r in rows]  # a failed question is never correct
    return {"ids": [r.id for r in rows], "correct": correct, "failed": [r.failed for r in rows],
            "value": sum(correct) / len(correct) if correct else 0.0, "calls": sum(r.calls for r in rows),
            "tokens": sum(tokens_of(r) for r in rows), "cost_usd": sum(r.cost_usd for r in rows)}


def accuracy_of(rows: Sequence[ResultRow]) -> float:
    """Correct rows over all rows: a failed question counts as wrong."""
    return sum(bool(r.correct) for r in rows) / len(rows) if rows else 0.0


def mean_of(rows: Sequence[ResultRow], value: Callable[[ResultRow], float]) -> float:
    return sum(float(value(r)) for r in rows) / len(rows) if rows else 0.0


def standard_error(p: float, n: int) -> float:
    """The binomial standard error of an accuracy ``p`` over ``n`` questions: sqrt(p(1-p)/n)."""
    return math.sqrt(p * (1 - p) / n) if n else 0.0
