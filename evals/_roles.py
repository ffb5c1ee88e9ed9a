"""Which specialist roles were recruited, and which ones swung the team's answer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from itertools import pairwise

from teammed.evals._facts import RowLike, facts_of

__all__ = ["roles_recruited", "decisiveness"]


def roles_recruited(rows: Iterable[RowLike]) -> dict[str, int]:
    """Role -> number of (question, agent) recruitments, most frequent first."""
    counts: Counter[str] = Counter(role for row in facts_of(rows) for role in row.roles)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _pivoted(votes: Iterable[object], final: object) -> bool:
    """Did the agent change its vote, at some turn, to the system's final answer?"""
    cast = [vote for vote in votes if vote is not None]
    return final is not None and any(prev != cur and cur == final for prev, cur in pairwise(cast))


def decisiveness(rows: Iterable[RowLike], *, min_appearances: int = 1) -> dict[str, dict[str, float]]:
    """Decisiveness score per role (Lee, Wang & Yang's SOAP-notes MAS, eq. 1).

    A pivotal change is an agent changing its vote between consecutive entries of
    ``votes_by_turn`` with the new vote equal to the system's final answer (the row's
    prediction); each agent-question appearance counts at most once. The score is a
    role's pivotal appearances over its total appearances, over questions that record
    ``votes_by_turn``. An agent's role is the record's agents', else the row's roles in
    voter order. Roles seen fewer than ``min_appearances`` times are left out (the
    paper keeps n > 100, since a rare role can score high on a single pivot).
    """
    pivots: Counter[str] = Counter()
    appearances: Counter[str] = Counter()
    for row in facts_of(rows):
        if row.votes is None:
            continue
        for agent, role in row.team.items():
            appearances[role] += 1
            pivots[role] += _pivoted(row.votes.get(agent, ()), row.prediction)
    scores = {
        role: {"pivotal": pivots[role], "appearances": n, "score": pivots[role] / n}
        for role, n in appearances.items()
        if n >= min_appearances
    }
    return dict(sorted(scores.items(), key=lambda kv: (-kv[1]["score"], -kv[1]["appearances"], kv[0])))
