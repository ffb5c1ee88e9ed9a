"""Seeded, optionally stratified question samples and seeded option shuffling (pure functions)."""

from __future__ import annotations

import logging
import random
from collections.abc import Hashable, Sequence

from teammed.errors import DataError
from teammed.types import Question, letters_for

__all__ = ["sample_questions", "allocate", "with_shuffled_options"]

logger = logging.getLogger(__name__)


def sample_questions(
    questions: Sequence[Question],
    *,
    n: int | None,
    seed: int,
    stratify_by: str | None = None,
    shuffle_options: bool = False,
) -> list[Question]:
    """``n`` questions drawn with ``random.Random(seed)``, kept in their original order.

    ``n=None`` (or ``n`` at least the number available) keeps every question; a larger ``n``
    logs a warning. ``stratify_by`` names a ``meta`` field (e.g. MedMCQA's ``subject_name``):
    each value gets its proportional share of ``n``, rounded by largest remainder. With
    ``shuffle_options`` each question's options are re-lettered in a seeded order that depends
    only on ``seed`` and the question id, and ``answer_idx`` follows its option.
    """
    if n is not None and n < 0:
        raise DataError(f"n must be a non-negative number of questions or None for all (got {n})")
    chosen = _choose(questions, n=n, seed=seed, stratify_by=stratify_by)
    picked = [questions[i] for i in sorted(chosen)]
    if shuffle_options:
        picked = [with_shuffled_options(q, random.Random(f"{seed}:{q.id}")) for q in picked]
    return picked


def shard_questions(questions: Sequence[Question], index: int, count: int, *,
                    stratify_by: str | None = None) -> list[Question]:
    """The ``index``-th (1-based) of ``count`` disjoint parts of ``questions``, in their order.

    The parts cover ``questions`` exactly once and differ in size by at most one question; they
    depend only on ``questions`` (the same sample in every shard gives the same parts). Each
    stratum (``stratify_by``) is dealt round-robin on its own, so every part keeps the sample's
    strata within one question each.
    """
    if not 1 <= index <= count:
        raise DataError(f"shard {index}/{count} does not exist: give I/N with 1 <= I <= N, e.g. 1/{max(count, 2)}")
    groups = _strata(questions, stratify_by) if stratify_by else {None: list(range(len(questions)))}
    dealt, offset = [], 0
    for members in groups.values():  # a stratum starts where the last one stopped: sizes stay within one
        dealt += [i for k, i in enumerate(members) if (k + offset) % count == index - 1]
        offset = (offset + len(members)) % count
    return [questions[i] for i in sorted(dealt)]


def _choose(questions: Sequence[Question], *, n: int | None, seed: int, stratify_by: str | None) -> list[int]:
    total = len(questions)
    if n is None or n >= total:
        if n is not None and n > total:
            logger.warning("Asked for %d questions but only %d are available; using all of them", n, total)
        return list(range(total))
    rng = random.Random(seed)
    if stratify_by is None:
        return rng.sample(range(total), n)
    if not any(stratify_by in q.meta for q in questions):
        seen = sorted({key for q in questions for key in q.meta})
        raise DataError(
            f"Cannot stratify by {stratify_by!r}: no question has that meta field. "
            f"Meta fields present: {', '.join(seen) or 'none'}."
        )
    strata = _strata(questions, stratify_by)
    quotas = allocate({key: len(members) for key, members in strata.items()}, n)
    return [i for key, members in strata.items() for i in rng.sample(members, quotas[key])]


def _strata(questions: Sequence[Question], field: str) -> dict[Hashable, list[int]]:
    """Question indexes by their ``meta[field]``, in first-seen order (a missing field is None)."""
    strata: dict[Hashable, list[int]] = {}
    for i, q in enumerate(questions):
        strata.setdefault(v if isinstance(v := q.meta.get(field), Hashable) else repr(v), []).append(i)
    return strata


def allocate(sizes: dict[Hashable, int], n: int) -> dict[Hashable, int]:
    """Split ``n`` over strata proportionally to ``sizes`` by the largest-remainder method.

    Ties in the remainder go to the larger stratum, then to the one listed first.
    """
    total = sum(sizes.values())
    exact = {key: n * size / total for key, size in sizes.items()}
    quotas = {key: int(share) for key, share in exact.items()}
    order = list(sizes)
    by_remainder = sorted(order, key=lambda k: (-(exact[k] - quotas[k]), -sizes[k], order.index(k)))
    for key in by_remainder[: n - sum(quotas.values())]:
        quotas[key] += 1
    return quotas


def with_shuffled_options(question: Question, rng: random.Random) -> Question:
    """``question`` with its options in the order drawn from ``rng``, re-lettered A, B, ...

    ``meta["original_letters"]`` lists, for each new letter, the letter it had before.
    """
    old = list(question.options)
    rng.shuffle(old)
    letters = letters_for(len(old))
    options = {new: question.options[prev] for new, prev in zip(letters, old, strict=True)}
    gold = None if question.answer_idx is None else letters[old.index(question.answer_idx)]
    meta = {**question.meta, "original_letters": old}
    return Question(**{**question.model_dump(), "options": options, "answer_idx": gold, "meta": meta})
