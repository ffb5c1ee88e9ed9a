"""Teamwork-component metrics: shared mental model, trust, mutual monitoring, leadership.

Each reads the facts of the rows' `Deliberation` (`teammed.evals._facts`); rows without one
(peer systems, failed questions, records of an older shape) are left out.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from typing import Any

from teammed.evals._facts import RowFacts, RowLike, TeamFacts, facts_of
from teammed.evals._rows import mean, ratio

__all__ = [
    "smm_facts_per_question",
    "trust_divergence",
    "trust_by_stage",
    "mutual_monitoring_impact",
    "leadership_interventions",
]


def _deliberated(rows: Iterable[RowLike]) -> list[tuple[RowFacts, TeamFacts]]:
    """The rows that carry a `Deliberation`, each with its facts."""
    return [(row, row.team_facts) for row in facts_of(rows) if row.team_facts is not None]


def smm_facts_per_question(rows: Iterable[RowLike]) -> float | None:
    """Mean number of verified facts in the shared mental model, over questions that built one."""
    return mean(team.smm_facts for _, team in _deliberated(rows))


def trust_divergence(rows: Iterable[RowLike]) -> float | None:
    """Mean over questions of the (population) std of the agents' final trust.

    A team is the whole population of its agents, hence ``pstdev``; questions with fewer
    than two trust scores are left out.
    """
    return mean(statistics.pstdev(row.trust.values()) for row in facts_of(rows) if len(row.trust) >= 2)


def trust_by_stage(rows: Iterable[RowLike]) -> dict[str, float]:
    """Mean trust over every (question, agent) at each stage, stages in first-seen order."""
    pooled: dict[str, list[float]] = {}
    for _, team in _deliberated(rows):
        for stage, scores in team.trust_history:
            if stage:
                pooled.setdefault(stage, []).extend(scores)
    return {stage: sum(v) / len(v) for stage, v in pooled.items() if v}


def mutual_monitoring_impact(rows: Iterable[RowLike]) -> dict[str, Any] | None:
    """What the challenges did, over questions with a `Deliberation` (monitored or not).

    ``change_rate`` is the share of challenges after which the challenged agent changed its
    answer; of those changes on questions with a gold answer, ``toward_gold_rate`` moved to
    gold and ``away_from_gold_rate`` moved off it.
    """
    monitored = _deliberated(rows)
    if not monitored:
        return None
    total = changed = with_gold = toward = away = 0
    verdicts: Counter[str] = Counter()
    for row, team in monitored:
        for verdict, before, after in team.challenges:
            total += 1
            if verdict:
                verdicts[verdict] += 1
            if before == after:
                continue
            changed += 1
            if row.gold is not None:
                with_gold += 1
                toward += after == row.gold
                away += before == row.gold
    return {
        "n": len(monitored),
        "challenges": total,
        "challenges_per_question": total / len(monitored),
        "changed": changed,
        "change_rate": ratio(changed, total),
        "toward_gold": toward,
        "away_from_gold": away,
        "toward_gold_rate": ratio(toward, with_gold),
        "away_from_gold_rate": ratio(away, with_gold),
        "verdicts": dict(verdicts),
    }


def leadership_interventions(rows: Iterable[RowLike]) -> dict[str, float] | None:
    """Tie statistics over questions with a `Deliberation` (its ``tie`` is None when there was none).

    ``leader_rate`` is the share of those questions whose tie the leader resolved.
    """
    teams = [team for _, team in _deliberated(rows)]
    if not teams:
        return None
    tied = [team for team in teams if team.tied]
    by_leader = sum(team.tie == "leader" for team in tied)
    return {"n": len(teams), "tie_rate": len(tied) / len(teams), "leader_rate": by_leader / len(teams)}
