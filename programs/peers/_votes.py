"""Vote arithmetic of the peer systems (pure functions).

A vote is an option letter, or None: a *dropped* vote, an agent's answer that named no
option. A dropped vote is never counted as any option, but it keeps its seat: every share
here is relative to the whole team (``len(votes)``, dropped votes included), never to the
valid votes alone. So 1 valid vote in a team of 5 is a share of 0.2, not a unanimous 1.0,
and a consensus threshold of 0.8 needs 4 of 5 *valid* votes for one option.

Ties between options always go to the earliest letter in option order, so every rule
here is deterministic. With no valid vote there is no winner (None): no rule here ever
falls back to an option nobody chose.
"""

from __future__ import annotations

from collections.abc import Sequence

from teammed.errors import NoAnswerError

__all__ = [
    "TOLERANCE",
    "Vote",
    "dropped",
    "shares",
    "plurality",
    "plurality_or_fail",
    "unanimous",
    "majority_holds",
    "anchored_scores",
    "leaders",
    "confidence_from_share",
]

TOLERANCE = 1e-9

Vote = str | None


def dropped(votes: Sequence[Vote]) -> int:
    """How many votes named no option."""
    return sum(v is None for v in votes)


def shares(votes: Sequence[Vote], letters: Sequence[str]) -> dict[str, float]:
    """Each option's share of the team: its valid votes / ``len(votes)`` (dropped votes included).

    0 for every option when there are no votes at all.
    """
    total = len(votes)
    return {letter: (sum(v == letter for v in votes) / total if total else 0.0) for letter in letters}


def leaders(scores: dict[str, float], letters: Sequence[str]) -> list[str]:
    """The options sharing the top score, in option order; none when no option scored at all."""
    top = max((scores[letter] for letter in letters), default=0.0)
    if top <= TOLERANCE:
        return []
    return [letter for letter in letters if top - scores[letter] <= TOLERANCE]


def plurality(votes: Sequence[Vote], letters: Sequence[str]) -> tuple[str | None, float]:
    """The most voted option and its share of the team; ``(None, 0.0)`` with no valid vote.

    A strict majority is the special case share > 0.5. Ties go to the earliest letter in
    option order.
    """
    scores = shares(votes, letters)
    top = leaders(scores, letters)
    if not top:
        return None, 0.0
    return top[0], scores[top[0]]


def plurality_or_fail(votes: Sequence[Vote], letters: Sequence[str], who: str) -> tuple[str, float]:
    """`plurality`, or `NoAnswerError` when no vote names an option (``who`` names the voters that did not)."""
    voted, share = plurality(votes, letters)
    if voted is None:
        raise NoAnswerError(f"{who} named an option ({dropped(votes)} dropped), so there is no answer; check that "
                            "the model returns the requested JSON")
    return voted, share


def unanimous(votes: Sequence[Vote]) -> bool:
    """Every member gave a valid vote, and all for the same option (a dropped vote agrees with no one)."""
    return bool(votes) and None not in votes and len(set(votes)) == 1


def majority_holds(option: str | None, votes: Sequence[Vote]) -> bool:
    """More than half of the team (dropped votes included in the count) validly voted ``option``."""
    return option is not None and 2 * sum(v == option for v in votes) > len(votes)


def anchored_scores(first: Sequence[Vote], current: Sequence[Vote], letters: Sequence[str]) -> dict[str, float]:
    """Half the weight on the independent first-round votes, half on the current votes.

    ``score(x) = ½·share_first(x) + ½·share_current(x)`` (shares of the team, see `shares`):
    an option the team drifted to in debate counts only as far as it also had independent
    support. With one list empty the other counts alone.
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
