"""Markdown tables of the report, rendered from the report's plain-data numbers."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Stats = Mapping[str, Any]
_DASH = "–"


def markdown_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return "\n".join(lines)


def _get(stats: Stats, *path: str) -> Any:
    node: Any = stats
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def _fmt(value: Any, spec: str, *, scale: float = 1.0) -> str:
    return _DASH if value is None else format(value * scale, spec)


def _mean_se_cell(accuracy: Mapping[str, Any], plus_minus: str = " ± ") -> str:
    if accuracy.get("mean") is None:
        return _DASH
    mean = f"{100 * accuracy['mean']:.1f}"
    return mean if accuracy.get("se") is None else f"{mean}{plus_minus}{100 * accuracy['se']:.1f}"


def _failed_note(groups: Sequence[Stats]) -> str:
    """`` (k/n failed)`` beside an accuracy when questions of ``groups`` failed (they count as wrong), else
    nothing: k and n summed over the groups (one cell's, or a configuration's over data sets for its average)."""
    n_failed = sum(_get(g, "metrics", "n_failed") or 0 for g in groups)
    n = sum(_get(g, "metrics", "n") or 0 for g in groups)
    return f" ({n_failed}/{n} failed)" if n_failed else ""


def accuracy_table(groups: Sequence[Stats], configs: Sequence[str], datasets: Sequence[str]) -> str:
    """Table 1: configurations × data sets, "mean ± SE" accuracy in %, best per column in bold, with
    "(k/n failed)" beside it when questions failed (beside the average too, and beside the dash of a
    cell without labelled questions: a cell whose questions all failed never reads as a plain number).

    An "Average" column (mean of the per-data-set means) is added for configurations run on
    every data set when there is more than one.
    """
    cells = {(g["config"], g["dataset"]): g["accuracy"] for g in groups if g["accuracy"].get("mean") is not None}
    partial = {(g["config"], g["dataset"]) for g in groups if g.get("partial")}
    by_cell = {(g["config"], g["dataset"]): g for g in groups}
    majority = majority_by_dataset(groups)
    columns = list(datasets)
    averages: dict[str, float] = {}
    if len(datasets) > 1:  # the mean of the per-data-set means of each configuration run on every data set
        means = {config: [cells[(config, d)]["mean"] for d in datasets if (config, d) in cells] for config in configs}
        averages = {config: sum(m) / len(m) for config, m in means.items() if len(m) == len(datasets)}
        columns.append("Average")
    best = {  # a partial row (fewer questions than planned) is never marked the best of its column
        d: max((cells[(c, d)]["mean"] for c in configs if (c, d) in cells and (c, d) not in partial), default=None)
        for d in datasets
    }
    best["Average"] = max(averages.values(), default=None)
    body = []
    for config in configs:
        row = [config]
        for column in columns:
            if column == "Average":
                mean, text = _average_cell(averages.get(config), config, datasets, by_cell)
            else:
                mean, text = _data_cell(cells.get((config, column)), (config, column) in partial,
                                        by_cell.get((config, column)))
            bold = mean is not None and mean == best[column] and (config, column) not in partial
            row.append(f"**{text}**" if bold else text)
        body.append(row)
    if majority:
        body.append(["*majority class*", *(_fmt(majority.get(c), ".1f", scale=100) if c != "Average" else _DASH
                                          for c in columns)])
    return markdown_table(["Config", *columns], body)


def majority_by_dataset(groups: Sequence[Stats]) -> dict[str, float]:
    """The majority-class baseline's accuracy of each data set (the first group's that has one)."""
    majority: dict[str, float] = {}
    for g in groups:
        base = _get(g, "metrics", "majority_baseline", "accuracy")
        if base is not None:
            majority.setdefault(g["dataset"], base)
    return majority


def _average_cell(mean: float | None, config: str, datasets: Sequence[str],
                  by_cell: Mapping[tuple[str, str], Stats]) -> tuple[float | None, str]:
    """The Average cell: a dash for a configuration not run on every data set."""
    if mean is None:
        return None, _DASH
    return mean, f"{100 * mean:.1f}" + _failed_note([by_cell[(config, d)] for d in datasets])


def _data_cell(acc: Mapping[str, Any] | None, partial: bool, group: Stats | None) -> tuple[float | None, str]:
    """One data set's cell: "mean ± SE" (a dash without labelled questions), a dagger when partial, and
    the failed questions."""
    mean, text = (None, _DASH) if acc is None else (acc["mean"], _mean_se_cell(acc))
    if partial:
        text += " †"
    if group is not None:
        text += _failed_note([group])
    return mean, text


def cells_table(groups: Sequence[Stats]) -> str:
    """Table 1 cell by cell: model, seeds, n, mean ± SE and the question-level 95% interval."""
    body = []
    for g in groups:
        q = g.get("questions") or {}
        ci = q.get("ci95")
        body.append([g["config"], g["dataset"], ", ".join(g.get("models") or []) or _DASH, str(len(g["seeds"])),
                     str(q.get("n", 0)), _mean_se_cell(g["accuracy"]),
                     f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else _DASH])
    return markdown_table(["Config", "Dataset", "Model", "Seeds", "n", "Accuracy (%)", "95% CI (questions)"], body)


def cells_csv(groups: Sequence[Stats]) -> str:
    """Table 1's cells as CSV: one row per configuration and data set, accuracies as percentages."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["config", "dataset", "model", "seeds", "n_questions", "n_correct", "n_failed", "mean", "se",
                     "ci95_low", "ci95_high", "n_answers"])
    for g in groups:
        acc, q = g["accuracy"], g.get("questions") or {}
        ci = q.get("ci95") or (None, None)
        writer.writerow([g["config"], g["dataset"], "+".join(g.get("models") or []), len(g["seeds"]), q.get("n", 0),
                         f"{q.get('correct', 0):g}", _get(g, "metrics", "n_failed") or 0,
                         *(("" if v is None else f"{100 * v:.2f}") for v in (acc.get("mean"), acc.get("se"), *ci)),
                         q.get("answers", q.get("n", 0))])
    return buffer.getvalue()


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in str(text))


