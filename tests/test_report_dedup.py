"""Issue 23.4 and 23.3 (report): a run passed twice counts once, and failed questions are shown
beside every accuracy the report gives (they count as wrong, so "0.0" alone hides a dead server)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import dspy
import pytest

from teammed.backends.resolve import Deployment
from teammed.backends.scripted import ScriptedLM
from teammed.cli import main
from teammed.errors import NoAnswerError
from teammed.records import RunIdentity
from teammed.runner import RunFailed, RunSettings, run_questions
from teammed.types import Question

SCRIPTED = ["--model", "scripted", "--n-agents", "2"]
N = 20


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 20-question scripted run, in ``<root>/runs/d``."""
    run = tmp_path_factory.mktemp("dedup") / "runs" / "d"
    assert main(["run", "--dataset", "demo", "--split", "all", "--n", str(N), *SCRIPTED, "--out", str(run)]) == 0
    assert len((run / "results.jsonl").read_text().splitlines()) == N
    return run


def _report(tmp_path: Path, *dirs: Path) -> tuple[dict, str]:
    out = tmp_path / "report"
    assert main(["report", *map(str, dirs), "--out", str(out)]) == 0
    return json.loads((out / "summary.json").read_text()), (out / "report.md").read_text()


def _counted_once(summary: dict, markdown: str) -> None:
    assert len(summary["runs"]) == 1
    (group,) = summary["groups"]
    assert group["metrics"]["n"] == N and len(group["seeds"]) == 1
    assert "1 run:" in markdown


@pytest.mark.parametrize("how", ["same dir twice", "parent and child", "symlink", "copy"])
def test_a_run_passed_twice_counts_once(scripted_run: Path, tmp_path: Path, how: str) -> None:
    if how == "same dir twice":
        dirs = [scripted_run, scripted_run]
    elif how == "parent and child":
        dirs = [scripted_run.parent, scripted_run]
    elif how == "symlink":
        link = tmp_path / "link"
        link.symlink_to(scripted_run, target_is_directory=True)
        dirs = [scripted_run, link]
    else:  # a copy of the run directory: the same identity and the same answers
        copy = tmp_path / "copy"
        shutil.copytree(scripted_run, copy)
        dirs = [scripted_run, copy]
    _counted_once(*_report(tmp_path, *dirs))


def test_two_seeds_still_count_as_two(scripted_run: Path, tmp_path: Path) -> None:
    other = tmp_path / "seed222"
    assert main(["run", "--dataset", "demo", "--split", "all", "--n", str(N), "--seed", "222", *SCRIPTED,
                 "--out", str(other)]) == 0
    summary, markdown = _report(tmp_path, scripted_run, other, scripted_run.parent)
    assert len(summary["runs"]) == 2 and "2 runs:" in markdown
    assert summary["groups"][0]["metrics"]["n"] == 2 * N


# ---------------------------------------------------------------- failed counts beside every accuracy
class _Failing(dspy.Module):
    """Answers A, or names no option for the questions in ``failing``."""

    def __init__(self, failing: set[str]):
        super().__init__()
        self.failing = failing

    def forward(self, question: str, options: dict, context: str | None = None) -> dspy.Prediction:
        if question in self.failing:
            raise NoAnswerError(f"no option named for {question!r}")
        return dspy.Prediction(answer="A", rationale="r", confidence="High", record={}, transcript=[])


def _failing_run(out: Path, dataset: str, failing: set[int], *, n: int = 10, label: str = "base") -> Path:
    questions = [Question(id=f"q{i}", question=f"Question {i}?", options={"A": "a", "B": "b"},
                          answer_idx="AB"[i % 2]) for i in range(n)]
    identity = RunIdentity(system="teamwork", label=label, model="scripted", dataset=dataset,
                           dataset_sha256=dataset[0] * 64, split="test", question_ids=[q.id for q in questions])
    program = _Failing({f"Question {i}?" for i in failing})
    settings = RunSettings(out_dir=out, identity=identity, max_consecutive_failures=0)
    try:
        run_questions(questions, program_factory=lambda: program, deployments=[Deployment("scripted", ScriptedLM(), 1)],
                      settings=settings)
    except RunFailed:  # every question failed: the rows and the summary are written first
        pass
    return out


def _table_one(markdown: str) -> dict[str, str]:
    table = markdown.split("## Table 1")[1].split("\n## ")[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| Config")]
    return {cells[0]: " | ".join(cells[1:]) for cells in ([c.strip() for c in r.strip("|").split("|")] for r in rows)}


def test_report_shows_failed_counts_beside_every_accuracy(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _failing_run(runs / "base-a", "alpha", {1, 4, 7})
    _failing_run(runs / "base-b", "beta", set())
    _failing_run(runs / "dead-a", "alpha", set(range(10)), label="dead")  # a dead server: every question failed
    _failing_run(runs / "dead-b", "beta", {0}, label="dead")
    summary, markdown = _report(tmp_path, runs)
    table = _table_one(markdown)
    base_alpha, base_beta, base_average = table["base"].split(" | ")
    assert "(3/10 failed)" in base_alpha and "failed" not in base_beta
    assert "(3/20 failed)" in base_average  # the average over data sets says what failed in them
    dead_alpha, dead_beta, dead_average = table["dead"].split(" | ")
    assert dead_alpha.startswith("0.0") and "(10/10 failed)" in dead_alpha
    assert "(1/10 failed)" in dead_beta and "(11/20 failed)" in dead_average
    failed = {(g["config"], g["dataset"]): g["metrics"]["n_failed"] for g in summary["groups"]}
    assert failed == {("base", "alpha"): 3, ("base", "beta"): 0, ("dead", "alpha"): 10, ("dead", "beta"): 1}
    headers = re.findall(r"\d+ of \d+ correct, \d+ failed", (tmp_path / "report" / "transcripts.html").read_text())
    assert sorted(h.split(", ")[1] for h in headers) == ["0 failed", "1 failed", "10 failed", "3 failed"]


def test_a_cell_without_labels_still_shows_its_failures(tmp_path: Path) -> None:
    out = _failing_run(tmp_path / "runs" / "base", "alpha", {0, 1}, n=4)
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    (out / "results.jsonl").write_text("".join(json.dumps({**r, "gold": None, "correct": None, "labeled": False}) + "\n"
                                               for r in rows))
    _, markdown = _report(tmp_path, out)
    assert "(2/4 failed)" in _table_one(markdown)["base"]
