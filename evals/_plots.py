"""The report's figures, drawn on matplotlib's Agg canvas (no pyplot, no global state)."""

from __future__ import annotations

import math
import textwrap
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from teammed.evals._rows import stage_name

Stats = Mapping[str, Any]
DPI = 120


def new_figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _save(figure: Figure, path: Path) -> Path:
    # "tight" grows the canvas to every label: nothing is cut off, however long a role's name
    figure.savefig(path, dpi=DPI, format="png", bbox_inches="tight", pad_inches=0.15)
    return path


def _wrap(label: str, width: int = 28) -> str:
    """A long tick label on at most three lines (``Clinical Pharmacologist with a focus ...``)."""
    lines = textwrap.wrap(str(label), width=width) or [""]
    return "\n".join(lines[:2] + ([textwrap.shorten(" ".join(lines[2:]), width=width, placeholder="…")]
                                  if len(lines) > 2 else []))


def ablation_chart(
    groups: Sequence[Stats], configs: Sequence[str], datasets: Sequence[str], path: Path, *,
    chance: Mapping[str, float] | None = None, majority: Mapping[str, float] | None = None,
) -> Path:
    """Grouped bars: mean accuracy per configuration, one bar per data set, SE error bars; each data set's
    chance (dotted) and majority-class accuracy (dashed) drawn across its bars, so a bar is read against
    what guessing would score."""
    cells = {(g["config"], g["dataset"]): g["accuracy"] for g in groups}
    figure = new_figure(min(20.0, max(6.0, 1.0 + 0.5 * len(configs) * max(1, len(datasets)))), 4.0)
    ax = figure.subplots()
    x = np.arange(len(configs))
    width = 0.8 / max(1, len(datasets))
    for i, dataset in enumerate(datasets):
        accs = [cells.get((c, dataset)) for c in configs]
        means = [100 * a["mean"] if a else np.nan for a in accs]
        errors = [100 * a["se"] if a and a.get("se") is not None else 0.0 for a in accs]
        xs = x + (i - (len(datasets) - 1) / 2) * width
        bars = ax.bar(xs, means, width, yerr=errors, capsize=3, label=dataset)
        ax.bar_label(bars, labels=["" if m != m else f"{m:.1f}" for m in means], padding=2, fontsize="x-small")
        for value, dashed, name in (((chance or {}).get(dataset), False, "chance"),
                                    ((majority or {}).get(dataset), True, "majority class")):
            if value is not None:
                ax.hlines([100 * value] * len(xs), xs - width / 2, xs + width / 2, colors="black",
                          linestyles="--" if dashed else ":", linewidth=1.2, label=name if i == 0 else "_nolegend_")
    ax.set_xticks(x, [_wrap(c, 18) for c in configs], rotation=30 if len(configs) > 6 else 0,
                  ha="right" if len(configs) > 6 else "center")
    ax.set(ylim=(0, 105), ylabel="Accuracy (%)",
           title="Accuracy by configuration (mean ± SE over seeds; dotted: chance, dashed: majority class)")
    ax.legend(fontsize="small")
    return _save(figure, path)


def accuracy_vs_tokens(groups: Sequence[Stats], path: Path) -> Path | None:
    """Scatter of mean accuracy against mean tokens per question, one point per group."""
    points = [
        (g["metrics"]["efficiency"]["total_tokens"], 100 * g["accuracy"]["mean"], g)
        for g in groups
        if "total_tokens" in g.get("metrics", {}).get("efficiency", {})
    ]
    if not points:
        return None
    figure = new_figure(6.5, 4.5)
    ax = figure.subplots()
    for dataset in dict.fromkeys(g["dataset"] for _, _, g in points):
        xs, ys = zip(*[(x, y) for x, y, g in points if g["dataset"] == dataset], strict=True)
        ax.scatter(xs, ys, label=dataset)
    for x, y, g in points:
        ax.annotate(g["config"], (x, y), textcoords="offset points", xytext=(4, 4), fontsize="x-small")
    ax.set(xlabel="Tokens per question (prompt + completion)", ylim=(0, 105), ylabel="Accuracy (%)",
           title="Accuracy vs cost")
    ax.legend(fontsize="small")
    return _save(figure, path)


