"""Borda aggregation of the team's final rankings (pure functions).

An option at 0-based position ``p`` of a ranking over ``n`` options earns ``n - p - 1``
points, multiplied by the voter's weight: 1 (standard), its hierarchical weight, or its
trust score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = [
    "borda_scores",
    "winners",
    "hierarchical_weights",
    "rule_tie_break",
    "TIE_TOLERANCE",
]

TIE_TOLERANCE = 1e-9

_HIERARCHY = {
    1: (1.0,),
    2: (0.6, 0.4),
    3: (0.5, 0.3, 0.2),
    4: (0.4, 0.3, 0.2, 0.1),
}


def hierarchical_weights(n: int) -> tuple[float, ...]:
    """The team-orientation weights for ``n`` agents, most relevant specialist first."""
    if n not in _HIERARCHY:
        raise ValueError(f"hierarchical weights are defined for 1 to 4 agents (got {n})")
    return _HIERARCHY[n]


def borda_scores(
    rankings: Mapping[str, Sequence[str]],
    letters: Sequence[str],
    weights: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Weighted Borda points per option. ``weights`` defaults to 1 for every voter."""
    n = len(letters)
    scores = {letter: 0.0 for letter in letters}
    for voter, ranking in rankings.items():
        weight = 1.0 if weights is None else weights[voter]
        for position, letter in enumerate(ranking):
            if letter in scores:
                scores[letter] += weight * (n - position - 1)
    return scores


def winners(scores: Mapping[str, float]) -> list[str]:
    """The options sharing the top score (more than one means a tie), in option order."""
    top = max(scores.values())
    return [letter for letter, score in scores.items() if top - score <= TIE_TOLERANCE]


def rule_tie_break(
    tied: Sequence[str],
    final_rankings: Mapping[str, Sequence[str]],
    initial_rankings: Mapping[str, Sequence[str]],
    letters: Sequence[str],
) -> str:
    """Break a tie without a leader, deterministically.

    1. most first-place votes in the final rankings;
    2. then most (unweighted) Borda points in the independent round-2 rankings;
    3. then the earliest letter.
    """
    firsts = {letter: 0 for letter in tied}
    for ranking in final_rankings.values():
        if ranking and ranking[0] in firsts:
            firsts[ranking[0]] += 1
    initial = borda_scores(initial_rankings, letters)
    return min(tied, key=lambda letter: (-firsts[letter], -initial.get(letter, 0.0), letters.index(letter)))
