"""Racing configurations paired on the same questions (pure functions).

Every configuration still in the race answers the same batch of tuning questions each round. Each
challenger carries an e-value, the evidence that it is worse than the configuration leading *before* the
round, multiplied per round by `_round_factor` with a bet ``p`` fixed from earlier rounds. Because the
leader and ``p`` are chosen from earlier rounds only, every factor has mean 1 given the past when the
configurations are equal: the e-value is a test martingale, and by Ville's inequality it ever reaches
``1/alpha`` with probability at most ``alpha``, however many rounds are looked at. A challenger is dropped
when it does (never the current most accurate survivor), so a configuration as good as the best is dropped
with probability at most ``alpha`` per race; the fixed-n sign test this replaced dropped about a third of
equal configurations per race (repeated looks, and an incumbent picked after seeing the data).
`one_sided_sign_p` stays for reports.
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
    """Replay the race over the rounds (``rounds[r]``: question ids) whose results are all in ``scores``
    (``scores[label][qid]``: correct); it stops at the first round a survivor has not finished."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1) (got {alpha})")
    threshold = 1 / alpha  # the e-value that drops a challenger (Ville's inequality)
    state = RaceState(alive=list(labels))
    evidence = {c: 1.0 for c in labels}
    tally = {c: [0, 0] for c in labels}  # discordant questions so far: [leader alone right, challenger alone right]
    seen: list[str] = []
    for r, batch in enumerate(rounds):
        if len(state.alive) <= 1 or not all(q in scores.get(c, {}) for c in state.alive for q in batch):
            break
        # the leader and each p are fixed from earlier rounds only: that is what keeps the test valid
        leader = (incumbent(state.alive, {c: {q: scores[c][q] for q in seen} for c in state.alive}, {}, labels)
                  if seen else state.alive[0])
        for c in state.alive:
            if c != leader:
                evidence[c] *= _round_factor(batch, scores[leader], scores[c], tally[c])
        seen.extend(batch)
        state.rounds = r + 1
        if r + 1 >= min_rounds:
            _drop_beaten(state, incumbent(state.alive, scores, tokens, list(labels)), scores, seen=seen,
                         evidence=evidence, threshold=threshold)
    return state


def _drop_beaten(state: RaceState, best: str, scores: Mapping[str, Mapping[str, bool]], *, seen: Sequence[str],
                 evidence: Mapping[str, float], threshold: float) -> None:
    """Drop from the race each configuration whose evidence against it reached ``threshold``, with a
    line of history comparing it with ``best`` on the questions both answered."""
    for c in list(state.alive):
        if c == best or evidence[c] < threshold:
            continue
        both = [q for q in seen if q in scores[c] and q in scores[best]]
        b = sum(scores[c][q] and not scores[best][q] for q in both)
        lost = sum(scores[best][q] and not scores[c][q] for q in both)
        state.alive.remove(c)
        state.history.append({"round": state.rounds, "dropped": c, "incumbent": best, "n": len(both),
                              "wins": b, "losses": lost, "e_value": round(evidence[c], 3),
                              "threshold": round(threshold, 3), "p_fixed_n": round(one_sided_sign_p(b, lost), 6),
                              "accuracy": round(_accuracy(scores[c], both), 4),
                              "incumbent_accuracy": round(_accuracy(scores[best], both), 4)})


def _round_factor(batch: Sequence[str], leader: Mapping[str, bool], challenger: Mapping[str, bool],
                  tally: list[int]) -> float:
    """The e-value's factor for one round, with ``p`` fixed from ``tally`` before it; updates ``tally``."""
    lost, won = tally
    p = min(0.9, max(0.5, (lost + 1) / (lost + won + 2)))
    factor = 1.0
    for q in batch:
        if q not in leader or q not in challenger or leader[q] == challenger[q]:
            continue
        if leader[q]:
            factor *= 2 * p
            tally[0] += 1
        else:
            factor *= 2 * (1 - p)
            tally[1] += 1
    return factor
