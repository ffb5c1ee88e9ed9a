"""Issue 23.4 and 23.3 (report): a run passed twice counts once, and failed questions are shown
beside every accuracy the report gives (they count as wrong, so "0.0" alone hides a dead server).

Issue 32.10: a run directory and its backup copy (one identity, questions in common, different
answers after ``--retry-failed``) count as one run, from the more complete directory; a
``results.jsonl`` holding a question twice counts it once, from its last row; both warn."""

from __future__ import annotations

import json
import logging
import os
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


def _failing_run(out: Path, dataset: str, failing: set[int], *, n: int = 10, label: str = "base",
                 retry_failed: bool = False) -> Path:
    questions = [Question(id=f"q{i}", question=f"Question {i}?", options={"A": "a", "B": "b"},
                          answer_idx="AB"[i % 2]) for i in range(n)]
    identity = RunIdentity(system="teamwork", label=label, model="scripted", dataset=dataset,
                           dataset_sha256=dataset[0] * 64, split="test", question_ids=[q.id for q in questions])
    program = _Failing({f"Question {i}?" for i in failing})
    settings = RunSettings(out_dir=out, identity=identity, max_consecutive_failures=0, retry_failed=retry_failed)
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


# ---------------------------------------------------------------- one run, two directories (issue 32.10)
RUNS_LOGGER = "teammed.evals._runs"


def _lines(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


def _write_lines(run: Path, rows: list[dict]) -> None:
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _flip(row: dict) -> dict:
    """The row answered the other way (options A and B)."""
    prediction = "B" if row["prediction"] == "A" else "A"
    return {**row, "prediction": prediction, "correct": prediction == row["gold"]}


def _dedup_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == RUNS_LOGGER and r.levelno == logging.WARNING]


def _seed_of(run: Path) -> object:
    return json.loads((run / "run.json").read_text())["identity"]["seed"]


def _group(summary: dict) -> dict:
    (group,) = summary["groups"]
    return group


@pytest.fixture
def retried_and_backup(tmp_path: Path) -> tuple[Path, Path]:
    """A 10-question run with 3 failed questions, copied aside, then continued with --retry-failed."""
    run = _failing_run(tmp_path / "runs" / "d", "alpha", {1, 4, 7})
    backup = tmp_path / "runs" / "d.bak"
    shutil.copytree(run, backup)
    _failing_run(run, "alpha", set(), retry_failed=True)  # the three are answered (A) this time
    assert sum(r["failed"] for r in _lines(backup)) == 3 and sum(r["failed"] for r in _lines(run)) == 0
    return run, backup


