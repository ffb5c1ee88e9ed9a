"""Ranking repair: every ranking the team counts is a permutation of the question's letters.

`read_ranking` and `read_choice` say what they had to do: a *repair* (the output was usable
after fixing: decorated, prose or partial answers, duplicated letters), a *fallback* (no item
named an option: the default stands in, and the vote must not count it as the agent's view),
and how many items named no option. Letters are read by `teammed.programs.letters.letter_of`,
the reader every system shares.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from teammed.programs.letters import letter_of

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


def _options(options: Mapping[str, str] | Sequence[str]) -> Mapping[str, str]:
    """Options keyed by letter; bare letters (no option texts known) read as letters only."""
    return options if isinstance(options, Mapping) else {str(letter): "" for letter in options}


def read_ranking(raw: Iterable[object] | None, options: Mapping[str, str] | Sequence[str]) -> Read:
    """Keep the first-seen letter each item of ``raw`` names, in order, then append the missing ones.

    Each item is read by `teammed.programs.letters.letter_of` (``"C"``, ``"(c)"``, ``"Answer: C"``,
    ``"Option C ..."``, the option's text); an item naming no option, or more than one, counts in
    ``invalid_letters``. A ranking none of whose items names an option *fell back*: its order is
    the options' and the vote must not count it.
    """
    options = _options(options)
    letters = list(options)
    kept: list[str] = []
    invalid = 0
    items = list(raw or [])
    for item in items:
        letter = letter_of(item, options)
        if letter is None:
            invalid += 1
        elif letter not in kept:
            kept.append(letter)
    ranking = kept + [letter for letter in letters if letter not in kept]
    original = [str(x) for x in items]
    return Read(ranking, original != ranking, not kept, invalid)


def read_choice(raw: object, options: Mapping[str, str] | Sequence[str], *, default: str,
                allowed: Sequence[str] | None = None) -> Read:
    """The one option letter ``raw`` names (`letter_of`), if it is among ``allowed`` (default: every
    option); else ``default``, counted as a fallback."""
    options = _options(options)
    letter = letter_of(raw, options)
    if letter is not None and letter in (allowed if allowed is not None else options):
        return Read([letter], str(raw) != letter, False, 0)
    return Read([default], True, True, int(raw not in (None, "")))


def repair_ranking(raw: Iterable[object] | None,
                   options: Mapping[str, str] | Sequence[str]) -> tuple[list[str], bool]:
    """`read_ranking` as ``(ranking, changed)``."""
    read = read_ranking(raw, options)
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
