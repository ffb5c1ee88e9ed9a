"""Teamwork-component metrics: shared mental model, trust, mutual monitoring, leadership."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from teammed.evals._rows import Row, items, mean, number, ratio, record

__all__ = [
    "smm_facts_per_question",
    "final_trust",
    "trust_divergence",
    "trust_by_stage",
    "mutual_monitoring_impact",
    "leadership_interventions",
]


def smm_facts_per_question(rows: Iterable[Row]) -> float | None:
    """Mean number of verified facts in the shared mental model, over questions that built one."""
    counts = [
        len(items(smm, "verified_facts"))
        for smm in (record(row).get("smm") for row in rows)
        if isinstance(smm, Mapping)
    ]
    return mean(counts)


def _scores(mapping: Any) -> dict[str, float]:
    if not isinstance(mapping, Mapping):
        return {}
    return {str(k): v for k, raw in mapping.items() if (v := number(raw)) is not None}


def final_trust(row: Row) -> dict[str, float]:
    """Agent -> final trust: the row's ``trust``, else the last stage of the trust history."""
    scores = _scores(row.get("trust"))
    if scores:
        return scores
    history = [stage for stage in items(record(row), "trust_history") if isinstance(stage, Mapping)]
    return _scores(history[-1].get("scores")) if history else {}


def trust_divergence(rows: Iterable[Row]) -> float | None:
    """Mean over questions of the (population) std of the agents' final trust.

    A team is the whole population of its agents, hence ``pstdev``; questions with fewer
    than two trust scores are left out.
    """
    spreads = [statistics.pstdev(s.values()) for s in map(final_trust, rows) if len(s) >= 2]
    return mean(spreads)


def trust_by_stage(rows: Iterable[Row]) -> dict[str, float]:
    """Mean trust over every (question, agent) at each stage, stages in first-seen order."""
    pooled: dict[str, list[float]] = {}
    for row in rows:
        for stage in items(record(row), "trust_history"):
            if isinstance(stage, Mapping) and stage.get("stage"):
                pooled.setdefault(str(stage["stage"]), []).extend(_scores(stage.get("scores")).values())
    return {stage: sum(v) / len(v) for stage, v in pooled.items() if v}


def mutual_monitoring_impact(rows: Iterable[Row]) -> dict[str, Any] | None:
    """What the challenges did, over questions whose record carries a ``challenges`` list.

    ``change_rate`` is the share of challenges (with both choices recorded) after which the
    challenged agent changed its answer; of those changes on questions with a gold answer,
    ``toward_gold_rate`` moved to gold and ``away_from_gold_rate`` moved off it.
    """
    monitored = [row for row in rows if isinstance(record(row).get("challenges"), list)]
    if not monitored:
        return None
    total = recorded = changed = with_gold = toward = away = 0
    verdicts: Counter[str] = Counter()
    for row in monitored:
        gold = row.get("gold")
        for challenge in items(record(row), "challenges"):
            if not isinstance(challenge, Mapping):
                continue
            total += 1
            if challenge.get("verdict"):
                verdicts[str(challenge["verdict"])] += 1
            before, after = challenge.get("choice_before"), challenge.get("choice_after")
            if before is None or after is None:
                continue
            recorded += 1
            if before == after:
                continue
            changed += 1
            if gold is not None:
                with_gold += 1
                toward += after == gold
                away += before == gold
    return {
        "n": len(monitored),
        "challenges": total,
        "challenges_per_question": total / len(monitored),
        "changed": changed,
        "change_rate": ratio(changed, recorded),
        "toward_gold": toward,
        "away_from_gold": away,
        "toward_gold_rate": ratio(toward, with_gold),
        "away_from_gold_rate": ratio(away, with_gold),
        "verdicts": dict(verdicts),
    }


def leadership_interventions(rows: Iterable[Row]) -> dict[str, float] | None:
    """Tie statistics over questions whose record reports its ``tie`` (null when there was none).

    ``leader_rate`` is the share of those questions whose tie the leader resolved.
    """
    ties = [record(row).get("tie") for row in rows if "tie" in record(row)]
    if not ties:
        return None
    tied = [tie for tie in ties if isinstance(tie, Mapping)]
    by_leader = sum(tie.get("resolved_by") == "leader" for tie in tied)
    return {"n": len(ties), "tie_rate": len(tied) / len(ties), "leader_rate": by_leader / len(ties)}
