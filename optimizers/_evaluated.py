"""What a study evaluated, as plain rows (one per distinct configuration), and the summaries built from
them (pure functions). A configuration evaluated to the end wins over a pruned evaluation of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from teammed.config import COMPONENTS
from teammed.evals._rows import mean

__all__ = [
    "evaluated_rows",
    "runner_up_test",
    "pareto_front",
    "best_row",
    "component_effects",
    "parameter_effects",
    "PARAMETERS",
    "STATS",
]

Row = dict[str, Any]
PARAMETERS = ("n_turns", "n_agents", "early_consensus")
STATS = ("accuracy", "se", "n", "tokens_per_question", "cost_per_question", "calls_per_question")


def evaluated_rows(trials: Iterable[FrozenTrial]) -> list[Row]:
    """One row per distinct configuration, best accuracy first (then cheapest)."""
    rows: dict[str, Row] = {}
    for t in sorted(trials, key=lambda t: t.number):
        attrs = t.user_attrs
        if (t.state not in (TrialState.COMPLETE, TrialState.PRUNED) or "accuracy" not in attrs
                or attrs.get("duplicate_of") is not None):
            continue
        key = json.dumps(attrs["config"], sort_keys=True)
        row = {"trial": t.number, "state": t.state.name,
               "components": [c for c in COMPONENTS if attrs["config"].get(c)], "config": attrs["config"],
               **{k: attrs.get(k) for k in STATS}, "outcomes": attrs.get("outcomes")}
        previous = rows.get(key)
        if previous is None or (previous["state"] != "COMPLETE" and row["state"] == "COMPLETE"):
            rows[key] = row
    return sorted(rows.values(), key=lambda r: (-r["accuracy"], r["tokens_per_question"], r["trial"]))


def _complete(rows: Iterable[Row]) -> list[Row]:
    return [r for r in rows if r["state"] == "COMPLETE"]


def best_row(rows: Sequence[Row]) -> Row | None:
    """The most accurate completed configuration; ties go to the cheaper, then the earlier."""
    done = _complete(rows)
    return min(done, key=lambda r: (-r["accuracy"], r["tokens_per_question"], r["trial"])) if done else None


def runner_up_test(rows: Sequence[Row], best: Row, *, alpha: float = 0.05) -> dict[str, Any] | None:
    """The best row against the most accurate other completed row: is the lead within noise? Exact McNemar on
    the questions both answered, or, without per-question outcomes, whether the 95% intervals overlap."""
    from teammed.evals.stats import versus_runner_up

    runner = best_row([r for r in rows if r is not best and r["trial"] != best["trial"]])
    if runner is None:
        return None
    shown = {"runner_up": runner["components"], "runner_up_trial": runner["trial"],
             "runner_up_accuracy": runner["accuracy"], "runner_up_se": runner["se"]}
    if best.get("outcomes") and runner.get("outcomes"):
        as_bool = {k: bool(v) for k, v in best["outcomes"].items()}
        return {**shown, **versus_runner_up(as_bool, {k: bool(v) for k, v in runner["outcomes"].items()},
                                            alpha=alpha)}
    half = 1.96 * ((best["se"] or 0.0) + (runner["se"] or 0.0))
    return {**shown, "alpha": alpha, "within_noise": best["accuracy"] - runner["accuracy"] < half,
            "test": "overlap of the 95% intervals (no per-question outcomes stored)"}


def pareto_front(rows: Sequence[Row]) -> list[Row]:
    """The rows no other beats on both accuracy (higher) and tokens per question (fewer), cheapest first: the
    one front of search and tune. A study's row counts only when COMPLETE (a pruned one saw too few questions)."""
    done = [r for r in rows if r.get("state", "COMPLETE") == "COMPLETE"]

    def dominated(r: Row) -> bool:
        return any(o["accuracy"] >= r["accuracy"] and o["tokens_per_question"] <= r["tokens_per_question"]
                   and (o["accuracy"] > r["accuracy"] or o["tokens_per_question"] < r["tokens_per_question"])
                   for o in done)

    front = [r for r in done if not dominated(r)]
    return sorted(front, key=lambda r: (r["tokens_per_question"], -r["accuracy"]))


def component_effects(rows: Sequence[Row]) -> dict[str, dict[str, Any]]:
    """Per component: mean accuracy of completed configurations with it on and off, and the difference
    (mutual monitoring among those with leadership on, the only ones where it could be on)."""
    done = _complete(rows)
    effects = {}
    for name in COMPONENTS:
        pool = [r for r in done if r["config"].get("leadership")] if name == "mutual_monitoring" else done
        on = [r["accuracy"] for r in pool if r["config"].get(name)]
        off = [r["accuracy"] for r in pool if not r["config"].get(name)]
        mean_on, mean_off = mean(on), mean(off)
        effect = mean_on - mean_off if mean_on is not None and mean_off is not None else None
        effects[name] = {"on": mean_on, "off": mean_off, "effect": effect, "n_on": len(on), "n_off": len(off)}
    return effects


def parameter_effects(rows: Sequence[Row]) -> dict[str, dict[str, float | None]]:
    """Mean accuracy per value of each non-component parameter that took more than one value."""
    done = _complete(rows)
    effects = {}
    for name in PARAMETERS:
        values = sorted({json.dumps(r["config"].get(name)) for r in done})
        if len(values) > 1:
            effects[name] = {v: mean([r["accuracy"] for r in done if json.dumps(r["config"].get(name)) == v])
                             for v in values}
    return effects
