"""A run keeps no finished question's row: its summary and metrics are computed as rows stream by
(issue 23: memory flat at 5,000 questions). Each test here failed when the runner kept every row."""

from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path
from typing import Any

from teammed import records
from teammed.backends.resolve import Deployment
from teammed.backends.scripted import ScriptedLM
from teammed.evals import Summarizer, summarize
from teammed.records import ResultRow
from teammed.runner import RowDigest, RunSettings, read_results, run_questions

from .helpers import transcripts_pages
from .test_run_trust import _identity, _Program, _questions

N = 60


def _alive_rows() -> int:
    gc.collect()
    return sum(isinstance(obj, ResultRow) for obj in gc.get_objects())


def test_a_run_holds_no_row_of_a_finished_question(tmp_path: Path) -> None:
    questions = _questions(N)
    alive: list[int] = []

    def progress(state: dict[str, Any]) -> None:
        if state["done"] in (N // 2, N):
            alive.append(_alive_rows())

    before = _alive_rows()
    summary = run_questions(questions, program_factory=lambda: _Program(), metrics=Summarizer, progress=progress,
                            deployments=[Deployment("scripted", ScriptedLM(), 1)],
                            settings=RunSettings(out_dir=tmp_path / "run", identity=_identity(questions)))
    # one question in flight: at most the row being handed over is alive, never the finished ones
    assert alive and max(alive) - before <= 2, alive
    rows = read_results(tmp_path / "run" / "results.jsonl")
    assert summary["n"] == N and summary["metrics"] == summarize(rows)


def test_a_resumed_run_summarizes_old_and_new_rows_alike(tmp_path: Path) -> None:
    questions = _questions(N)

    def run(subset: list, **extra: Any) -> dict[str, Any]:
        return run_questions(subset, program_factory=lambda: _Program(answer="B"), metrics=Summarizer,
                             deployments=[Deployment("scripted", ScriptedLM(), 1)],
                             settings=RunSettings(out_dir=tmp_path / "run", identity=_identity(subset), **extra))

    results = tmp_path / "run" / "results.jsonl"
    run(questions)
    lines = results.read_text().splitlines(keepends=True)
    results.write_text("".join(lines[: N // 3]) + lines[N // 3][:25])  # killed mid-write after a third
    summary = run(questions, resume=True)
    rows = read_results(results)
    # each question once (the file is in completion order: two questions are in flight at a time)
    assert sorted(r.id for r in rows) == [q.id for q in questions]
    assert summary["n"] == N and summary["metrics"] == summarize(rows)
    assert summary["accuracy"] == round(sum(bool(r.correct) for r in rows) / N, 4)


def test_retry_failed_rewrites_the_file_without_its_failed_rows(tmp_path: Path) -> None:
    questions = _questions(12)
    settings = {"max_consecutive_failures": 0}
    flaky = _Program(fail=lambda text: RuntimeError("boom") if text.endswith(("3?", "7?")) else None)
    out = tmp_path / "run"
    try:
        run_questions(questions, program_factory=lambda: flaky, metrics=Summarizer,
                      deployments=[Deployment("scripted", ScriptedLM(), 1)],
                      settings=RunSettings(out_dir=out, identity=_identity(questions), **settings))
    except Exception:  # noqa: BLE001  (not every question failed: no error expected; tolerate none)
        raise
    assert sum(r.failed for r in read_results(out / "results.jsonl")) == 2
    summary = run_questions(questions, program_factory=lambda: _Program(), metrics=Summarizer,
                            deployments=[Deployment("scripted", ScriptedLM(), 1)],
                            settings=RunSettings(out_dir=out, identity=_identity(questions), resume=True,
                                                 retry_failed=True, **settings))
    rows = read_results(out / "results.jsonl")
    assert summary["retried_failed"] == 2 and summary["n_failed"] == 0 and len(rows) == 12
    assert not any(r.failed for r in rows) and len({r.id for r in rows}) == 12
    assert json.loads((out / "summary.json").read_text())["metrics"] == summarize(rows)


def test_a_digest_reads_what_the_summary_reads() -> None:
    row = ResultRow(id="q", gold="A", prediction="B", correct=False, calls=3, prompt_tokens=10, latency_s=1.5,
                    spent_cost_usd=0.25, question="long " * 1000, transcript=[{"phase": "x"}] * 50)
    digest = RowDigest.of(row)
    assert (digest.id, digest.prediction, digest.calls, digest.spent_cost_usd) == ("q", "B", 3, 0.25)
    assert not hasattr(digest, "question") and not hasattr(digest, "transcript")


def test_a_report_reads_full_rows_one_page_of_one_run_at_a_time(tmp_path: Path, monkeypatch) -> None:
    import teammed.evals._html as html
    import teammed.evals.report as report
    from teammed.evals import build_report

    questions = _questions(N)
    for seed, answer in ((1, "A"), (2, "B")):
        identity = _identity(questions, seed=seed)
        run_questions(questions, program_factory=lambda a=answer: _Program(answer=a), metrics=Summarizer,
                      deployments=[Deployment("scripted", ScriptedLM(), 1)],
                      settings=RunSettings(out_dir=tmp_path / f"run{seed}", identity=identity))
    page = 7
    monkeypatch.setattr(report, "PAGE_QUESTIONS", page)
    read = [0]  # rows the report has read from disk and not yet let go of
    load_row = records.load_row

    def tracked(*args: Any, **kwargs: Any) -> ResultRow:
        row = load_row(*args, **kwargs)
        read[0] += 1
        weakref.finalize(row, lambda: read.__setitem__(0, read[0] - 1))
        return row

    alive: list[int] = []
    render = html._question

    def counting(row: ResultRow, **kwargs: Any) -> str:
        alive.append(read[0])
        return render(row, **kwargs)

    monkeypatch.setattr(records, "load_row", tracked)
    monkeypatch.setattr(html, "_question", counting)
    build_report([tmp_path / "run1", tmp_path / "run2"], tmp_path / "report")
    assert len(alive) == 2 * N and max(alive) <= page + 1, max(alive)  # one run's page, never the runs'
    monkeypatch.setattr(records, "load_row", load_row)
    # the pages written from disk are the pages of the same rows held in memory
    monkeypatch.setattr(html, "_question", render)
    rows = [read_results(tmp_path / f"run{seed}" / "results.jsonl") for seed in (1, 2)]
    titles = [f"fake · t · seed {seed}" for seed in (1, 2)]
    expected = transcripts_pages(list(zip(titles, rows, strict=True)), page_size=page)
    written = [(tmp_path / "report" / html.page_name(k)).read_text() for k in range(1, len(expected) + 1)]
    assert len(expected) == -(-N // page) and written == expected
