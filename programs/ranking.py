"""Ranking repair: every ranking the team counts is a permutation of the question's letters."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["repair_ranking", "first_choice_agreement"]


def repair_ranking(raw: Iterable[object] | None, letters: Sequence[str]) -> tuple[list[str], bool]:
    """Keep the valid, first-seen letters of ``raw`` in order, then append the missing ones.

    Returns the repaired ranking and whether anything had to change. Letters are matched
    case-insensitively and may carry decoration such as ``"B)"`` or ``"(c)"``.
    """
    valid = set(letters)
    kept: list[str] = []
    for item in raw or []:
        letter = str(item).strip().strip("().:- ").upper()[:1] if item is not None else ""
        if letter in valid and letter not in kept:
            kept.append(letter)
    repaired = kept + [letter for letter in letters if letter not in kept]
    original = [str(x) for x in raw] if raw is not None else []
    return repaired, original != repaired


def first_choice_agreement(first_choices: Sequence[str]) -> tuple[str | None, float]:
    """The most common first choice and the share of agents holding it (ties: earliest letter)."""
    if not first_choices:
        return None, 0.0
    counts: dict[str, int] = {}
    for choice in first_choices:
        counts[choice] = counts.get(choice, 0) + 1
    best = min(counts, key=lambda c: (-counts[c], c))
    return best, counts[best] / len(first_choices)
