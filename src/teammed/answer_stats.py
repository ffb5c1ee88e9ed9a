"""Two reference figures printed beside every accuracy, shared by the runner's summary and the
reports (`teammed.evals.metrics`): what always answering the most common gold letter would score,
and how concentrated a system's own answers are (a constant predictor's accuracy is that letter's
share of the gold answers, not evidence of reasoning)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Protocol

from pydantic import BaseModel, ConfigDict

__all__ = ["CONSTANT_SHARE", "CONSTANT_MIN_N", "Answered", "MajorityBaseline", "AnswerSpread", "majority_baseline",
           "answer_spread"]

# A system is flagged as a constant predictor when, over at least CONSTANT_MIN_N answered
# questions, one letter is CONSTANT_SHARE or more of its answers.
CONSTANT_SHARE = 0.9
CONSTANT_MIN_N = 10


class Answered(Protocol):
    """What these figures read of a row: a `teammed.records.ResultRow`, or a digest of one."""

    @property
    def labeled(self) -> bool: ...
    @property
    def gold(self) -> str | None: ...
    @property
    def prediction(self) -> str | None: ...
    @property
    def failed(self) -> bool: ...


class MajorityBaseline(BaseModel):
    """The most common gold letter and the accuracy of always answering it."""

    model_config = ConfigDict(frozen=True)
    letter: str
    accuracy: float


class AnswerSpread(BaseModel):
    """The most common predicted letter among answered (not failed) questions and its share."""

    model_config = ConfigDict(frozen=True)
    top: str
    share: float
    n_answered: int
    constant: bool


def majority_baseline(rows: Iterable[Answered]) -> MajorityBaseline | None:
    """Over the labeled rows; None when there is none."""
    golds = [str(row.gold) for row in rows if row.labeled and row.gold is not None]
    if not golds:
        return None
    letter, count = _top(golds)
    return MajorityBaseline(letter=letter, accuracy=count / len(golds))


def answer_spread(rows: Iterable[Answered]) -> AnswerSpread | None:
    """Over the answered rows; ``constant`` when the top letter's share is at least `CONSTANT_SHARE` of
    at least `CONSTANT_MIN_N` answers. None when no row was answered."""
    answers = [str(p) for row in rows if (p := row.prediction) is not None and not row.failed]
    if not answers:
        return None
    top, count = _top(answers)
    share = count / len(answers)
    return AnswerSpread(top=top, share=share, n_answered=len(answers),
                        constant=len(answers) >= CONSTANT_MIN_N and share >= CONSTANT_SHARE)


def _top(letters: list[str]) -> tuple[str, int]:
    """The most common letter and its count; a tie goes to the earliest letter, so the figure never
    depends on the order the rows came in (a run's rows arrive in completion order)."""
    return min(Counter(letters).items(), key=lambda kv: (-kv[1], kv[0]))
