"""Issue 36, item 1: ``teammed report A B --compare`` pairs two configurations question by question: the
2x2 table (both right, fixed, broken, both wrong) with McNemar, in the report and on ``compare.html``,
with each fixed and broken question's two deliberations side by side."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from teammed.backends.scripted import schema_example
from teammed.cli import main
from teammed.evals.stats import mcnemar

from .fake_openai import FakeOpenAI, completion

OPTIONS = {"A": "Myocardial infarction", "B": "Pulmonary embolism", "C": "Aortic dissection", "D": "Pericarditis"}


def letter_server(right: set[int]):
    """Every option-letter field names A (the gold) for the cases in ``right``, else B."""

    def handler(n, body):
        fmt = body.get("response_format") or {}
        schema = fmt.get("json_schema", {}).get("schema") or fmt.get("schema")
        answer = schema_example(schema)
        user = [m for m in body["messages"] if m["role"] == "user"][-1]
        case = int(re.findall(r"Case (\d+):", json.dumps(user["content"]))[0])
        letter = "A" if case in right else "B"
        for name, prop in schema["properties"].items():
            enum = prop.get("enum") or (prop.get("items") or {}).get("enum")
            if enum and set(enum) <= set(OPTIONS):
                answer[name] = ([letter, *(x for x in enum if x != letter)] if prop.get("type") == "array"
                                else letter if letter in enum else enum[0])
        return 200, {}, completion(json.dumps(answer))

    return handler


@pytest.fixture
def two_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    data = tmp_path / "cases.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Case {i}: chest pain. Diagnosis?",
                                        "options": OPTIONS, "answer_idx": "A"}) + "\n" for i in range(8)))
    runs = {}
    for preset, right in (("base", {0, 1, 2, 3}), ("leadership", {2, 3, 4, 5, 6, 7})):
        with FakeOpenAI(letter_server(right)) as server:
            out = tmp_path / preset
            assert main(["run", "--dataset", str(data), "--split", "all", "--preset", preset, "--model", "openai/x",
                         "--api-base", server.api_base, "--no-cache", "--out", str(out)]) == 0
            runs[preset] = out
    return runs


def _rows(run: Path) -> dict[str, bool]:
    return {r["id"]: bool(r["correct"]) for r in map(json.loads, (run / "results.jsonl").read_text().splitlines())}


def test_the_two_by_two_table_equals_a_count_from_the_results_files(tmp_path, two_runs, capsys) -> None:
    out = tmp_path / "report"
    assert main(["report", str(two_runs["base"]), str(two_runs["leadership"]), "--compare", "--out", str(out)]) == 0
    base, lead = _rows(two_runs["base"]), _rows(two_runs["leadership"])
    counted = {"both_right": sum(base[i] and lead[i] for i in base),
               "fixed": sum(lead[i] and not base[i] for i in base),
               "broken": sum(base[i] and not lead[i] for i in base),
               "both_wrong": sum(not base[i] and not lead[i] for i in base)}
    assert counted == {"both_right": 2, "fixed": 4, "broken": 2, "both_wrong": 0}  # as the servers planted
    summary = json.loads((out / "summary.json").read_text())["compare"]
    assert {k: summary[k] for k in counted} == counted and summary["p_mcnemar"] == pytest.approx(mcnemar(4, 2))
    text = (out / "report.md").read_text()
    assert "**fixed 4**" in text and "**broken 2**" in text and "[compare.html](compare.html)" in text
    page = (out / "compare.html").read_text()
    assert page.count('class="pair"') == 6  # each fixed and broken question, both sides
    assert "Fixed: only leadership right (4)" in page and "Broken: only base right (2)" in page
    assert "compare.html" in capsys.readouterr().out


def test_compare_needs_exactly_two_configurations(tmp_path, two_runs, capsys) -> None:
    assert main(["report", str(two_runs["base"]), "--compare", "--out", str(tmp_path / "r")]) != 0
    assert "exactly two" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_the_compare_page_renders_both_deliberations_side_by_side(tmp_path, two_runs) -> None:
    out = tmp_path / "report"
    assert main(["report", str(two_runs["base"]), str(two_runs["leadership"]), "--compare", "--out", str(out)]) == 0
    shot = tmp_path / "compare.png"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--no-first-run", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'c'}",
                    f"--screenshot={shot}", "--window-size=1400,1800", (out / "compare.html").as_uri()],
                   check=True, capture_output=True, timeout=120)
    assert shot.stat().st_size > 10_000


def test_the_report_draws_chance_and_the_majority_class_per_data_set(tmp_path, two_runs) -> None:
    """Issue 36, item 4: each data set's chance (1 / options) and majority-class accuracy, in summary.json and
    drawn on the ablation plot; the roles heatmap keeps configurations apart."""
    out = tmp_path / "report"
    assert main(["report", str(two_runs["base"]), str(two_runs["leadership"]), "--out", str(out)]) == 0
    baselines = json.loads((out / "summary.json").read_text())["baselines"]
    assert baselines == {"cases": {"chance": pytest.approx(0.25), "majority": pytest.approx(1.0)}}  # gold is always A
    assert (out / "ablation.png").stat().st_size > 5_000


def test_a_question_drawn_by_two_seeds_counts_once_in_the_test(tmp_path, monkeypatch) -> None:
    """McNemar needs independent pairs: the same question at seeds 1 and 2 is one pair, not two."""
    from teammed.evals._runs import group_runs, load_run
    from teammed.evals.compare import paired_comparison_of

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    data = tmp_path / "cases.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Case {i}: chest pain. Diagnosis?",
                                        "options": OPTIONS, "answer_idx": "A"}) + "\n" for i in range(4)))
    for preset, right in (("base", {0}), ("leadership", {0, 1, 2})):
        with FakeOpenAI(letter_server(right)) as server:  # both seeds draw all four questions
            assert main(["run", "--dataset", str(data), "--split", "all", "--preset", preset, "--seeds", "1,2",
                         "--model", "openai/x", "--api-base", server.api_base, "--no-cache",
                         "--out", str(tmp_path / "runs" / preset)]) == 0
    groups = {g.config: g for g in group_runs([load_run(p.parent) for p in (tmp_path / "runs").rglob("results.jsonl")])}
    view = paired_comparison_of(groups["base"], groups["leadership"])
    assert (view.n, len(view.fixed), len(view.broken), view.repeats) == (4, 2, 0, 4)
    assert view.p_mcnemar == mcnemar(2, 0)  # not mcnemar(4, 0), which two copies of each question would give
