"""Metrics over typed result rows (`teammed.records.ResultRow`), and `summarize`, which gathers
every applicable one.

Every function is pure and reads the typed row and its record (`Deliberation` or `PeerRecord`,
see `teammed.evals._rows`): rows from systems that keep no teamwork record, or whose optional
fields are null, simply contribute nothing to the metrics that need them. `summarize` also
accepts rows in their stored (dict) form and types them once, at its entry.
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
from teammed.evals._roles import decisiveness, roles_recruited
from teammed.evals._rows import (
    AnyRow,
    deliberation,
    is_correct,
    is_labeled,
    mean,
    number,
    peer_record,
    ratio,
    typed_rows,
)
from teammed.evals._teamwork import (
    final_trust,
    leadership_interventions,
    mutual_monitoring_impact,
    smm_facts_per_question,
    trust_by_stage,
    trust_divergence,
)
from teammed.records import ResultRow

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
    "final_trust",
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
    "rounded",
]

# Tokens and cost are billable (the same whether or not the cache answered); spent_* is what was paid.
_PER_QUESTION = ("calls", "prompt_tokens", "cached_prompt_tokens", "completion_tokens", "latency_s", "cost_usd",
                 "cache_hits", "spent_prompt_tokens", "spent_completion_tokens", "spent_cost_usd")


def accuracy(rows: Iterable[ResultRow]) -> float | None:
    """Share of labeled questions answered correctly; failed questions stay in the denominator,
    unlabeled ones (no gold) are left out (None when no row is labeled)."""
    rows = [row for row in rows if is_labeled(row)]
    return sum(map(is_correct, rows)) / len(rows) if rows else None


def majority_baseline(rows: Iterable[ResultRow]) -> dict[str, Any] | None:
    """The accuracy of always answering the most common gold letter, over labeled rows."""
    base = answer_stats.majority_baseline(rows)
    return base.model_dump() if base is not None else None


def answer_spread(rows: Iterable[ResultRow]) -> dict[str, Any] | None:
    """The most common predicted letter among answered (not failed) rows and its share;
    ``constant`` when the share is at least `CONSTANT_SHARE` over at least `CONSTANT_MIN_N` answers."""
    spread = answer_stats.answer_spread(rows)
    return spread.model_dump() if spread is not None else None


def _recorded(row: ResultRow, field: str) -> float | None:
    """A numeric field's finite value where the row recorded it: a counter a row never wrote (one
    from another tool, or an older one) is absent, not zero; a null ``spent_*`` is absent too."""
    return number(getattr(row, field)) if field in row.model_fields_set else None


def _column(rows: list[ResultRow], field: str) -> list[float]:
    """The recorded finite values of a numeric field."""
    return [v for row in rows if (v := _recorded(row, field)) is not None]


def efficiency(rows: Iterable[ResultRow]) -> dict[str, float]:
    """Per-question means of the usage counters present, plus pooled rates.

    ``total_tokens`` is prompt + completion over rows that report both;
    ``parse_failure_rate`` and ``repaired_rate`` are sums over sums of ``calls``;
    ``cached_prompt_share`` is the provider-cached prompt tokens over the prompt tokens of the rows
    that record both (rows written before cached tokens were recorded are left out).
    """
    rows = list(rows)
    out = {key: m for key in _PER_QUESTION if (m := mean(_column(rows, key))) is not None}
    totals = [
        p + c
        for row in rows
        if (p := _recorded(row, "prompt_tokens")) is not None
        and (c := _recorded(row, "completion_tokens")) is not None
    ]
    if totals:
        out["total_tokens"] = sum(totals) / len(totals)
    cached = [
        (c, p)
        for row in rows
        if (c := _recorded(row, "cached_prompt_tokens")) is not None
        and (p := _recorded(row, "prompt_tokens")) is not None
    ]
    share = ratio(sum(c for c, _ in cached), sum(p for _, p in cached))
    if share is not None:
        out["cached_prompt_share"] = share
    for field, name in (("parse_failures", "parse_failure_rate"), ("repaired", "repaired_rate")):
        pairs = [
            (v, c)
            for row in rows
            if (v := _recorded(row, field)) is not None and (c := _recorded(row, "calls"))
        ]
        rate = ratio(sum(v for v, _ in pairs), sum(c for _, c in pairs))
        if rate is not None:
            out[name] = rate
    return out


def peer_structure(rows: Iterable[ResultRow]) -> dict[str, Any]:
    """Structure of peer systems where recorded: routes taken (MDAgents), experts per question,
    rounds and reassignments (KAMAC and consultation), as shares and means."""
    records = [found for row in rows if (found := peer_record(row)) is not None]
    out: dict[str, Any] = {}
    routes = Counter(r.route for r in records if r.route)
    if routes:
        total = sum(routes.values())
        out["routes"] = {route: n / total for route, n in sorted(routes.items())}
    experts = [len(r.experts) for r in records if r.experts is not None]
    if experts:
        out["experts_per_question"] = sum(experts) / len(experts)
    for name, raw in (("rounds", [r.rounds for r in records]), ("reassignments", [r.reassignments for r in records])):
        values = [v for value in raw if (v := number(value)) is not None]
        if values:
            out[name] = sum(values) / len(values)
    return out


def _teamwork(rows: list[ResultRow], *, min_role_appearances: int) -> dict[str, Any]:
    records = [found for row in rows if (found := deliberation(row)) is not None]
    return {
        "agents_per_question": mean(_column(rows, "n_agents")),
        "smm_facts_per_question": smm_facts_per_question(rows),
        "trust_divergence": trust_divergence(rows),
        "trust_by_stage": trust_by_stage(rows),
        "mutual_monitoring": mutual_monitoring_impact(rows),
        "leadership": leadership_interventions(rows),
        "early_consensus_rate": mean(float(r.early_consensus) for r in records),
        "ranking_repairs": mean(float(r.ranking_repairs) for r in records),
        "roles_recruited": roles_recruited(rows),
        "decisiveness": decisiveness(rows, min_appearances=min_role_appearances),
    }


def summarize(
    rows: Iterable[AnyRow],
    *,
    confidence_map: Mapping[str, float] = DEFAULT_CONFIDENCE_MAP,
    min_role_appearances: int = 1,
) -> dict[str, Any]:
    """Every applicable metric of a run (or any set of rows) as JSON-ready, rounded values.

    ``rows`` are `ResultRow` values or their stored (dict) form, typed here once. Sections with
    no data (e.g. ``teamwork`` for a zero-shot run, ``binary`` for a four-option data set) are
    left out; see the individual functions for definitions.
    """
    typed = typed_rows(rows)
    summary: dict[str, Any] = {
        "n": len(typed),
        "n_failed": sum(row.failed for row in typed),
        "n_unlabeled": sum(not is_labeled(row) for row in typed),
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
