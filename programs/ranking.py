"""Ranking repair: every ranking the team counts is a permutation of the question's letters.

`read_ranking` and `read_choice` say what they had to do: a *repair* (the output was usable
after fixing: decorated, partial or duplicated letters), a *fallback* (no valid letter at
all: the default stands in, and the vote must not count it as the agent's view), and how
many letters lay outside the options.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["repair_ranking", "read_ranking", "read_choice", "Read", "first_choice_agreement"]


@dataclass(frozen=True)
class Read:
    """A ranking (or a one-letter choice) as the program will use it, and how it was obtained."""

    ranking: list[str]
    repaired: bool
    fell_back: bool
    invalid_letters: int

    @property
    def first(self) -> str:
        return self.ranking[0]


def _letter(item: object) -> str:
    return str(item).strip().strip("().:- ").upper()[:1] if item is not None else ""


def read_ranking(raw: Iterable[object] | None, letters: Sequence[str]) -> Read:
    """Keep the valid, first-seen letters of ``raw`` in order, then append the missing ones.

    Letters are matched case-insensitively and may carry decoration such as ``"B)"`` or
    ``"(c)"``. Items naming no option are counted in ``invalid_letters``.
    """
    valid = set(letters)
    kept: list[str] = []
    invalid = 0
    items = list(raw or [])
    for item in items:
        letter = _letter(item)
        if letter not in valid:
            invalid += 1
        elif letter not in kept:
            kept.append(letter)
    ranking = kept + [letter for letter in letters if letter not in kept]
    original = [str(x) for x in items]
    return Read(ranking, original != ranking, not kept, invalid)


def read_choice(raw: object, letters: Sequence[str], *, default: str) -> Read:
    """One option letter from ``raw``; ``default`` (counted as a fallback) when it names none."""
    letter = _letter(raw) if raw not in (None, "") else ""
    if letter in letters and len(str(raw).strip().strip("().:- ")) == 1:
        return Read([letter], str(raw) != letter, False, 0)
    return Read([default], True, True, int(raw not in (None, "")))


def repair_ranking(raw: Iterable[object] | None, letters: Sequence[str]) -> tuple[list[str], bool]:
    """`read_ranking` as ``(ranking, changed)``."""
    read = read_ranking(raw, letters)
    return read.ranking, read.repaired


def first_choice_agreement(first_choices: Sequence[str]) -> tuple[str | None, float]:
    """The most common first choice and the share of agents holding it (ties: earliest letter)."""
    if not first_choices:
        return None, 0.0
    counts: dict[str, int] = {}
    for choice in first_choices:
        counts[choice] = counts.get(choice, 0) + 1
    best = min(counts, key=lambda c: (-counts[c], c))
    return best, counts[best] / len(first_choices)
