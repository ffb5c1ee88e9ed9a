"""The evaluation report: tables, figures and transcripts from a set of run directories.

This is the only module of ``teammed.evals`` that touches files or draws: it reads each
run's ``results.jsonl``/``summary.json``, computes the numbers with the pure metrics and
statistics, and writes ``report.md``, ``summary.json``, PNG figures and ``transcripts.html``.
"""

from __future__ import annotations

import difflib
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from teammed.answer_stats import CONSTANT_MIN_N, CONSTANT_SHARE
from teammed.errors import TeammedError
from teammed.evals import _plots, _tables
from teammed.evals import published as beside
from teammed.evals._html import PAGE_QUESTIONS, page_name, paged_transcripts
from teammed.evals._runs import (
    Group,
    distinguish_datasets,
    group_runs,
    load_run,
    merge_shards,
    unique_dirs,
    unique_runs,
)
from teammed.evals.compare import COMPARE_PAGE, compare_html, compare_markdown, paired_comparison_of
from teammed.evals.metrics import (
    accuracy,
    binary_metrics,
    rounded,
    summarize,
    trust_by_stage,
)
from teammed.evals.stats import cell_estimate, holm, paired_comparison, wilson_interval
from teammed.records import write_atomic
from teammed.results import ResultRow

__all__ = ["build_report", "ReportError"]

logger = logging.getLogger(__name__)


class ReportError(TeammedError, ValueError):
    """The runs cannot make the report asked for (e.g. an unknown baseline)."""


def _group_stats(group: Group) -> dict[str, Any]:
    scored = [(a, sum(row.labeled for row in run.rows)) for run in group.runs if (a := accuracy(run.rows)) is not None]
    labeled = [row for run in group.runs for row in run.rows if row.labeled]
    partial = [f"{run.path} ({run.shard_note or f'{len(run.rows)}/{run.n_planned}'})"
               for run in group.runs if run.partial]
    answered = [run.answered_by or (run.identity.model if run.identity else "") or str(run.summary.get("model") or "")
                for run in group.runs]  # the models that answered the group's runs
    return {
        "dataset": group.dataset,
        "config": group.config,
        "system": group.system,
        "seeds": [run.seed for run in group.runs],
        "runs": [str(run.path) for run in group.runs],
        "partial": partial,
        "accuracy": _accuracy_stats(scored, len({row.id for row in labeled})),
        "questions": _question_stats(labeled),
        "models": sorted({m for text in answered for m in text.split("+") if m}),  # each once
        "metrics": summarize(group.rows),
    }


def _question_stats(labeled: Sequence[Any]) -> dict[str, Any]:
    """The cell's distinct questions: n, the answers of repeats (a question several seeds drew), the
    correct count (each question's share right over its answers, summed) and its Wilson 95% interval."""
    shares: dict[str, list[bool]] = {}
    for row in labeled:
        shares.setdefault(row.id, []).append(bool(row.correct) and not row.failed)
    n = len(shares)
    correct = sum(sum(v) / len(v) for v in shares.values())
    return {"n": n, "answers": len(labeled), "repeats": len(labeled) - n, "correct": correct,
            "ci95": list(wilson_interval(correct, n)) if n else None}


def _accuracy_stats(scored: list[tuple[float, int]], distinct: int) -> dict[str, Any]:
    """Mean over the seeds' accuracies and its SE: the seeds' SE or the binomial SE of the ``distinct``
    questions, whichever is larger (`cell_estimate`); all null without a labelled question."""
    if not scored:  # no labeled question: there is no accuracy to report
        return {"mean": None, "se": None, "se_source": None, "k": 0, "per_seed": []}
    est = cell_estimate([a for a, _ in scored], [m for _, m in scored], distinct=distinct)
    return {"mean": est.mean, "se": est.se, "se_source": est.source, "k": est.k, "per_seed": [a for a, _ in scored]}


