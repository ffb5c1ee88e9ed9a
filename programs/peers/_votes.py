"""Vote arithmetic of the peer systems (pure functions).

Ties between options always go to the earliest letter in option order, so every rule
here is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["TOLERANCE", "shares", "plurality", "anchored_scores", "leaders", "confidence_from_share"]

TOLERANCE = 1e-9


def shares(votes: Sequence[str], letters: Sequence[str]) -> dict[str, float]:
    """Each option's share of ``votes`` (0 for every option when there are no votes)."""
    total = len(votes)
    return {letter: (sum(v == letter for v in votes) / total if total else 0.0) for letter in letters}


def leaders(scores: dict[str, float], letters: Sequence[str]) -> list[str]:
    """The options sharing the top score, in option order."""
    top = max(scores[letter] for letter in letters)
    return [letter for letter in letters if top - scores[letter] <= TOLERANCE]


def plurality(votes: Sequence[str], letters: Sequence[str]) -> tuple[str, float]:
    """The most voted option and its share; a strict majority is the special case share > 0.5.

    Ties go to the earliest letter in option order; with no votes, the first option (share 0).
    """
    scores = shares(votes, letters)
    winner = leaders(scores, letters)[0]
    return winner, scores[winner]


def anchored_scores(first: Sequence[str], current: Sequence[str], letters: Sequence[str]) -> dict[str, float]:
    """Half the weight on the independent first-round votes, half on the current votes.

    ``score(x) = ½·share_first(x) + ½·share_current(x)``: an option the team drifted to in
    debate counts only as far as it also had independent support. With one list empty the
    other counts alone.
    """
    if not first or not current:
        return shares(first or current, letters)
    a, b = shares(first, letters), shares(current, letters)
    return {letter: 0.5 * a[letter] + 0.5 * b[letter] for letter in letters}


def confidence_from_share(share: float) -> str:
    """Team confidence from agreement: High from 80% agreement, Medium above half, else Low."""
    if share >= 0.8 - TOLERANCE:
        return "High"
    return "Medium" if share > 0.5 else "Low"
