"""The report built from synthetic run directories written into tmp_path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from teammed.deliberation import Deliberation
from teammed.errors import DataError
from teammed.evals import ReportError, build_report
from teammed.evals._runs import load_run
from teammed.evals.stats import binomial_se, wilson_interval

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FIGURES = ("ablation.png", "accuracy_vs_tokens.png", "trust_over_deliberation.png", "roles_heatmap.png")
N_QUESTIONS = 10
# correct answers per seed: question i is right iff i < count
# (every seed draws the same 10 questions: a question counts once, so a cell's n is 10 and its SE is at
# least the binomial SE of 10 questions, above the seeds' 5.8, 3.3 and 0.0)
CORRECT = {
    ("medqa", "base"): [5, 6, 7],  # 60.0 ± 13.3 (binomial_se(6, 10))
    ("medqa", "all"): [8, 8, 9],  # 83.3 ± 12.1 (binomial_se(8, 10))
    ("pubmedqa", "base"): [4, 5, 6],  # 50.0 ± 13.4 (binomial_se(5, 10))
    ("pubmedqa", "all"): [7, 7, 7],  # 70.0 ± 12.9 (binomial_se(7, 10)): seeds that agree are not exact
}
PAYLOAD = "<script>alert('x')</script>"


def _teamwork_record(gold: str, prediction: str, qid: int) -> dict[str, Any]:
    """A real `Deliberation` in its stored form (the report reads records typed)."""
    wrong = "C"  # predictions are A or B, so agent_2's first R2 choice always dissents
    record = {
        "answer": prediction,
        "agents": [
            {"id": "agent_1", "role": "Cardiologist", "expertise": "heart", "weight": 0.5},
            {"id": "agent_2", "role": "Nephrologist", "expertise": "kidney & <fluids>", "weight": 0.3},
            {"id": "agent_3", "role": "Internist", "expertise": "general", "weight": 0.2},
        ],
        "r2": [
            {"agent": "agent_1", "ranking": [prediction, wrong], "confidence": "High", "justification": "",
             "facts": []},
            {"agent": "agent_2", "ranking": [wrong, prediction], "confidence": "Low", "justification": "",
             "facts": []},
            {"agent": "agent_3", "ranking": [prediction, wrong], "confidence": "Medium", "justification": "",
             "facts": []},
        ],
        "final": [
            {"agent": a, "ranking": [prediction, wrong], "first": prediction, "confidence": "Medium",
             "rationale": ""}
            for a in ("agent_1", "agent_2", "agent_3")
        ],
        "votes_by_turn": {"agent_1": [prediction] * 3, "agent_2": [wrong, prediction, prediction],
                          "agent_3": [prediction] * 3},
        "challenges": [{
            "turn": 1, "agent": "agent_2", "reason": "", "concern": PAYLOAD, "severity": "high",
            "response": "fair point", "verdict": "strong", "verdict_reason": "", "choice_before": wrong,
            "choice_after": prediction, "trust_before": 0.8, "trust_after": 0.7,
        }],
        "closed_loop": [],
        "mediations": [],
        "report": "",
        "smm": {"question_analysis": "…", "verified_facts": ["fact one", "fact two"]},
        "trust_history": [
            {"stage": "initial", "scores": {"agent_1": 0.8, "agent_2": 0.8, "agent_3": 0.8}},
            {"stage": "post_r2", "scores": {"agent_1": 0.9, "agent_2": 0.7, "agent_3": 0.8}},
            {"stage": "mm_turn_1", "scores": {"agent_1": 0.9, "agent_2": 0.6, "agent_3": 0.8}},
        ],
        "trust": {"agent_1": 0.9, "agent_2": 0.6, "agent_3": 0.8},
        "scores": {prediction: 5.0, wrong: 2.0},
        "aggregation": "trust_borda",
        "tie": None if qid else {"tied": [prediction, wrong], "resolved_by": "leader", "answer": prediction,
                                 "reason": ""},
        "early_consensus": False,
        "ranking_repairs": 0,
    }
    return Deliberation.model_validate(record).model_dump(mode="json")


def _row(dataset: str, label: str, system: str, seed: int, i: int, correct: bool) -> dict[str, Any]:
    gold = "A"
    prediction = gold if correct else "B"
    binary = dataset == "pubmedqa"
    teamwork = system == "teamwork"
    options = {"A": "yes", "B": "no", "C": "maybe"} if binary else {"A": "a", "B": "b", "C": "c", "D": "d"}
    return {
        "id": f"{dataset}-{i}", "dataset": dataset, "seed": seed, "system": system, "label": label,
        "gold": gold, "prediction": prediction, "correct": correct, "failed": False, "error": None,
        "confidence": "High" if correct else "Low", "options": options,
        "binary_positive": "A" if binary else None,
        "calls": 15 if teamwork else 1, "prompt_tokens": 9000 if label == "all" else 6000,
        "completion_tokens": 900, "latency_s": 12.5, "cost_usd": 0.0042, "cache_hits": 0,
        "parse_failures": 1 if i == 0 else 0, "repaired": 0,
        "n_agents": 3 if teamwork else 1,
        "roles": ["Cardiologist", "Nephrologist", "Internist"] if teamwork else [],
        "trust": {"agent_1": 0.9, "agent_2": 0.6, "agent_3": 0.8} if teamwork else None,
        "config": {"label": label, "trust": label == "all"},
        "record": _teamwork_record(gold, prediction, i) if teamwork else None,
        "transcript": [
            {"phase": "R2", "turn": None, "agent": "agent_1", "role": "Cardiologist", "kind": "assessment",
             "text": f"I choose {prediction} because of {PAYLOAD}", "data": {"raw": "<b>bold?</b>"}},
        ] if teamwork else [],
    }


def _write_run(
    root: Path, dataset: str, label: str, seed: int, n_correct: int, *, system: str = "teamwork"
) -> Path:
    run = root / f"{dataset}-{label}-{seed}"
    run.mkdir(parents=True)
    rows = [_row(dataset, label, system, seed, i, i < n_correct) for i in range(N_QUESTIONS)]
    run.joinpath("results.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    summary = {"n": len(rows), "n_failed": 0, "accuracy": n_correct / N_QUESTIONS, "label": label,
               "system": system, "dataset": dataset, "seed": seed, "model": "scripted", "config": {}}
    run.joinpath("summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return run


@pytest.fixture
def ablation_runs(tmp_path: Path) -> list[Path]:
    """Two presets × three seeds × two data sets."""
    return [
        _write_run(tmp_path / "runs", dataset, label, seed, counts[seed])
        for (dataset, label), counts in CORRECT.items()
        for seed in range(3)
    ]


@pytest.fixture
def report(ablation_runs: list[Path], tmp_path: Path) -> Path:
    return build_report(ablation_runs, tmp_path / "report", baseline="base")


def _table_row(markdown: str, config: str) -> str:
    """The first Table 1 row of ``config``."""
    table = markdown.split("## Table 1")[1].split("##")[0]
    return next(line for line in table.splitlines() if line.startswith(f"| {config} |"))


def test_table_one_has_mean_se_cells_and_bold_best(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    se = {k: f"{100 * binomial_se(k, 10):.1f}" for k in (5, 6, 7, 8)}
    assert _table_row(text, "base") == f"| base | 60.0 ± {se[6]} | 50.0 ± {se[5]} | 55.0 |"
    assert _table_row(text, "all") == f"| all | **83.3 ± {se[8]}** | **70.0 ± {se[7]}** | **76.7** |"
    assert se == {5: "13.4", 6: "13.3", 7: "12.9", 8: "12.1"}


def test_significance_table_against_the_baseline(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    assert "## Significance vs `base`" in text
    assert "McNemar p" in text and "Bootstrap CI" in text
    # medqa: each of the 10 questions once, at seed 0 (base right on 5, all on 8): b = 3, c = 0, p = 2 / 2³;
    # keyed by (seed, id) it would be 3 + 2 + 2 = 7 "pairs" of 30 and p = 0.0156
    medqa = next(line for line in text.splitlines() if line.startswith("| all | medqa | +30.0 |"))
    assert "| 3 | 0 | 0.2500 | 0.5000 |" in medqa  # Holm over the table's two comparisons: 2 x 0.25
    assert medqa.endswith("| 48.5 | 10 | 20 |")  # MDE 2.80 x sqrt((3/10) / 10); 10 pairs; 20 repeats left out


def test_efficiency_and_teamwork_tables(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    efficiency = text.split("## Efficiency (per question)")[1].split("##")[0]
    # prompt tokens and cost side by side (no cached share: these rows do not record cached tokens)
    assert "| all | medqa | 15.0 | 9000 | 0.00420 | 900 | 12.50 | 0.0 | 0.7 |" in efficiency
    teamwork = text.split("## Teamwork and calibration")[1].split("##")[0]
    line = next(row for row in teamwork.splitlines() if row.startswith("| base | medqa |"))
    cells = [cell.strip() for cell in line.strip("|").split("|")][2:]
    # R2 always split, finals unanimous; 18 High-and-right, 12 Low-and-wrong: ECE = .6·.1 + .4·.3,
    # Brier = .6·.01 + .4·.09; 2 facts; trust pstdev(.9, .6, .8); one challenge per question, always
    # followed by a change; the leader broke 1 tie in 10
    assert cells == ["100.0", "100.0", "0.180", "0.042", "2.0", "0.125", "1.00", "100.0", "10.0"]
    assert "## Binary tasks" in text and "| all | pubmedqa | 21 | 0 | 0 | 9 |" in text


def test_figures_are_valid_pngs(report: Path) -> None:
    for name in FIGURES:
        path = report.parent / name
        assert path.is_file(), name
        assert path.read_bytes().startswith(PNG_MAGIC), name
        assert f"]({name})" in report.read_text(encoding="utf-8")


def test_transcripts_html_is_escaped_and_complete(report: Path) -> None:
    page = (report.parent / "transcripts.html").read_text(encoding="utf-8")
    assert page.count("<script") == 1 and "<script src" not in page  # only the viewer's own inline script
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "kidney &amp; &lt;fluids&gt;" in page and "&lt;b&gt;bold?&lt;/b&gt;" in page
    assert page.count('<article class="q"') == 4 * 3 * N_QUESTIONS  # one per question
    assert "Challenges" in page and "0.8 → 0.7" in page and "Final trust" in page


def test_summary_json_holds_the_numbers(report: Path) -> None:
    numbers = json.loads((report.parent / "summary.json").read_text(encoding="utf-8"))
    assert numbers["baseline"] == "base" and numbers["configs"] == ["base", "all"]
    group = next(g for g in numbers["groups"] if (g["config"], g["dataset"]) == ("all", "medqa"))
    assert group["accuracy"]["k"] == 3 and group["accuracy"]["mean"] == pytest.approx(0.8333, abs=1e-4)
    assert group["metrics"]["teamwork"]["decisiveness"]["Nephrologist"]["score"] == 1.0
    comparisons = {c["dataset"]: c for c in numbers["significance"]}
    assert comparisons["medqa"]["b"] == 3 and comparisons["medqa"]["c"] == 0 and comparisons["medqa"]["repeats"] == 20
    assert comparisons["medqa"]["ci_low"] <= comparisons["medqa"]["diff"] <= comparisons["medqa"]["ci_high"]
    assert sorted(numbers["figures"]) == sorted(FIGURES)


def test_single_seed_and_non_teamwork_systems(tmp_path: Path) -> None:
    runs = [
        _write_run(tmp_path / "runs", "medqa", "zero_shot", 0, 4, system="zero_shot"),
        _write_run(tmp_path / "runs", "medqa", "base", 0, 6),
    ]
    report = build_report(runs, tmp_path / "out", baseline="zero_shot")
    text = report.read_text(encoding="utf-8")
    # a lone seed has the binomial SE of its questions (a cell is never shown as exact)
    assert _table_row(text, "zero_shot") == f"| zero_shot | 40.0 ± {100 * binomial_se(4, 10):.1f} |"
    assert _table_row(text, "base") == f"| base | **60.0 ± {100 * binomial_se(6, 10):.1f}** |"
    assert "| base | medqa | +20.0 | 2 | 0 | 0.5000 |" in text
    teamwork = text.split("## Teamwork and calibration")[1].split("##")[0]
    assert "| base | medqa | 100.0 |" in teamwork
    assert "| zero_shot | medqa | – | – |" in teamwork  # calibration only: no deliberation to measure
    assert (report.parent / "ablation.png").read_bytes().startswith(PNG_MAGIC)


def test_without_baseline_there_is_no_significance_table(ablation_runs: list[Path], tmp_path: Path) -> None:
    text = build_report(ablation_runs[:3], tmp_path / "out").read_text(encoding="utf-8")
    assert "No baseline given" in text and "McNemar p" not in text


def test_unknown_baseline_names_the_choices(ablation_runs: list[Path], tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"'bsae'.*Did you mean 'base'\?.*Available: base, all"):
        build_report(ablation_runs, tmp_path / "out", baseline="bsae")


def test_load_run_errors_name_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="has no results.jsonl"):
        load_run(tmp_path)
    tmp_path.joinpath("results.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(DataError, match="has no result rows"):
        load_run(tmp_path)
    tmp_path.joinpath("results.jsonl").write_text('{"id": "q1"}\n\nnot json\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"results.jsonl:3 is not valid JSON"):
        load_run(tmp_path)


def test_load_run_without_summary_reads_identity_from_rows(tmp_path: Path) -> None:
    row = {"id": "q1", "dataset": "medqa", "seed": 3, "system": "cot", "label": None, "correct": True}
    tmp_path.joinpath("results.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    run = load_run(tmp_path)
    assert (run.dataset, run.config, run.system, run.seed) == ("medqa", "cot", "cot", 3)


def test_the_trust_plot_shows_only_systems_with_a_trust_network(ablation_runs, tmp_path, monkeypatch) -> None:
    from teammed.evals import _plots

    drawn = {}
    original = _plots.trust_over_deliberation

    def spy(series, path):
        drawn.update(series)
        return original(series, path)

    monkeypatch.setattr(_plots, "trust_over_deliberation", spy)
    build_report(ablation_runs, tmp_path / "r", baseline="base")
    assert set(drawn) == {"all"}  # base records neutral scores but runs no trust component


def test_table_one_cell_by_cell_and_its_exports(report: Path) -> None:
    import csv

    text = report.read_text(encoding="utf-8")
    cells = text.split("## Table 1, cell by cell")[1].split("##")[0]
    line = next(row for row in cells.splitlines() if row.startswith("| all | medqa |"))
    # 3 seeds (8, 8, 9 of the same 10 questions) are 10 distinct questions, 8 + 1/3 right (question 8 right
    # at one seed of three): the Wilson 95% interval on 10 questions, not on 30 answers ([66.4, 92.7])
    low, high = wilson_interval(25 / 3, 10)
    assert line == f"| all | medqa | scripted | 3 | 10 | 83.3 ± 12.1 | [{100 * low:.1f}, {100 * high:.1f}] |"
    rows = list(csv.DictReader((report.parent / "table1.csv").read_text().splitlines()))
    row = next(r for r in rows if (r["config"], r["dataset"]) == ("all", "medqa"))
    assert (row["n_questions"], row["mean"], row["ci95_low"]) == ("10", "83.33", f"{100 * low:.2f}")
    latex = (report.parent / "table1.tex").read_text()
    assert "\\begin{tabular}{lcc}" in latex and "\\textbf{83.3 $\\pm$ 12.1} {\\scriptsize ($n$=10)}" in latex
    assert latex.rstrip().endswith("\\end{tabular}")


def test_latex_escapes_what_names_may_hold() -> None:
    from teammed.evals._tables import latex_escape

    assert latex_escape("smm+trust_v2 & 50% #1") == "smm+trust\\_v2 \\& 50\\% \\#1"


def test_the_viewer_marks_questions_with_unparsed_or_repaired_outputs(report: Path) -> None:
    page = (report.parent / "transcripts.html").read_text(encoding="utf-8")
    assert page.count('class="badge b-repair"') >= 1 and "1 unparsed" in page  # question 0 had a parse failure
