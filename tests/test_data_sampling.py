"""sample_questions: seeded, stratified (largest remainder) and option shuffling."""

from __future__ import annotations

import logging
from collections import Counter

import pytest

from teammed.data import sample_questions
from teammed.data.sampling import allocate
from teammed.errors import DataError
from teammed.types import Question


def _questions(subjects: dict[str, int]) -> list[Question]:
    questions = []
    for subject, count in subjects.items():
        for i in range(count):
            questions.append(
                Question(
                    id=f"{subject}-{i}",
                    question=f"{subject} question {i}?",
                    options={"A": f"{subject} {i} a", "B": f"{subject} {i} b", "C": f"{subject} {i} c",
                             "D": f"{subject} {i} d"},
                    answer_idx="ABCD"[i % 4],
                    meta={"subject_name": subject},
                )
            )
    return questions


POOL = _questions({"Anatomy": 60, "Pharmacology": 30, "Surgery": 10})


def _ids(questions: list[Question]) -> list[str]:
    return [q.id for q in questions]


def test_same_seed_same_sample_and_original_order() -> None:
    first = sample_questions(POOL, n=10, seed=7)
    assert _ids(first) == _ids(sample_questions(POOL, n=10, seed=7))
    positions = [POOL.index(q) for q in first]
    assert positions == sorted(positions)


def test_different_seeds_give_different_samples() -> None:
    assert _ids(sample_questions(POOL, n=10, seed=1)) != _ids(sample_questions(POOL, n=10, seed=2))


def test_none_keeps_everything_and_too_many_warns(caplog: pytest.LogCaptureFixture) -> None:
    assert sample_questions(POOL, n=None, seed=0) == POOL
    with caplog.at_level(logging.WARNING, logger="teammed.data.sampling"):
        assert sample_questions(POOL, n=500, seed=0) == POOL
    assert "Asked for 500 questions but only 100 are available" in caplog.text
    with pytest.raises(DataError, match="n must be a non-negative"):
        sample_questions(POOL, n=-1, seed=0)


def test_stratified_sample_is_proportional() -> None:
    sample = sample_questions(POOL, n=10, seed=3, stratify_by="subject_name")
    assert Counter(q.meta["subject_name"] for q in sample) == {"Anatomy": 6, "Pharmacology": 3, "Surgery": 1}
    assert _ids(sample) == _ids(sample_questions(POOL, n=10, seed=3, stratify_by="subject_name"))


def test_largest_remainder_by_hand() -> None:
    # exact shares 2.0, 1.2, 0.8: floors 2, 1, 0 and the one seat left goes to the 0.8 remainder
    assert allocate({"a": 5, "b": 3, "c": 2}, 4) == {"a": 2, "b": 1, "c": 1}
    # shares 1.5, 1.5, 0: tie broken toward the larger stratum, then the one listed first
    assert allocate({"x": 3, "y": 3, "z": 0}, 3) == {"x": 2, "y": 1, "z": 0}
    assert sum(allocate({"a": 7, "b": 11, "c": 13}, 9).values()) == 9


def test_stratifying_by_an_unknown_field_is_explained() -> None:
    with pytest.raises(DataError, match="Cannot stratify by 'subject'.*Meta fields present: subject_name"):
        sample_questions(POOL, n=5, seed=0, stratify_by="subject")


def test_shuffled_options_keep_the_gold_text() -> None:
    sample = sample_questions(POOL, n=20, seed=5)
    shuffled = sample_questions(POOL, n=20, seed=5, shuffle_options=True)
    moved = 0
    for before, after in zip(sample, shuffled, strict=True):
        assert after.options[after.answer_idx] == before.options[before.answer_idx]
        assert sorted(after.options.values()) == sorted(before.options.values())
        assert list(after.options) == ["A", "B", "C", "D"]
        assert [before.options[old] for old in after.meta["original_letters"]] == list(after.options.values())
        moved += after.answer_idx != before.answer_idx
    assert moved > 0


def test_option_shuffle_depends_only_on_seed_and_question() -> None:
    small = {q.id: q for q in sample_questions(POOL, n=None, seed=9, shuffle_options=True)}
    subset = sample_questions(POOL[:5], n=None, seed=9, shuffle_options=True)
    assert all(small[q.id].options == q.options for q in subset)


def test_shuffling_unlabeled_questions() -> None:
    question = Question(id="u", question="?", options={"A": "x", "B": "y", "C": "z"})
    (shuffled,) = sample_questions([question], n=1, seed=0, shuffle_options=True)
    assert shuffled.answer_idx is None and sorted(shuffled.options.values()) == ["x", "y", "z"]
