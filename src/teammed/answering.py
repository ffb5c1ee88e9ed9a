"""Answer one question: the one place a system meets a question, for every command.

`answer` runs a program on a `Question` under ``dspy.context`` (never ``dspy.configure``) with
a `SchemaAdapter`, no DSPy history and a trace of its own, counts its LM calls
(`teammed.usage.track`) and returns the `ResultRow`: the answer or the error, the accounting and
the system's record and transcript. ``run`` writes these rows; ``search``, ``compile``, ``tune``
and ``reproduce`` score with them (`teammed.optimizers._scoring`), so a row means the same
everywhere:

* a question whose program raised, or whose answer names no option, is *failed*: ``prediction``
  null, ``correct`` false (it stays in the accuracy denominator), ``error`` naming why,
  ``error_type``/``error_kind`` classifying it (a `NoAnswerError` row has no prediction);
* an unlabeled question (no gold) has ``correct`` null;
* tokens and cost are *billable* (the same whether or not a cache answered), ``spent_*`` what
  was paid.

The exception behind a failed row is returned beside it (the run loop tells a streak of one
fatal backend error from other failures by it). A closing backend (the run is stopping) is
re-raised: the question is unfinished, not failed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import dspy
from pydantic import BaseModel, ValidationError

from teammed import usage as usage_mod
from teammed.adapter import SchemaAdapter
from teammed.errors import FatalBackendError, cause_of
from teammed.results import ResultRow, RunIdentity, typed_record
from teammed.types import Question

__all__ = ["Answered", "answer"]

logger = logging.getLogger(__name__)

BINARY_POSITIVE = {"yes", "true", "present"}


class Answered(NamedTuple):
    """One question's row, and the exception behind it when it failed by raising."""

    row: ResultRow
    failure: BaseException | None


def _binary_positive(options: dict[str, str]) -> str | None:
    if len(options) == 2 or {v.strip().lower() for v in options.values()} <= {"yes", "no", "maybe"}:
        for letter, text in options.items():
            if text.strip().lower() in BINARY_POSITIVE:
                return letter
    return None


class RecordMismatch(Exception):
    """A system's record does not match its system's model: a bug of the system, failing its row loudly."""


def _typed(program: dspy.Module, raw: Any, identity: RunIdentity | None) -> tuple[Any, dict[str, Any] | None]:
    """The row's record as its system's model, and the record as written when the system has none (a
    user's own program: ``custom_record``). The system is the program's ``system_name``, else the run's.
    A record its system's model refuses raises `RecordMismatch`."""
    system = getattr(program, "system_name", None) or (identity.system if identity else None)
    if raw is None or (isinstance(raw, dict) and not raw):
        return None, None
    try:
        found = typed_record(raw, system=system)
    except ValidationError as exc:
        raise RecordMismatch(f"the {system} record does not match its model ({exc.errors()[0]['loc']}: "
                             f"{exc.errors()[0]['msg']}); a bug of the system") from exc
    if found is not None:
        return found, None
    return None, (raw.model_dump(mode="json") if isinstance(raw, BaseModel) else dict(raw))


@dataclass(frozen=True)
class _RecordFacts:
    """What a row carries of its record besides the record: the team's roles, the trust scores and the
    counts of repairs and fallbacks (typed records by attribute; a user's own dict record by key)."""

    roles: list[str | None]
    trust: dict[str, float] | None = None
    ranking_repairs: int = 0
    fallbacks: int = 0
    fallbacks_by_behaviour: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, typed: Any, custom: dict[str, Any] | None) -> _RecordFacts:
        if typed is not None:
            return cls(roles=[a.role for a in typed.agents], trust=getattr(typed, "trust", None),
                       ranking_repairs=getattr(typed, "ranking_repairs", 0), fallbacks=typed.fallbacks,
                       fallbacks_by_behaviour=dict(typed.fallbacks_by_behaviour))
        record = custom or {}
        listed = record.get("agents")
        agents = listed if isinstance(listed, list) else []
        by_behaviour = record.get("fallbacks_by_behaviour")
        return cls(roles=[a.get("role") for a in agents if isinstance(a, dict)],
                   trust=record.get("trust") if isinstance(record.get("trust"), dict) else None,
                   ranking_repairs=_count(record, "ranking_repairs"), fallbacks=_count(record, "fallbacks"),
                   fallbacks_by_behaviour=by_behaviour if isinstance(by_behaviour, dict) else {})


def _confidence(value: Any) -> str | None:
    return value if value in ("High", "Medium", "Low") else None


