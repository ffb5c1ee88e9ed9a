"""Metrics over result rows (`teammed.records.ResultRow`), and `summarize`, which gathers every
applicable one; `Summarizer` computes the same as rows stream by.

Every function is pure and reads the rows' `RowFacts` (`teammed.evals._facts`: what the metrics
need of a row and its record, `Deliberation` or `PeerRecord`, taken once): rows from systems that
keep no teamwork record, or whose optional fields are null, simply contribute nothing to the
metrics that need them. Each accepts typed rows or their facts; `summarize` also accepts rows in
their stored (dict) form.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from teammed import answer_stats
from teammed.evals._agreement import final_convergence, r2_disagreement_rate
from teammed.evals._binary import binary_confusion, binary_metrics, binary_scores
from teammed.evals._calibration import DEFAULT_CONFIDENCE_MAP, accuracy_by_confidence, brier, ece
from teammed.evals._facts import RECORDED, RowFacts, RowLike, facts_of, row_facts
from teammed.evals._roles import decisiveness, roles_recruited
from teammed.evals._rows import AnyRow, mean, ratio
from teammed.evals._teamwork import (
    leadership_interventions,
    mutual_monitoring_impact,
    smm_facts_per_question,
    trust_by_stage,
    trust_divergence,
)

__all__ = [
    "DEFAULT_CONFIDENCE_MAP",
    "accuracy",
    "majority_baseline",
    "answer_spread",
    "r2_disagreement_rate",
    "final_convergence",
    "accuracy_by_confidence",
    "ece",
    "brier",
    "smm_facts_per_question",
    "trust_divergence",
    "trust_by_stage",
    "mutual_monitoring_impact",
    "leadership_interventions",
    "roles_recruited",
    "decisiveness",
    "efficiency",
    "binary_confusion",
    "binary_scores",
    "binary_metrics",
    "peer_structure",
    "summarize",
    "Summarizer",
    "RowFacts",
    "row_facts",
    "rounded",
]

# Tokens and cost are billable (the same whether or not the cache answered); spent_* is what was paid.
# (parse failures and repairs are pooled as rates; n_agents is a teamwork figure)
_PER_QUESTION = tuple(field for field in RECORDED if field not in ("parse_failures", "repaired", "n_agents"))


def accuracy(rows: Iterable[RowLike]) -> float | None:
    """Share of labeled questions answered correctly; failed questions stay in the denominator,
    unlabeled ones (no gold) are left out (None when no row is labeled)."""
    labeled = [row for row in facts_of(rows) if row.labeled]
    return sum(bool(row.correct) and not row.failed for row in labeled) / len(labeled) if labeled else None


def majority_baseline(rows: Iterable[RowLike]) -> dict[str, Any] | None:
    """The accuracy of always answering the most common gold letter, over labeled rows."""
    base = answer_stats.majority_baseline(facts_of(rows))
    return base.model_dump() if base is not None else None


def answer_spread(rows: Iterable[RowLike]) -> dict[str, Any] | None:
    """The most common predicted letter among answered (not failed) rows and its share;
    ``constant`` when the share is at least `CONSTANT_SHARE` over at least `CONSTANT_MIN_N` answers."""
    spread = answer_stats.answer_spread(facts_of(rows))
    return spread.model_dump() if spread is not None else None


def _column(rows: list[RowFacts], field: str) -> list[float]:
    """The values of a numeric field over the rows that recorded it: a counter a row never wrote
    (one from another tool, or an older one) is absent, not zero; a null ``spent_*`` is absent too."""
    return [v for row in rows if (v := row.recorded.get(field)) is not None]


def efficiency(rows: Iterable[RowLike]) -> dict[str, float]:
    """Per-question means of the usage counters present, plus pooled rates.

    ``total_tokens`` is prompt + completion over rows that report both;
    ``parse_failure_rate`` and ``repaired_rate`` are sums over sums of ``calls``;
    ``cached_prompt_share`` is the provider-cached prompt tokens over the prompt tokens of the rows
    that record both (rows written before cached tokens were recorded are left out).
    """
    facts = facts_of(rows)
    out = {key: m for key in _PER_QUESTION if (m := mean(_column(facts, key))) is not None}

    def pairs(first: str, second: str) -> list[tuple[float, float]]:
        return [(a, b) for row in facts
                if (a := row.recorded.get(first)) is not None and (b := row.recorded.get(second)) is not None]

    totals = pairs("prompt_tokens", "completion_tokens")
    if totals:
        out["total_tokens"] = sum(p + c for p, c in totals) / len(totals)
    cached = pairs("cached_prompt_tokens", "prompt_tokens")
    share = ratio(sum(c for c, _ in cached), sum(p for _, p in cached))
    if share is not None:
        out["cached_prompt_share"] = share
    for field, name in (("parse_failures", "parse_failure_rate"), ("repaired", "repaired_rate")):
        counted = [(v, c) for v, c in pairs(field, "calls") if c]
        rate = ratio(sum(v for v, _ in counted), sum(c for _, c in counted))
        if rate is not None:
            out[name] = rate
    return out


def peer_structure(rows: Iterable[RowLike]) -> dict[str, Any]:
    """Structure of peer systems where recorded: routes taken (MDAgents), experts per question,
    rounds and reassignments (KAMAC and consultation), the escalation rate (adaptive), as shares
    and means."""
    records = [row.peer for row in facts_of(rows) if row.peer is not None]
    out: dict[str, Any] = {}
    routes = Counter(r.route for r in records if r.route)
    if routes:
        total = sum(routes.values())
        out["routes"] = {route: n / total for route, n in sorted(routes.items())}
    stages = [r.stage for r in records if r.stage]
    if stages:  # adaptive: the share of questions the team answered
        out["escalation_rate"] = stages.count("team") / len(stages)
    for name, field in (("experts_per_question", "n_experts"), ("rounds", "rounds"),
                        ("reassignments", "reassignments")):
        value = mean(v for r in records if (v := getattr(r, field)) is not None)
        if value is not None:
            out[name] = value
    return out


def _teamwork(rows: list[RowFacts], *, min_role_appearances: int) -> dict[str, Any]:
    teams = [row.team_facts for row in rows if row.team_facts is not None]
    return {
        "agents_per_question": mean(_column(rows, "n_agents")),
        "smm_facts_per_question": smm_facts_per_question(rows),
        "trust_divergence": trust_divergence(rows),
        "trust_by_stage": trust_by_stage(rows),
        "mutual_monitoring": mutual_monitoring_impact(rows),
        "leadership": leadership_interventions(rows),
        "early_consensus_rate": mean(float(t.early_consensus) for t in teams),
        "ranking_repairs": mean(float(t.ranking_repairs) for t in teams),
        "roles_recruited": roles_recruited(rows),
        "decisiveness": decisiveness(rows, min_appearances=min_role_appearances),
    }


def summarize(
    rows: Iterable[AnyRow | RowFacts],
    *,
    confidence_map: Mapping[str, float] = DEFAULT_CONFIDENCE_MAP,
    min_role_appearances: int = 1,
) -> dict[str, Any]:
    """Every applicable metric of a run (or any set of rows) as JSON-ready, rounded values.

    ``rows`` are `ResultRow` values, their stored (dict) form or their `RowFacts`. Sections with
    no data (e.g. ``teamwork`` for a zero-shot run, ``binary`` for a four-option data set) are
    left out; see the individual functions for definitions.
    """
    typed = facts_of(rows)
    summary: dict[str, Any] = {
        "n": len(typed),
        "n_failed": sum(row.failed for row in typed),
        "n_unlabeled": sum(not row.labeled for row in typed),
        "accuracy": accuracy(typed),
        "majority_baseline": majority_baseline(typed),
        "answer_spread": answer_spread(typed),
        "agreement": {
            "r2_disagreement_rate": r2_disagreement_rate(typed),
            "final_convergence": final_convergence(typed),
        },
        "calibration": {
            "by_confidence": accuracy_by_confidence(typed, confidence_map=confidence_map),
            "ece": ece(typed, confidence_map=confidence_map),
            "brier": brier(typed, confidence_map=confidence_map),
        },
        "teamwork": _teamwork(typed, min_role_appearances=min_role_appearances),
        "efficiency": efficiency(typed),
        "binary": binary_metrics(typed),
        "peers": peer_structure(typed),
    }
    if summary["calibration"]["ece"] is not None:
        summary["calibration"]["confidence_map"] = dict(confidence_map)
    return rounded(_pruned(summary))


class Summarizer:
    """`summarize` as rows stream by: `add` keeps each row's `RowFacts` (a few hundred bytes), never
    the row, and `result` returns what `summarize` returns over the same rows, in any order."""

    def __init__(self, *, confidence_map: Mapping[str, float] = DEFAULT_CONFIDENCE_MAP,
                 min_role_appearances: int = 1) -> None:
        self._options: dict[str, Any] = {"confidence_map": confidence_map,
                                         "min_role_appearances": min_role_appearances}
        self._facts: list[RowFacts] = []

    def add(self, row: AnyRow | RowFacts) -> None:
        self._facts.append(row_facts(row))

    def result(self) -> dict[str, Any]:
        return summarize(self._facts, **self._options)


def _pruned(value: Any) -> Any:
    """Drop None values and empty sections, recursively (keeps zeros and empty-but-meaningful lists)."""
    if isinstance(value, Mapping):
        pruned = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if v is not None and v != {}}
    return value


def rounded(value: Any, *, digits: int = 4) -> Any:
    """Floats below 1 to ``digits`` significant digits, larger ones to 2 decimals, recursively."""
    if isinstance(value, float):
        if not math.isfinite(value) or value == 0:
            return value
        return float(f"{value:.{digits}g}") if abs(value) < 1 else round(value, 2)
    if isinstance(value, Mapping):
        return {k: rounded(v, digits=digits) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v, digits=digits) for v in value]
    return value