def _check_out_dir(out_dir: Path, run_dirs: Sequence[Path]) -> None:
    """The report never writes into (or under) a run directory."""
    target = out_dir.resolve()
    for run_dir in run_dirs:
        run = Path(run_dir).resolve()
        if target == run or run in target.parents:
            raise ReportError(f"the report directory {out_dir} is inside the run directory {run_dir}; a report "
                              f"never writes into a run: pass another --out")


def pick_pair(groups: Sequence[Group]) -> tuple[Group, Group]:
    """The two groups ``report --compare`` compares: exactly two configurations of one data set, in the
    order their runs were given."""
    if len(groups) != 2 or groups[0].dataset != groups[1].dataset:
        found = ", ".join(f"{g.config} on {g.dataset}" for g in groups)
        raise ReportError(f"--compare pairs two configurations of one data set, question by question; these runs "
                          f"hold {len(groups)} ({found}). Pass the run directories of exactly two")
    return groups[0], groups[1]


def _significance(groups: list[Group], baseline: str, *, n_resamples: int, seed: int) -> list[dict[str, Any]]:
    reference = {g.dataset: g for g in groups if g.config == baseline}
    comparisons = []
    for group in groups:
        base = reference.get(group.dataset)
        if base is None or group.config == baseline:
            continue
        comparison = paired_comparison(group.rows, base.rows, n_resamples=n_resamples, seed=seed)
        if comparison is None:
            logger.warning(
                "%s and %s share no question on %s; skipping", group.config, baseline, group.dataset
            )
            continue
        names = {"config": group.config, "dataset": group.dataset, "baseline": baseline}
        comparisons.append(names | comparison)
    for comparison, adjusted in zip(comparisons, holm([c["p_mcnemar"] for c in comparisons]), strict=True):
        comparison["p_holm"] = adjusted  # one family: every comparison the report makes
    return comparisons


def _baselines(groups: list[Group], stats: list[dict[str, Any]], datasets: list[str]) -> dict[str, dict[str, Any]]:
    """Per data set: chance (the mean of 1 / options over its labelled questions) and the majority class's
    accuracy (pooled over a configuration's questions, as Table 1 shows it)."""
    out: dict[str, dict[str, Any]] = {}
    majority = _tables.majority_by_dataset(stats)
    for dataset in datasets:
        sizes = [row.n_options for g in groups if g.dataset == dataset for row in g.rows
                 if row.labeled and row.n_options]
        out[dataset] = {"chance": sum(1 / n for n in sizes) / len(sizes) if sizes else None,
                        "majority": majority.get(dataset)}
    return out


def _figures(groups: list[Group], stats: list[dict[str, Any]], configs: list[str], datasets: list[str],
             out_dir: Path, baselines: dict[str, dict[str, Any]]) -> list[Path]:
    # the trust plot shows the systems with a trust network only (base's neutral scores are not trust)
    trusting = {g.config for g in groups if _has_trust(g)}
    trust = {c: trust_by_stage([r for g in groups if g.config == c for r in g.rows]) for c in configs if c in trusting}
    # one column per configuration and data set: pooling configurations would mix who recruits how
    roles = {f"{s['config']} · {s['dataset']}" if len(datasets) > 1 else s["config"]: dict(recruited)
             for s in stats if (recruited := s["metrics"].get("teamwork", {}).get("roles_recruited", {}))}
    drawn = [
        _plots.ablation_chart(stats, configs, datasets, out_dir / "ablation.png",
                              chance={d: b["chance"] for d, b in baselines.items() if b["chance"] is not None},
                              majority={d: b["majority"] for d, b in baselines.items() if b["majority"] is not None}),
        _plots.accuracy_vs_tokens(stats, out_dir / "accuracy_vs_tokens.png"),
        _plots.trust_over_deliberation(trust, out_dir / "trust_over_deliberation.png"),
        _plots.roles_heatmap(roles, out_dir / "roles_heatmap.png"),
    ]
    return [path for path in drawn if path is not None]


def _has_trust(group: Group) -> bool:
    """Whether a group's system runs the trust component: its run identity's (or rows') configuration."""
    for run in group.runs:
        config = (run.identity.program_config or run.identity.config) if run.identity is not None else None
        if config is None:
            config = run.row_config
        if config and config.get("trust"):
            return True
    return False


