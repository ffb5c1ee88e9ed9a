"""Run a program over labelled examples and score each one, with its LM accounting.

The optimizers' own evaluation loop: each example runs under ``dspy.context`` (never
``dspy.configure``), sequentially or in a small thread pool that copies the caller's
context, and a failing example is scored wrong rather than retried or dropped.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import dspy

from teammed import usage
from teammed.adapter import SchemaAdapter
from teammed.errors import FatalBackendError
from teammed.programs.parallel import parallel_map

__all__ = ["score_examples", "accuracy_of", "standard_error", "mean_of"]

logger = logging.getLogger(__name__)


def _score_one(program: dspy.Module, example: dspy.Example, lm: dspy.BaseLM) -> dict[str, Any]:
    answer, error, kind, fix = None, None, None, ""
    with dspy.context(lm=lm, adapter=SchemaAdapter(), disable_history=True, trace=[]), usage.track() as used:
        try:
            answer = getattr(program(**example.inputs()), "answer", None)
        except Exception as exc:  # scored wrong and reported, never dropped
            error = f"{type(exc).__name__}: {exc}"
            kind, fix = _fatal_kind(exc)
            logger.warning("example %s failed: %s", example.get("id", "?"), error)
    gold = example.get("answer")
    return {
        "id": example.get("id"),
        "gold": gold,
        "answer": answer,
        "correct": error is None and answer is not None and answer == gold,
        "error": error,
        "error_kind": kind,
        "fix": fix if kind else None,
        "calls": used.calls,
        "tokens": used.prompt_tokens + used.completion_tokens,
        "cost_usd": used.cost_usd,
    }


def _fatal_kind(exc: BaseException | None) -> tuple[str | None, str]:
    """The kind and fix of the FatalBackendError behind ``exc`` (None when there is none)."""
    for _ in range(20):
        if exc is None:
            break
        if isinstance(exc, FatalBackendError):
            return exc.kind, exc.fix
        exc = exc.__cause__ or exc.__context__
    return None, ""


def score_examples(
    program: dspy.Module, examples: Sequence[dspy.Example], lm: dspy.BaseLM, *, num_threads: int = 1
) -> list[dict[str, Any]]:
    """One row per example, in input order: answer, gold, correct, error, calls, tokens, cost."""
    if num_threads <= 1:
        return [_score_one(program, ex, lm) for ex in examples]
    return parallel_map(lambda example: _score_one(program, example, lm), examples,
                        max_workers=min(num_threads, len(examples)))


def accuracy_of(rows: Sequence[dict[str, Any]]) -> float:
    return sum(bool(r["correct"]) for r in rows) / len(rows) if rows else 0.0


def mean_of(rows: Sequence[dict[str, Any]], key: str) -> float:
    return sum(float(r[key]) for r in rows) / len(rows) if rows else 0.0


def standard_error(p: float, n: int) -> float:
    """The binomial standard error of an accuracy ``p`` over ``n`` questions: sqrt(p(1-p)/n)."""
    return math.sqrt(p * (1 - p) / n) if n else 0.0