def accuracy_latex(groups: Sequence[Stats], configs: Sequence[str], datasets: Sequence[str]) -> str:
    """Table 1 as a LaTeX ``tabular`` (booktabs): mean $\\pm$ SE in %, best per column in bold, n per cell."""
    cells = {(g["config"], g["dataset"]): g for g in groups}
    best = {d: max((cells[(c, d)]["accuracy"]["mean"] for c in configs if (c, d) in cells
                    and cells[(c, d)]["accuracy"].get("mean") is not None), default=None) for d in datasets}
    models = sorted({m for g in groups for m in g.get("models") or []})
    lines = ["% teammed report: Table 1, accuracy (%) as mean $\\pm$ SE over seeds; n = labelled questions",
             f"% model(s): {', '.join(models) or 'not recorded'}",
             "\\begin{tabular}{l" + "c" * len(datasets) + "}", "\\toprule",
             " & ".join(["Config", *map(latex_escape, datasets)]) + " \\\\", "\\midrule"]
    for config in configs:
        row = [latex_escape(config)]
        for d in datasets:
            g = cells.get((config, d))
            acc = g["accuracy"] if g else {}
            if not g or acc.get("mean") is None:
                row.append("--")
                continue
            text = _mean_se_cell(acc, " $\\pm$ ")
            if acc["mean"] == best[d]:
                text = f"\\textbf{{{text}}}"
            n = (g.get("questions") or {}).get("n", 0)
            row.append(f"{text} {{\\scriptsize ($n$={n})}}")
        lines.append(" & ".join(row) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


def spread_table(groups: Sequence[Stats]) -> str | None:
    """Per (configuration, data set): the most common answer, its share, and a CONSTANT flag."""
    body = []
    for g in groups:
        spread = _get(g, "metrics", "answer_spread")
        if not spread:
            continue
        flag = "CONSTANT" if spread.get("constant") else ""
        body.append([g["config"], g["dataset"], str(spread["top"]), _fmt(spread.get("share"), ".1f", scale=100),
                     str(spread.get("n_answered")), flag])
    return markdown_table(["Config", "Dataset", "Top answer", "Share %", "Answered", "Flag"], body) if body else None


def significance_table(comparisons: Sequence[Stats]) -> str:
    """Paired comparisons with the baseline: Δ accuracy, McNemar's exact p and the bootstrap CI."""
    body = []
    for comp in comparisons:
        level = round(100 * comp.get("confidence", 0.95))
        ci = f"[{100 * comp['ci_low']:+.1f}, {100 * comp['ci_high']:+.1f}] ({level}%)"
        body.append([
            comp["config"], comp["dataset"], f"{100 * comp['diff']:+.1f}", str(comp["b"]), str(comp["c"]),
            f"{comp['p_mcnemar']:.4f}", _fmt(comp.get("p_holm"), ".4f"), ci, _fmt(comp.get("mde"), ".1f", scale=100),
            str(comp["n_pairs"]), str(comp.get("repeats", 0)),
        ])
    header = ["Config", "Dataset", "Δ acc (pp)", "b", "c", "McNemar p", "Holm p", "Bootstrap CI of Δ (pp)",
              "MDE (pp)", "Pairs", "Repeats"]
    return markdown_table(header, body)


_Column = tuple[str, Callable[[Stats], str]]

def _cell(*path: str, spec: str, scale: float = 1.0) -> Callable[[Stats], str]:
    return lambda stats: _fmt(_get(stats, "metrics", *path), spec, scale=scale)


_EFFICIENCY: list[_Column] = [
    ("Calls", _cell("efficiency", "calls", spec=".1f")),
    ("Prompt tok", _cell("efficiency", "prompt_tokens", spec=".0f")),
    ("Cached %", _cell("efficiency", "cached_prompt_share", spec=".1f", scale=100)),
    ("Cost (USD)", _cell("efficiency", "cost_usd", spec=".5f")),
    ("Completion tok", _cell("efficiency", "completion_tokens", spec=".0f")),
    ("Spent prompt tok", _cell("efficiency", "spent_prompt_tokens", spec=".0f")),
    ("Spent completion tok", _cell("efficiency", "spent_completion_tokens", spec=".0f")),
    ("Latency (s)", _cell("efficiency", "latency_s", spec=".2f")),
    ("Cache hits", _cell("efficiency", "cache_hits", spec=".1f")),
    ("Parse fail %", _cell("efficiency", "parse_failure_rate", spec=".1f", scale=100)),
    ("Escalated %", _cell("peers", "escalation_rate", spec=".1f", scale=100)),  # adaptive: the team answered
]

# agreement, calibration and teamwork-component metrics
TEAMWORK: list[_Column] = [
    ("R2 disagree %", _cell("agreement", "r2_disagreement_rate", spec=".1f", scale=100)),
    ("Final unanimous %", _cell("agreement", "final_convergence", "unanimous_rate", spec=".1f", scale=100)),
    ("ECE", _cell("calibration", "ece", spec=".3f")),
    ("Brier", _cell("calibration", "brier", spec=".3f")),
    ("SMM facts/q", _cell("teamwork", "smm_facts_per_question", spec=".1f")),
    ("Trust div", _cell("teamwork", "trust_divergence", spec=".3f")),
    ("Challenges/q", _cell("teamwork", "mutual_monitoring", "challenges_per_question", spec=".2f")),
    ("Changed %", _cell("teamwork", "mutual_monitoring", "change_rate", spec=".1f", scale=100)),
    ("Leader ties %", _cell("teamwork", "leadership", "leader_rate", spec=".1f", scale=100)),
]


def metric_table(groups: Sequence[Stats], columns: list[_Column]) -> str | None:
    """One row per (configuration, data set) with any of ``columns``; None when no group has any."""
    rendered = [(stats, [render(stats) for _, render in columns]) for stats in groups]
    body = [[stats["config"], stats["dataset"], *cells] for stats, cells in rendered if any(c != _DASH for c in cells)]
    return markdown_table(["Config", "Dataset", *(name for name, _ in columns)], body) if body else None


def efficiency_table(groups: Sequence[Stats]) -> str | None:
    """Per-question cost of each (configuration, data set); None when no run reported usage.

    Tokens and cost are billable (independent of the cache); prompt tokens, the share of them the
    provider read from its prompt cache ("Cached %") and cost stand side by side; "Spent" is what
    was actually paid. "Spent", "Cached %" and "Escalated %" (the share of questions an adaptive
    system's team answered) are shown when some run reports them."""
    optional = ("Spent", "Cached", "Escalated")
    columns = [c for c in _EFFICIENCY
               if not c[0].startswith(optional) or any(c[1](g) != _DASH for g in groups)]
    return metric_table(groups, columns)


# confusion counts and scores on binary tasks
BINARY: list[_Column] = [
    *((k, _cell("binary", "overall", k, spec=".0f")) for k in ("TP", "FP", "TN", "FN")),
    *((k.title(), _cell("binary", "overall", k, spec=".3f")) for k in ("precision", "recall", "specificity", "f1")),
]


def macro_binary_table(macro: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Per configuration, the macro average over data sets of the binary scores."""
    if not macro:
        return None
    keys = ("precision", "recall", "specificity", "f1")
    body = [[config, *(_fmt(scores.get(k), ".3f") for k in keys)] for config, scores in macro.items()]
    return markdown_table(["Config", "Precision", "Recall", "Specificity", "F1"], body)