def _section(title: str, body: str | None, note: str = "") -> list[str]:
    if body is None:
        return []
    return [f"## {title}", "", *([note, ""] if note else []), body, ""]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _markdown(numbers: dict[str, Any], figures: list[Path], compared: Sequence[str] = ()) -> str:
    stats, configs, datasets = numbers["groups"], numbers["configs"], numbers["datasets"]
    seeds = sorted({str(s) for g in stats for s in g["seeds"]})
    lines = [
        "# TeamMed evaluation report",
        "",
        f"{_count(len(numbers['runs']), 'run')}: {_count(len(configs), 'configuration')} × "
        f"{_count(len(datasets), 'data set')}, seeds {', '.join(seeds)}.",
        "",
    ]
    lines += _section(
        "Table 1. Accuracy (%)", _tables.accuracy_table(stats, configs, datasets),
        "Mean over seeds ± standard error: the larger of the seeds' SE (sample std / √k) and the binomial "
        "(Agresti-Coull) SE of the cell's distinct questions, so one seed or seeds that agree never read as "
        "exact (the SE's source per cell is in `summary.json`, `se_source`); "
        "failed questions count as wrong, and *(k/n failed)* beside an accuracy says how many of its n "
        "questions failed (none where it is absent); unlabeled questions are left out; **bold** is the best per "
        "column. "
        "*majority class*: the accuracy of always answering the most common gold letter, pooled over the "
        "questions of all seeds (a run's own summary line gives it for that run's questions). "
        "† marks a partial run (fewer rows than planned: stopped, killed or still running; or merged from "
        "`--shard` parts with a shard missing, listed under *Partial runs*) and is never bold. The shards of one run "
        "(`run --shard I/N`) count as one run.",
    )
    lines += compared
    partial = [f"- {g['config']} on {g['dataset']}: {entry}" for g in stats for entry in g.get("partial") or []]
    lines += _section("Partial runs", "\n".join(partial) if partial else None,
                      "These rows are marked † in Table 1: their numbers cover fewer questions than were planned.")
    lines += _section(
        "Table 1, cell by cell", _tables.cells_table(stats),
        "Per configuration and data set: the model(s) that answered, the seeds, n = distinct labelled "
        "questions over all seeds (a question several seeds drew counts once), accuracy as mean ± SE (as in "
        "Table 1), and the 95% Wilson interval on the n distinct questions (each question scored by its share "
        "right over the seeds that drew it). The same numbers are in `table1.csv`; `table1.tex` is Table 1 as a "
        "LaTeX tabular.",
    )
    lines += _section(
        "Answer spread", _tables.spread_table(stats),
        f"Most common answer and its share of the answered questions. CONSTANT flags a system that gave one "
        f"letter to at least {CONSTANT_SHARE:.0%} of at least {CONSTANT_MIN_N} answered questions: its accuracy "
        f"is close to that letter's share of the gold answers, not evidence of reasoning.",
    )
    baseline = numbers["baseline"]
    if baseline is None:
        lines += ["## Significance", "", "No baseline given; pass `baseline=` to compare with one.", ""]
    else:
        lines += _section(
            f"Significance vs `{baseline}`", _tables.significance_table(numbers["significance"]),
            "Each question counts once, at the first seed both answered it (answers of a question other seeds "
            "also drew are left out and counted under *Repeats*). b / c: questions only the configuration / only the "
            "baseline "
            "answered correctly; exact two-sided McNemar p, raw and Holm-adjusted over all the table's "
            "comparisons (read significance from the Holm column); percentile paired-bootstrap CI of the "
            "accuracy difference; MDE: the smallest true difference (points) these pairs detect with 80% power "
            "at alpha 0.05 (normal approximation of McNemar's test with the observed discordant share).",
        )
    lines += _section("Efficiency (per question)", _tables.efficiency_table(stats),
                      "Calls, tokens and cost are billable: what the backend charges for these calls, the same "
                      "whether or not the response cache answered them (a cache hit counts as a call). *Cached %*: "
                      "the share of the prompt tokens the provider reported as read from its prompt cache (cost "
                      "applies its cached-input price where litellm knows one); teammed's own response cache is "
                      "*Cache hits*. *Spent* columns: what this run actually paid (0 for cache hits), where the "
                      "backend reports it.")
    lines += _section(
        "Teamwork and calibration", _tables.metric_table(stats, _tables.TEAMWORK),
        "ECE/Brier map confidence High/Medium/Low to 0.9/0.6/0.3. Trust div: mean per-question std of final "
        "trust. Changed: share of challenges after which the challenged agent changed its answer.",
    )
    lines += _section("Binary tasks", _tables.metric_table(stats, _tables.BINARY))
    lines += _section(
        "Binary tasks: macro average over data sets", _tables.macro_binary_table(numbers["macro"])
    )
    if figures:
        lines += ["## Figures", ""] + [f"![{p.stem}]({p.name})" for p in figures] + [""]
    pages = int(numbers.get("transcript_pages", 1))
    lines += ["Transcripts: [transcripts.html](transcripts.html)"
              + (f" ({pages} pages of at most {PAGE_QUESTIONS} questions)" if pages > 1 else ""), ""]
    return "\n".join(lines)