@pytest.mark.parametrize("backup_first", [False, True])
def test_a_run_and_its_backup_count_once_from_the_retried_directory(
    retried_and_backup: tuple[Path, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture, backup_first: bool
) -> None:
    run, backup = retried_and_backup
    dirs = [backup, run] if backup_first else [run, backup]
    with caplog.at_level(logging.WARNING, logger=RUNS_LOGGER):
        summary, markdown = _report(tmp_path, *dirs)
    assert summary["runs"] == [str(run)] and "1 run:" in markdown
    group = _group(summary)
    assert group["metrics"]["n"] == 10 and group["questions"]["n"] == 10
    assert group["metrics"]["n_failed"] == 0
    assert group["accuracy"]["mean"] == pytest.approx(0.5)  # A on every question, gold alternates A, B
    assert group["accuracy"]["k"] == 1 and group["seeds"] == [_seed_of(run)]
    (warning,) = _dedup_warnings(caplog)
    assert str(run) in warning and str(backup) in warning
    assert f"from {run}: fewer of its questions failed" in warning


def test_the_directory_with_more_questions_is_kept(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run = _failing_run(tmp_path / "runs" / "d", "alpha", {1, 4, 7})
    early = tmp_path / "runs" / "early"  # a copy taken mid-run that has since answered q0 otherwise
    shutil.copytree(run, early)
    rows = {r["id"]: r for r in _lines(run)}
    _write_lines(early, [_flip(rows["q0"]), rows["q2"], rows["q3"]])  # 3 questions, none failed
    for dirs in ([early, run], [run, early]):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=RUNS_LOGGER):
            summary, _ = _report(tmp_path, *dirs)
        assert summary["runs"] == [str(run)]
        assert _group(summary)["metrics"]["n"] == 10 and _group(summary)["metrics"]["n_failed"] == 3
        (warning,) = _dedup_warnings(caplog)
        assert str(early) in warning and f"from {run}: it has more questions" in warning


def test_between_equally_complete_directories_the_newer_is_kept(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    run = _failing_run(tmp_path / "runs" / "d", "alpha", set())
    other = tmp_path / "runs" / "other"
    shutil.copytree(run, other)
    _write_lines(other, [_flip(r) if r["id"] == "q0" else r for r in _lines(other)])  # q0 answered B: 4/10
    for newer, older in ((other, run), (run, other)):
        os.utime(older / "results.jsonl", (1_600_000_000, 1_600_000_000))
        os.utime(newer / "results.jsonl", (1_700_000_000, 1_700_000_000))
        for dirs in ([run, other], [other, run]):
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger=RUNS_LOGGER):
                summary, _ = _report(tmp_path, *dirs)
            assert summary["runs"] == [str(newer)]
            expected = 0.4 if newer == other else 0.5
            assert _group(summary)["metrics"]["n"] == 10
            assert _group(summary)["accuracy"]["mean"] == pytest.approx(expected)
            (warning,) = _dedup_warnings(caplog)
            assert f"from {newer}: its results.jsonl is newer" in warning and str(older) in warning


def test_one_identity_without_questions_in_common_is_two_parts(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    first = _failing_run(tmp_path / "runs" / "first", "alpha", set())
    second = tmp_path / "runs" / "second"
    shutil.copytree(first, second)
    rows = _lines(first)
    _write_lines(first, rows[:5])
    _write_lines(second, rows[5:])
    with caplog.at_level(logging.WARNING, logger=RUNS_LOGGER):
        summary, _ = _report(tmp_path, first, second)
    assert sorted(summary["runs"]) == sorted([str(first), str(second)])
    assert _group(summary)["metrics"]["n"] == 10
    assert not [w for w in _dedup_warnings(caplog) if "hold the same run" in w]


def test_a_results_file_holding_each_question_twice_counts_each_once_from_its_last_row(
    scripted_run: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = tmp_path / "twice"
    shutil.copytree(scripted_run, run)
    rows = _lines(run)
    assert sum(r["correct"] for r in rows) < N  # the later copies below change the accuracy
    later = [{**r, "prediction": r["gold"], "correct": True} for r in rows]  # written last: every answer right
    _write_lines(run, rows + later)
    with caplog.at_level(logging.WARNING, logger=RUNS_LOGGER):
        summary, _ = _report(tmp_path, run)
    group = _group(summary)
    assert group["metrics"]["n"] == N and group["questions"]["n"] == N
    assert group["questions"]["correct"] == N and group["accuracy"]["mean"] == pytest.approx(1.0)
    (warning,) = _dedup_warnings(caplog)
    assert str(run / "results.jsonl") in warning and f"{N} questions more than once" in warning
    assert all(r["id"] in warning for r in rows[:5]) and ", ..." in warning
    headers = re.findall(r"(\d+) of (\d+) correct", (tmp_path / "report" / "transcripts.html").read_text())
    assert headers == [(str(N), str(N))]  # the transcripts show each question once, its last row


def test_a_question_written_twice_names_only_the_repeated_ids(scripted_run: Path, tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    run = tmp_path / "once_more"
    shutil.copytree(scripted_run, run)
    rows = _lines(run)
    _write_lines(run, [*rows, {**rows[3], "prediction": rows[3]["gold"], "correct": True}])
    with caplog.at_level(logging.WARNING, logger=RUNS_LOGGER):
        summary, _ = _report(tmp_path, run)
    correct = sum(r["correct"] for r in rows) + (not rows[3]["correct"])
    assert _group(summary)["metrics"]["n"] == N and _group(summary)["questions"]["correct"] == correct
    (warning,) = _dedup_warnings(caplog)
    assert f"1 questions more than once ({rows[3]['id']})" in warning


def test_a_clean_run_warns_of_no_repeat(scripted_run: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=RUNS_LOGGER):
        summary, _ = _report(tmp_path, scripted_run)
    assert _group(summary)["metrics"]["n"] == N and not _dedup_warnings(caplog)
