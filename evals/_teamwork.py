"""Teamwork-component metrics: shared mental model, trust, mutual monitoring, leadership.

Each reads the rows' `Deliberation`; rows without one (peer systems, failed questions, records
of an older shape) are left out.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from teammed.evals._rows import deliberation, mean, number, ratio
from teammed.records import ResultRow

if TYPE_CHECKING:
    from teammed.programs.record import Deliberation

__all__ = [
    "smm_facts_per_question",
    "final_trust",
    "trust_divergence",
    "trust_by_stage",
    "mutual_monitoring_impact",
    "leadership_interventions",
]


def _deliberated(rows: Iterable[ResultRow]) -> list[tuple[ResultRow, Deliberation]]:
    """The rows that carry a `Deliberation`, each with it."""
    return [(row, found) for row in rows if (found := deliberation(row)) is not None]


def smm_facts_per_question(rows: Iterable[ResultRow]) -> float | None:
    """Mean number of verified facts in the shared mental model, over questions that built one."""
    return mean(len(d.smm.verified_facts) for _, d in _deliberated(rows))


def _scores(mapping: Any) -> dict[str, float]:
    """Agent -> score over the finite numbers of a trust mapping (a row's ``trust`` is untyped)."""
    if not isinstance(mapping, Mapping):
        return {}
    return {str(k): v for k, raw in mapping.items() if (v := number(raw)) is not None}


def final_trust(row: ResultRow) -> dict[str, float]:
    """Agent -> final trust: the row's ``trust``, else the last stage of the trust history."""
    scores = _scores(row.trust)
    if scores:
        return scores
    found = deliberation(row)
    return _scores(found.trust_history[-1].scores) if found is not None and found.trust_history else {}


def trust_divergence(rows: Iterable[ResultRow]) -> float | None:
    """Mean over questions of the (population) std of the agents' final trust.

    A team is the whole population of its agents, hence ``pstdev``; questions with fewer
    than two trust scores are left out.
    """
    spreads = [statistics.pstdev(s.values()) for s in map(final_trust, rows) if len(s) >= 2]
    return mean(spreads)


def trust_by_stage(rows: Iterable[ResultRow]) -> dict[str, float]:
    """Mean trust over every (question, agent) at each stage, stages in first-seen order."""
    pooled: dict[str, list[float]] = {}
    for _, found in _deliberated(rows):
        for stage in found.trust_history:
            if stage.stage:
                pooled.setdefault(stage.stage, []).extend(_scores(stage.scores).values())
    return {stage: sum(v) / len(v) for stage, v in pooled.items() if v}


def mutual_monitoring_impact(rows: Iterable[ResultRow]) -> dict[str, Any] | None:
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
    for row, found in monitored:
        for challenge in found.challenges:
            total += 1
            if challenge.verdict:
                verdicts[challenge.verdict] += 1
            before, after = challenge.choice_before, challenge.choice_after
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


def leadership_interventions(rows: Iterable[ResultRow]) -> dict[str, float] | None:
    """Tie statistics over questions with a `Deliberation` (its ``tie`` is None when there was none).

    ``leader_rate`` is the share of those questions whose tie the leader resolved.
    """
    ties = [found.tie for _, found in _deliberated(rows)]
    if not ties:
        return None
    tied = [tie for tie in ties if tie is not None]
    by_leader = sum(tie.resolved_by == "leader" for tie in tied)
    return {"n": len(ties), "tie_rate": len(tied) / len(ties), "leader_rate": by_leader / len(ties)}