def build_report(
    run_dirs: Sequence[Path],
    out_dir: Path,
    *,
    baseline: str | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
    compare: bool | str = False,
    published: Path | None = None,
    published_model: str | None = None,
    published_split: str | None = None,
) -> Path:
    """Write the report of ``run_dirs`` into ``out_dir`` and return the path of ``report.md``; what it
    holds is docs/commands/report.md.

    Each run counts once however often it is passed (`unique_dirs`, and `unique_runs`: a copy or backup
    of a run counts once, from the more complete directory), each question of a run once (`load_run`),
    the shards of a run as one (`merge_shards`); both kinds of repeat are logged as warnings. Runs are
    grouped by system across seeds (`group_runs`). With a ``baseline`` every other configuration is
    tested against it on each data set (McNemar and a paired bootstrap seeded with ``seed``). ``compare``
    True: the runs hold exactly two configurations of one data set, the second compared with the first
    question by question, also on ``compare.html``; a string: a published method or file. ``published``
    (MedAgentsBench's ``output/`` folder): the methods of ``published_model`` beside the runs
    (`teammed.evals.published`)."""
    if not run_dirs:
        raise ReportError("build_report needs at least one run directory (got none)")
    _check_out_dir(Path(out_dir), run_dirs)
    runs = distinguish_datasets(merge_shards(unique_runs([load_run(d) for d in unique_dirs(run_dirs)])))
    groups = group_runs(runs)
    against = compare if isinstance(compare, str) else None  # a published method or file
    pair = pick_pair(groups) if compare is True else None
    if pair is not None and baseline is None:
        baseline = pair[0].config
    configs = _configs(groups, baseline)
    datasets = list(dict.fromkeys(g.dataset for g in groups))
    numbers: dict[str, Any] = {
        "runs": [str(run.path) for run in runs],
        "configs": configs,
        "datasets": datasets,
        "baseline": baseline,
        "groups": [_group_stats(g) for g in groups],
        "significance": [],
        "macro": {config: metrics["macro"] for config in configs
                  if (metrics := binary_metrics([row for g in groups if g.config == config for row in g.rows]))
                  and len(metrics["by_group"]) > 1},
    }
    if baseline is not None:
        numbers["significance"] = _significance(groups, baseline, n_resamples=n_resamples, seed=seed)
    if published is not None:
        numbers["published"] = beside.published_beside(groups, Path(published), model=published_model,
                                                       split=published_split)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    compared = _write_compare(pair, out_dir, numbers) if pair is not None else []
    if against is not None:
        numbers["compare"] = beside.compare_with_published(groups, against, root=published, model=published_model,
                                                           split=published_split)
        compared = beside.compare_published_markdown(numbers["compare"])
    scored = [g for g in numbers["groups"] if g["accuracy"]["mean"] is not None]
    numbers["baselines"] = _baselines(groups, numbers["groups"], datasets)
    figures = _figures(groups, scored, configs, datasets, out_dir, numbers["baselines"])
    if "published" in numbers:
        figures += _published_figures(numbers["published"], out_dir)
    numbers["figures"] = [p.name for p in figures]
    summary = json.dumps(rounded(numbers), indent=2, default=str)
    write_atomic(out_dir / "summary.json", summary)
    write_atomic(out_dir / "table1.csv", _tables.cells_csv(numbers["groups"]))
    write_atomic(out_dir / "table1.tex", _tables.accuracy_latex(numbers["groups"], configs, datasets))
    numbers["transcript_pages"] = _write_transcripts(groups, out_dir)
    report = out_dir / "report.md"
    if "published" in numbers:
        compared = [*compared, *beside.published_markdown(numbers["published"])]
    write_atomic(report, _markdown(numbers, figures, compared))
    logger.info("wrote %s (%d runs, %d figures)", report, len(runs), len(figures))
    return report