def trust_over_deliberation(series: Mapping[str, Mapping[str, float]], path: Path) -> Path | None:
    """Mean trust at each deliberation stage, one line per configuration."""
    series = {name: stages for name, stages in series.items() if stages}
    if not series:
        return None
    order = list(dict.fromkeys(stage for stages in series.values() for stage in stages))
    figure = new_figure(6.5, 4.0)
    ax = figure.subplots()
    markers = "osD^vP*X"
    for k, (name, stages) in enumerate(series.items()):
        xs = [order.index(stage) for stage in stages]
        # distinct markers and dashes: configurations with equal trust stay visible on top of each other
        ax.plot(xs, list(stages.values()), marker=markers[k % len(markers)], linestyle=("-", "--", ":", "-.")[k % 4],
                label=name, alpha=0.85)
    ax.set_xticks(range(len(order)), [stage_name(s) for s in order], rotation=30, ha="right")
    ax.set(ylabel="Mean trust", title="Trust over the deliberation")
    ax.legend(fontsize="small")
    return _save(figure, path)


def roles_heatmap(counts: Mapping[str, Mapping[str, int]], path: Path, *, top: int = 15) -> Path | None:
    """Heatmap of recruitments: the ``top`` most frequent roles × columns (a configuration, or a
    configuration on a data set: `teammed.evals.report` never pools configurations)."""
    datasets = list(counts)
    totals: Counter[str] = Counter()
    for per_role in counts.values():
        totals.update(per_role)
    roles = sorted(totals, key=lambda r: (-totals[r], r))[:top]
    if not roles:
        return None
    grid = np.array([[counts[d].get(role, 0) for d in datasets] for role in roles])
    labels = [_wrap(role) for role in roles]
    lines = sum(label.count("\n") + 1 for label in labels)
    longest = max(len(line) for label in labels for line in label.split("\n"))
    figure = new_figure(2.8 + 0.075 * longest + 1.1 * len(datasets), 1.2 + 0.28 * lines)
    ax = figure.subplots()
    image = ax.imshow(grid, cmap="Blues", aspect="auto", vmin=0)
    darkest = grid.max() or 1
    for (i, j), n in np.ndenumerate(grid):
        ax.text(j, i, str(n), ha="center", va="center", fontsize="small",
                color="white" if n > 0.6 * darkest else "black")
    ax.set_xticks(range(len(datasets)), [_wrap(d, 16) for d in datasets], rotation=30 if len(datasets) > 3 else 0,
                  ha="right" if len(datasets) > 3 else "center")
    ax.set_yticks(range(len(roles)), labels, fontsize="small")
    ax.set_title(f"Roles recruited (top {len(roles)})")
    figure.colorbar(image, ax=ax, label="Recruitments")
    return _save(figure, path)


def pareto(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points (tokens, accuracy) no other point beats on both (fewer tokens, higher
    accuracy), cheapest first."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    front, best = [], -1.0
    for i in order:
        if points[i][1] > best:
            front.append(i)
            best = points[i][1]
    return front


def published_front(points: Sequence[tuple[str, float | None, float, bool]], path: Path, title: str) -> Path | None:
    """Accuracy (%) against tokens per question (log x) of published methods (``True``) and your
    configurations (``False``), each point labelled and the Pareto front drawn; a method without
    token counts is named under the plot, not placed."""
    placed = [(label, tokens, acc, pub) for label, tokens, acc, pub in points if tokens]
    missing = [label for label, tokens, _, _ in points if not tokens]
    if not placed:
        return None
    figure = new_figure(7.0, 4.8)
    ax = figure.subplots()
    for published, marker, name in ((True, "s", "published"), (False, "o", "this report")):
        mine = [(t, a) for _, t, a, p in placed if p == published]
        if mine:
            ax.scatter(*zip(*mine, strict=True), marker=marker, label=name, zorder=3)
    shown: list[tuple[float, float]] = []
    for label, tokens, acc, _ in sorted(placed, key=lambda p: (p[1], p[2])):
        # a label near an earlier one (within a third of a decade and a point) is stacked below it
        near = sum(abs(math.log10(tokens / t)) < 0.35 and abs(acc - a) < 1.0 for t, a in shown)
        shown.append((tokens, acc))
        ax.annotate(label, (tokens, acc), textcoords="offset points", xytext=(4, 4 - 9 * near), fontsize="x-small")
    front = [placed[i] for i in pareto([(t, a) for _, t, a, _ in placed])]
    ax.plot([t for _, t, _, _ in front], [a for _, _, a, _ in front], color="grey", linestyle="--", linewidth=1,
            label="Pareto front", zorder=2)
    ax.set(xscale="log", xlabel="Tokens per question (prompt + completion, log scale)", ylabel="Accuracy (%)")
    ax.set_title(title, fontsize="small")
    if missing:
        ax.text(0.0, -0.16, "not placed (no token counts published): " + ", ".join(missing), transform=ax.transAxes,
                fontsize="x-small")
    ax.legend(fontsize="small")
    return _save(figure, path)
