"""Compile a program with one of DSPy's optimizers, and evaluate programs on labelled questions.

Every compile runs inside ``dspy.context(lm=..., adapter=...)`` (a `SchemaAdapter` that notes repaired
outputs); nothing is configured globally.
"""

from __future__ import annotations

import difflib
import logging
import random
from collections.abc import Sequence
from typing import Any, Literal

import dspy

from teammed.errors import ConfigError, DataError
from teammed.optimizers._demos import DegradedOutputs, NotingAdapter, clean_traces, drop_unsound_demos
from teammed.optimizers._scoring import accuracy_of, require_labels, score_questions
from teammed.optimizers.metrics import accuracy_metric, deliberation_feedback
from teammed.programs.parallel import IN_TURN_SETTING
from teammed.records import ResultRow
from teammed.types import Question

__all__ = ["OPTIMIZERS", "MAX_DEMOS", "compile_program", "evaluate", "examples_from_questions", "split_questions"]

logger = logging.getLogger(__name__)

OPTIMIZERS = frozenset({"labeled", "bootstrap", "random-search", "mipro", "gepa"})
_MIPRO_MINIBATCH = 35


def examples_from_questions(questions: Sequence[Question]) -> list[dspy.Example]:
    """One `dspy.Example` per question: inputs question, options, context; label ``answer``."""
    require_labels(questions)
    return [dspy.Example(id=q.id, question=q.question, options=dict(q.options), context=q.context,
                         answer=q.answer_idx).with_inputs("question", "options", "context") for q in questions]


def split_questions(
    questions: Sequence[Question], *, train: int, val: int, test: int, seed: int = 0
) -> tuple[list[Question], list[Question], list[Question]]:
    """Disjoint train/val/test lists, the same for the same questions and seed whatever their order."""
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        raise DataError("question ids must be unique to split them; deduplicate the data set first")
    if min(train, val, test) < 0:
        raise ConfigError(f"split sizes cannot be negative (got train={train}, val={val}, test={test})")
    if train + val + test > len(questions):
        raise ConfigError(f"a split of train={train} + val={val} + test={test} needs {train + val + test} "
                          f"questions but only {len(questions)} are available; lower the sizes")
    shuffled = sorted(questions, key=lambda q: q.id)
    random.Random(seed).shuffle(shuffled)
    return shuffled[:train], shuffled[train:train + val], shuffled[train + val:train + val + test]


def _as_question(item: Question | dspy.Example, index: int) -> Question:
    """A question as it is (`Question`), or read from a labelled `dspy.Example` (its ``id``, else its position)."""
    if isinstance(item, Question):
        return item
    return Question(id=str(item.get("id") or index), question=item.question, options=dict(item.options),
                    context=item.get("context"), image=item.get("image"), answer_idx=item.get("answer"))


def evaluate(
    program: dspy.Module, questions: Sequence[Question] | Sequence[dspy.Example], lm: dspy.BaseLM, *,
    num_threads: int = 1,
) -> tuple[float, list[ResultRow]]:
    """Accuracy over ``questions`` (or labelled `dspy.Example`s) and one `ResultRow` per question, as
    ``run`` answers it (`teammed.answering.answer`): answer, correct, failure, calls, billable tokens."""
    rows = score_questions(program, [_as_question(q, i) for i, q in enumerate(questions)], lm,
                           num_threads=num_threads)
    return accuracy_of(rows), rows


MAX_DEMOS = 2  # demos per predictor a compile may give (bootstrapped and labelled alike)


