"""Which specialist roles were recruited, and which ones swung the team's answer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from itertools import pairwise

from teammed.evals._rows import agent_roles, row_roles, votes_by_turn
from teammed.records import ResultRow

__all__ = ["roles_recruited", "decisiveness"]


def roles_recruited(rows: Iterable[ResultRow]) -> dict[str, int]:
    """Role -> number of (question, agent) recruitments, most frequent first."""
    counts: Counter[str] = Counter(role for row in rows for role in row_roles(row))
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _team(row: ResultRow, votes: Mapping[str, object]) -> dict[str, str]:
    """Agent id -> role: the record's agents, else the row's roles zipped with the voters in order."""
    roles = agent_roles(row)
    if roles:
        return roles
    listed = row_roles(row)
    return dict(zip(map(str, votes), listed, strict=True)) if len(listed) == len(votes) else {}


def _pivoted(votes: list[object], final: object) -> bool:
    """Did the agent change its vote, at some turn, to the system's final answer?"""
    cast = [vote for vote in votes if vote is not None]
    return final is not None and any(prev != cur and cur == final for prev, cur in pairwise(cast))


def decisiveness(rows: Iterable[ResultRow], *, min_appearances: int = 1) -> dict[str, dict[str, float]]:
    """Decisiveness score per role (Lee, Wang & Yang's SOAP-notes MAS, eq. 1).

    A pivotal change is an agent changing its vote between consecutive entries of
    ``votes_by_turn`` with the new vote equal to the system's final answer (the row's
    prediction); each agent-question appearance counts at most once. The score is a
    role's pivotal appearances over its total appearances, over questions that record
    ``votes_by_turn``. Roles seen fewer than ``min_appearances`` times are left out (the
    paper keeps n > 100, since a rare role can score high on a single pivot).
    """
    pivots: Counter[str] = Counter()
    appearances: Counter[str] = Counter()
    for row in rows:
        votes = votes_by_turn(row)
        if votes is None:
            continue
        for agent, role in _team(row, votes).items():
            appearances[role] += 1
            pivots[role] += _pivoted(list(votes.get(agent, ())), row.prediction)
    scores = {
        role: {"pivotal": pivots[role], "appearances": n, "score": pivots[role] / n}
        for role, n in appearances.items()
        if n >= min_appearances
    }
    return dict(sorted(scores.items(), key=lambda kv: (-kv[1]["score"], -kv[1]["appearances"], kv[0])))