def _count(record: dict[str, Any], key: str) -> int:
    value = record.get(key)
    if isinstance(value, int):  # a bool counts as 0 or 1
        return int(value)
    if isinstance(value, list | dict):
        return len(value)
    return 0


def answer(program: dspy.Module, question: Question, lm: dspy.BaseLM, *, identity: RunIdentity | None = None,
           deployment: str | None = None) -> Answered:
    """Run ``program`` on ``question`` with ``lm`` and return its `ResultRow` (and the exception
    behind a failure). ``identity`` fills the row's run fields (data set, split, seed, system,
    label, configuration, program hash; null without one) and ``deployment`` names the backend
    that answered. Never raises for a failing question, except a backend closed by a stopping run."""
    started = time.perf_counter()
    prediction, failure, error, used = _predict(program, question, lm)
    chosen = getattr(prediction, "answer", None)
    if failure is None and chosen not in question.options:
        error = f"the system returned no valid option (got {chosen!r})"
    if error is not None:
        chosen = None
    try:
        typed, custom = _typed(program, getattr(prediction, "record", None), identity)
    except RecordMismatch as exc:  # the answer cannot be trusted with a record the system did not mean
        logger.error("question %s: %s", question.id, exc)
        failure, error, chosen, typed, custom = exc, f"RecordMismatch: {exc}", None, None, None
    facts = _RecordFacts.of(typed, custom)
    fatal = cause_of(failure, FatalBackendError)
    spent: dict[str, Any] = dict(used.as_dict())  # billable tokens and cost, spent_* when reported
    labeled = question.answer_idx is not None
    counted = _counted(spent, facts)
    spent.pop("latency_s", None)
    fields: dict[str, Any] = dict(
        id=question.id,
        **{name: getattr(identity, name) if identity else None for name in _RUN_FIELDS},  # null without one
        deployment=deployment,
        gold=question.answer_idx,
        prediction=chosen,
        correct=(error is None and chosen == question.answer_idx) if labeled else None,
        labeled=labeled,
        failed=error is not None,
        error=error,
        error_type=type(failure).__name__ if failure is not None else "InvalidOption" if error else None,
        error_kind=getattr(fatal, "kind", None),
        confidence=_confidence(getattr(prediction, "confidence", None)) if error is None else None,
        question=question.question,  # the viewer shows the stem
        context=question.context,
        options=dict(question.options),
        binary_positive=_binary_positive(question.options),
        latency_s=round(time.perf_counter() - started, 4),
        lm_latency_s=round(used.latency_s, 4),
        n_agents=len(facts.roles) or None,
        roles=facts.roles,
        trust=facts.trust,
        rationale=getattr(prediction, "rationale", None),
        record=typed,
        custom_record=custom,
        transcript=list(getattr(prediction, "transcript", None) or []),
        meta=question.meta,
    )
    return Answered(ResultRow.model_validate({**spent, **counted, **fields}), failure)


def _predict(program: dspy.Module, question: Question,
             lm: dspy.BaseLM) -> tuple[Any, Exception | None, str | None, usage_mod.Usage]:
    """The program's prediction on ``question`` (None if it raised), the exception and its message,
    and the calls it made."""
    prediction, error, failure = None, None, None
    # No DSPy history or shared trace: a long run would otherwise keep every call's messages and
    # response in memory (this question's trace lives only while it runs).
    with dspy.context(lm=lm, adapter=SchemaAdapter(), disable_history=True, trace=[]), usage_mod.track() as used:
        try:
            inputs = {"question": question.question, "options": dict(question.options), "context": question.context}
            if question.image:
                inputs["image"] = question.image
            prediction = program(**inputs)
        except Exception as exc:  # recorded as a failed row, never turned into an answer
            if type(exc).__name__ == "BackendClosedError":  # the run is stopping: unfinished, not failed
                raise
            failure = exc
            error = f"{type(exc).__name__}: {exc}"
            logger.warning("question %s failed: %s", question.id, error)
    return prediction, failure, error, used


def _counted(spent: dict[str, Any], facts: _RecordFacts) -> dict[str, Any]:
    """The larger of what the backend/adapter counted (taken out of ``spent``) and what the record counted."""
    return {
        "ranking_repairs": max(int(spent.pop("ranking_repairs", 0) or 0), facts.ranking_repairs),
        "fallbacks": max(int(spent.pop("fallbacks", 0) or 0), facts.fallbacks),
        # per behaviour: what was counted while the system ran (peers), else its record's (teamwork)
        "fallbacks_by_behaviour": spent.pop("fallbacks_by_behaviour", None) or facts.fallbacks_by_behaviour,
    }


_RUN_FIELDS = ("dataset", "dataset_sha256", "split", "seed", "system", "label", "program_sha256", "config")
