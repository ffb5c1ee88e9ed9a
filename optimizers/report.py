"""A search's report: a markdown page and PNG figures drawn from the study's trials, on matplotlib's Agg
canvas (no pyplot, no plotly).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import optuna
from optuna.trial import TrialState

from teammed.evals._plots import DPI, new_figure
from teammed.optimizers._evaluated import (
    Row,
    best_row,
    component_effects,
    evaluated_rows,
    parameter_effects,
    pareto_front,
    runner_up_test,
)
from teammed.optimizers._space import subset_label
from teammed.records import write_atomic

__all__ = ["search_report", "noise_text"]

def _label(row: Row) -> str:
    config = row["config"]
    extras = [f"{k}={config[k]}" for k in ("n_agents", "n_turns", "early_consensus")
              if config.get(k) is not None]
    return subset_label(row["components"]) + (f" ({', '.join(extras)})" if extras else "")


def _subsets_chart(rows: Sequence[Row], path: Path) -> Path:
    figure = new_figure(9.0, max(3.0, 0.28 * len(rows) + 1.2))
    ax = figure.subplots()
    shown = list(reversed(rows))
    y = range(len(shown))
    colors = ["tab:blue" if r["state"] == "COMPLETE" else "tab:gray" for r in shown]
    ax.barh(list(y), [100 * r["accuracy"] for r in shown], xerr=[100 * (r["se"] or 0) for r in shown],
            color=colors, capsize=2)
    labels = [f"{_label(r)}  [{r['tokens_per_question']:.0f} tok/q]" for r in shown]
    ax.set_yticks(list(y), labels, fontsize=7)
    ax.set_xlabel("dev accuracy % ± SE (grey: pruned, partial)")
    ax.set_xlim(0, 105)
    figure.savefig(path, dpi=DPI, format="png")
    return path


def _importance_chart(effects: dict[str, dict], path: Path) -> Path:
    names = [n for n, e in effects.items() if e["effect"] is not None]
    figure = new_figure(6.5, 3.2)
    ax = figure.subplots()
    values = [100 * effects[n]["effect"] for n in names]
    ax.barh(names, values, color=["tab:green" if v >= 0 else "tab:red" for v in values])
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel("mean accuracy with component on minus off (points)")
    figure.savefig(path, dpi=DPI, format="png")
    return path


def _history_chart(trials: Sequence[optuna.trial.FrozenTrial], path: Path) -> Path:
    figure = new_figure(6.5, 3.2)
    ax = figure.subplots()
    done = [t for t in trials
            if t.state in (TrialState.COMPLETE, TrialState.PRUNED) and "accuracy" in t.user_attrs]
    for state, color in ((TrialState.COMPLETE, "tab:blue"), (TrialState.PRUNED, "tab:gray")):
        shown = [t for t in done if t.state == state]
        if shown:
            ax.scatter([t.number for t in shown], [100 * t.user_attrs["accuracy"] for t in shown],
                       color=color, s=14, label=state.name.lower())
    best, line = -1.0, []
    for t in sorted(done, key=lambda t: t.number):
        if t.state == TrialState.COMPLETE:
            best = max(best, 100 * t.user_attrs["accuracy"])
        line.append((t.number, best if best >= 0 else float("nan")))
    if line:
        ax.plot(*zip(*line, strict=True), color="tab:red", label="best so far")
    ax.set_xlabel("trial")
    ax.set_ylabel("dev accuracy (%)")
    ax.legend(fontsize=7)
    figure.savefig(path, dpi=DPI, format="png")
    return path


def _pareto_chart(rows: Sequence[Row], front: Sequence[Row], path: Path) -> Path:
    figure = new_figure(6.5, 4.0)
    ax = figure.subplots()
    done = [r for r in rows if r["state"] == "COMPLETE"]
    ax.scatter([r["tokens_per_question"] for r in done], [100 * r["accuracy"] for r in done],
               color="tab:gray", s=14, label="evaluated")
    ax.plot([r["tokens_per_question"] for r in front], [100 * r["accuracy"] for r in front], "o-",
            color="tab:red", label="Pareto front")
    for r in front:
        ax.annotate(subset_label(r["components"]), (r["tokens_per_question"], 100 * r["accuracy"]),
                    fontsize=6)
    ax.set_xlabel("tokens per question")
    ax.set_ylabel("dev accuracy (%)")
    ax.legend(fontsize=7)
    figure.savefig(path, dpi=DPI, format="png")
    return path


def _fmt(value: float | None, scale: float = 100.0, digits: int = 1) -> str:
    return "–" if value is None else f"{scale * value:.{digits}f}"


def noise_text(versus: dict) -> str:
    """One sentence: the winner against the runner-up, and whether the lead is within noise."""
    runner = subset_label(versus["runner_up"]) if isinstance(versus.get("runner_up"), list) else versus["runner_up"]
    acc = versus.get("runner_up_accuracy")
    se = versus.get("runner_up_se")
    measured = f" on {versus['runner_up_n']} questions" if versus.get("runner_up_n") is not None else ""
    shown = (f"{runner} ({_fmt(acc)}%{f' ± {_fmt(se)}' if se is not None else ''}{measured})" if acc is not None
             else str(runner))
    if versus.get("p_mcnemar") is not None:
        test = (f"{versus['test']}: b={versus['b']}, c={versus['c']} on {versus['n_pairs']} questions, "
                f"p = {versus['p_mcnemar']:.3f}")
    else:
        test = versus["test"]
    verdict = (f"**within noise** at alpha {versus['alpha']}: these questions do not tell the two apart"
               if versus["within_noise"] else f"ahead beyond noise at alpha {versus['alpha']}")
    return f"Runner-up: {shown}. The winner is {verdict} ({test})."


def search_report(study: optuna.Study, out_dir: Path | str) -> Path:
    """Write ``search_report.md`` and its figures into ``out_dir``; return the markdown's path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    trials = study.get_trials(deepcopy=False)
    rows = evaluated_rows(trials)
    multi = len(study.directions) > 1
    effects = component_effects(rows)
    best = best_row(rows)
    count = {state: sum(t.state == state for t in trials) for state in TrialState}
    lines = [f"# Special-set search: {study.study_name}", "",
             f"Objectives: {'accuracy and tokens per question' if multi else 'accuracy'}. "
             f"Trials: {count[TrialState.COMPLETE]} complete, {count[TrialState.PRUNED]} pruned, "
             f"{count[TrialState.FAIL]} failed; {len(rows)} distinct configurations.", ""]
    if best is not None:
        lines += [f"**Chosen:** {_label(best)}: accuracy {_fmt(best['accuracy'])}% ± {_fmt(best['se'])} "
                  f"(n={best['n']}), {best['tokens_per_question']:.0f} tokens/question "
                  f"(trial {best['trial']}).", ""]
        versus = runner_up_test(rows, best)
        if versus is not None:
            lines += [noise_text(versus), ""]
    if not rows:
        lines.append("No trial has been evaluated yet.")
        return write_atomic(out / "search_report.md", "\n".join(lines) + "\n")
    subsets = _subsets_chart(rows, out / "subsets.png").name
    lines += ["## Every evaluated configuration", "", f"![subsets]({subsets})",
              "", "| configuration | state | accuracy % | SE | n | tokens/q | cost/q (USD) | trial |",
              "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {_label(r)} | {r['state'].lower()} | {_fmt(r['accuracy'])} | {_fmt(r['se'])} | {r['n']} | "
              f"{r['tokens_per_question']:.0f} | {r['cost_per_question']:.6f} | {r['trial']} |" for r in rows]
    lines += ["", "## Component importance", "",
              "Mean accuracy of completed configurations with the component on minus off (mutual monitoring "
              "among configurations with leadership).", "",
              f"![importance]({_importance_chart(effects, out / 'importance.png').name})", "",
              "| component | on % | off % | effect (points) | n on | n off |", "|---|---|---|---|---|---|"]
    lines += [f"| {name} | {_fmt(e['on'])} | {_fmt(e['off'])} | {_fmt(e['effect'])} | {e['n_on']} | "
              f"{e['n_off']} |" for name, e in effects.items()]
    for name, by_value in parameter_effects(rows).items():
        values = ", ".join(f"{json.loads(v)}: {_fmt(acc)}%" for v, acc in by_value.items())
        lines += ["", f"Mean accuracy by {name}: {values}."]
    history = _history_chart(trials, out / "history.png").name
    lines += ["", "## Optimization history", "", f"![history]({history})"]
    if multi:
        front = pareto_front(rows)
        lines += ["", "## Pareto front (accuracy vs tokens)", "",
                  f"![pareto]({_pareto_chart(rows, front, out / 'pareto.png').name})", ""]
        lines += [f"- {_label(r)}: {_fmt(r['accuracy'])}%, {r['tokens_per_question']:.0f} tokens/question"
                  for r in front]
    return write_atomic(out / "search_report.md", "\n".join(lines) + "\n")
