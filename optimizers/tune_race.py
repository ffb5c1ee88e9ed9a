"""Racing configurations paired on the same questions (pure functions).

Every configuration still in the race answers the same batch of tuning questions each
round. After a round, the incumbent is the most accurate survivor (on the questions all
survivors have seen; fewer tokens, then the earlier label break ties), and each other
survivor is compared with it on the questions both have seen: with ``b`` questions only
the challenger got right and ``c`` only the incumbent got right, the one-sided exact sign
(McNemar) test ``P(Binomial(b + c, 1/2) <= b)`` below ``alpha`` drops the challenger.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["one_sided_sign_p", "RaceState", "race"]


def one_sided_sign_p(b: int, c: int) -> float:
    """P(X <= b) for X ~ Binomial(b + c, 1/2): how surprising ``b`` wins against ``c`` losses are."""
    if b < 0 or c < 0:
        raise ValueError(f"counts must be non-negative (got b={b}, c={c})")
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, sum(math.comb(n, i) for i in range(b + 1)) / 2**n)


@dataclass
class RaceState:
    """Who is still racing after ``rounds`` rounds, and why the others were dropped."""

    alive: list[str]
    rounds: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)


def _accuracy(scores: Mapping[str, bool], ids: Sequence[str]) -> float:
    return sum(scores[i] for i in ids) / len(ids) if ids else 0.0


def incumbent(alive: Sequence[str], scores: Mapping[str, Mapping[str, bool]],
              tokens: Mapping[str, float], labels: Sequence[str]) -> str:
    """The most accurate of ``alive`` on the questions all of them answered (fewer tokens, then listed first)."""
    common = set.intersection(*(set(scores.get(c, {})) for c in alive)) if alive else set()
    ids = sorted(common)
    return min(alive, key=lambda c: (-_accuracy(scores[c], ids), tokens.get(c, 0.0),
                                     list(labels).index(c) if c in labels else len(labels), c))


def race(labels: Sequence[str], rounds: Sequence[Sequence[str]],
         scores: Mapping[str, Mapping[str, bool]], tokens: Mapping[str, float], *,
         alpha: float, min_rounds: int = 1) -> RaceState:
    """Replay the race over the rounds whose results are all in ``scores``; return the state after them.

    ``rounds[r]`` is the question ids of round ``r``; ``scores[label][qid]`` is correctness.
    The replay stops at the first round some survivor has not finished (its cells are due next).
    """
    state = RaceState(alive=list(labels))
    seen: list[str] = []
    for r, batch in enumerate(rounds):
        if len(state.alive) <= 1:
            break
        if not all(q in scores.get(c, {}) for c in state.alive for q in batch):
            break
        seen.extend(batch)
        state.rounds = r + 1
        if r + 1 < min_rounds:
            continue
        best = incumbent(state.alive, scores, tokens, list(labels))
        for c in list(state.alive):
            if c == best:
                continue
            both = [q for q in seen if q in scores[c] and q in scores[best]]
            b = sum(scores[c][q] and not scores[best][q] for q in both)
            lost = sum(scores[best][q] and not scores[c][q] for q in both)
            p = one_sided_sign_p(b, lost)
            if p < alpha:
                state.alive.remove(c)
                state.history.append({"round": r + 1, "dropped": c, "incumbent": best, "n": len(both),
                                      "wins": b, "losses": lost, "p": round(p, 6),
                                      "accuracy": round(_accuracy(scores[c], both), 4),
                                      "incumbent_accuracy": round(_accuracy(scores[best], both), 4)})
    return state