def _published_figures(numbers: dict[str, Any], out_dir: Path) -> list[Path]:
    """One accuracy × tokens plot per data set: published methods and these runs' configurations."""
    drawn = []
    for dataset, d in numbers["datasets"].items():
        points = [(m["method"], m["tokens_per_question"], 100 * m["accuracy"], True) for m in d["methods"]
                  if m["accuracy"] is not None]
        points += [(f"{o['config']} (ours)", o["tokens_per_question"], 100 * o["accuracy"], False) for o in d["ours"]
                   if o["accuracy"] is not None]
        name = "published_front.png" if len(numbers["datasets"]) == 1 else f"published_front_{dataset}.png"
        title = f"{dataset} {d['split']}, {d['model']}: {d['questions']} questions"
        drawn.append(_plots.published_front(points, out_dir / name.replace("/", "_"), title))
    return [path for path in drawn if path is not None]


def _configs(groups: Sequence[Group], baseline: str | None) -> list[str]:
    """The configurations in the order their runs were given, the ``baseline`` (checked) first."""
    configs = list(dict.fromkeys(g.config for g in groups))
    if baseline is not None:
        if baseline not in configs:
            close = difflib.get_close_matches(baseline, configs, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ReportError(
                f"baseline {baseline!r} is not among the runs' configurations.{hint} "
                f"Available: {', '.join(configs)}."
            )
        configs = [baseline, *(c for c in configs if c != baseline)]
    return configs


def _write_compare(pair: tuple[Group, Group], out_dir: Path, numbers: dict[str, Any]) -> list[str]:
    """The question-by-question comparison of ``pair``: into ``numbers``, onto its page, and its markdown."""
    view = paired_comparison_of(*pair)
    numbers["compare"] = view.as_dict()
    by_label = {group.config: group for group in pair}

    def rows_of(label: str, keys: set[tuple[str, str]]) -> list[ResultRow]:
        ids = {i for _, i in keys}
        return [row for run in by_label[label].runs for row in run.rows_of(ids) if (str(row.seed), row.id) in keys]

    write_atomic(out_dir / COMPARE_PAGE, compare_html(view, rows_of))
    return compare_markdown(view)


def _write_transcripts(groups: Sequence[Group], out_dir: Path) -> int:
    """The transcript pages of every run, an earlier report's extra pages removed; how many there are."""
    shown = [run for group in groups for run in group.runs]
    titled = [(f"{run.config} · {run.dataset} · seed {run.seed}" + (" (partial)" if run.partial else ""), run.rows)
              for run in shown]  # names that tell same-named systems apart
    pages = paged_transcripts(titled, lambda index, ids: shown[index].rows_of(ids), page_size=PAGE_QUESTIONS)
    for k, page in enumerate(pages, start=1):
        write_atomic(out_dir / page_name(k), page)  # written as its rows are read: one run's page at a time
    for stale in out_dir.glob("transcripts-*.html"):  # pages of an earlier, longer report
        number = stale.stem.removeprefix("transcripts-")
        if number.isdigit() and int(number) > len(pages):
            stale.unlink()
    return len(pages)