def compile_program(
    student: dspy.Module,
    *,
    optimizer: str,
    trainset: list[dspy.Example],
    valset: list[dspy.Example],
    lm: dspy.BaseLM,
    teacher_lm: dspy.BaseLM | None = None,
    reflection_lm: dspy.BaseLM | None = None,
    seed: int = 0,
    num_threads: int = 1,
    max_demos: int = MAX_DEMOS,
    auto: Literal["light", "medium", "heavy"] | None = "light",
    num_candidates: int = 4,
    num_trials: int = 4,
    max_metric_calls: int | None = None,
) -> dspy.Module:
    """A new program compiled from ``student`` by ``optimizer``; ``student`` itself is not changed.

    Budgets: ``max_demos`` bounds bootstrapped and labelled demos per predictor; ``num_candidates`` is random
    search's candidate programs and MIPROv2's candidates; with ``auto=None`` MIPROv2 runs ``num_trials`` trials
    and GEPA ``max_metric_calls`` metric calls (default: four passes over train and val). No demo is built from
    an output that was repaired, fell back or breaks its call's schema (`teammed.optimizers._demos`).
    """
    if optimizer not in OPTIMIZERS:
        close = difflib.get_close_matches(optimizer, sorted(OPTIMIZERS), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown optimizer {optimizer!r}.{hint} Available: {', '.join(sorted(OPTIMIZERS))}.")
    if not trainset:
        raise ConfigError("compiling needs a non-empty trainset; give --train a positive size")
    valset = valset or trainset
    reflection_lm = reflection_lm or teacher_lm or lm
    degraded = DegradedOutputs()  # the calls whose outputs were repaired or fell back: no demo from them
    demos = {"metric": clean_traces(accuracy_metric, degraded),
             "teacher_settings": {"lm": teacher_lm} if teacher_lm is not None else {},
             "max_bootstrapped_demos": max_demos, "max_labeled_demos": max_demos}
    student = student.deepcopy()
    # each question's calls in order (IN_TURN_SETTING): the traces demos are drawn from, and so the
    # compiled program, are the same on every run; questions still run side by side (num_threads)
    with dspy.context(lm=lm, adapter=NotingAdapter(degraded), disable_history=True, **{IN_TURN_SETTING: True}):
        if optimizer == "labeled":  # `teammed compile` refuses it first where it would change nothing
            compiled = dspy.LabeledFewShot(k=max_demos).compile(student, trainset=trainset)
        elif optimizer == "bootstrap":
            compiled = dspy.BootstrapFewShot(**demos).compile(student, trainset=trainset)
        elif optimizer == "random-search":
            search = dspy.BootstrapFewShotWithRandomSearch(num_candidate_programs=num_candidates,
                                                           num_threads=num_threads, **demos)
            compiled = search.compile(student, trainset=trainset, valset=valset)
        elif optimizer == "mipro":
            budget = {"auto": auto} if auto else {"auto": None, "num_candidates": num_candidates}
            mipro = dspy.MIPROv2(prompt_model=reflection_lm, task_model=lm, num_threads=num_threads, seed=seed,
                                 verbose=False, track_stats=False, **demos, **budget)
            compiled = mipro.compile(student, trainset=trainset, valset=valset, num_trials=None if auto else num_trials,
                                     minibatch=len(valset) > _MIPRO_MINIBATCH,
                                     minibatch_size=min(_MIPRO_MINIBATCH, len(valset)))
        else:
            gepa_budget: dict[str, Any] = (
                {"auto": auto} if auto else {"max_metric_calls": max_metric_calls or 4 * (len(trainset) + len(valset))})
            gepa = dspy.GEPA(metric=deliberation_feedback, reflection_lm=reflection_lm, num_threads=num_threads,
                             seed=seed, track_stats=False, **gepa_budget)
            compiled = gepa.compile(student, trainset=trainset, valset=valset)
    drop_unsound_demos(compiled, degraded)
    return compiled


def check_labeled_useful(student: dspy.Module, trainset: Sequence[dspy.Example]) -> None:
    """Refuse ``labeled`` where it would change nothing (no LM call): DSPy leaves a demo out of a prompt when it
    has none of the predictor's outputs, and labeled demos hold only the ``answer`` (docs/commands/compile.md)."""
    if not trainset:
        return
    trial = dspy.LabeledFewShot(k=1).compile(student, trainset=list(trainset)[:1])
    if not any(_renders(predictor) for _, predictor in trial.named_predictors()):
        raise ConfigError(
            "--optimizer labeled would change nothing for this system: its demos carry only the question, "
            "options and answer, and none of its predictors outputs an `answer` field, so DSPy leaves every "
            "demo out of the prompts. Use --optimizer bootstrap (it records full traces of each behaviour) "
            "or mipro/gepa")


def _renders(predictor: Any) -> bool:
    """Whether a predictor's demos reach its prompt: DSPy drops a demo without any of its outputs."""
    outputs = set(predictor.signature.output_fields)
    return any(outputs & set(getattr(demo, "keys", lambda: [])()) for demo in predictor.demos)
