"""Figures that never depend on the order rows arrive in: a streamed run sees its rows in completion
order, a report in file order (the hostile review of the streaming change found a tie that did)."""

from __future__ import annotations

import itertools

from teammed import answer_stats
from teammed.records import ResultRow


def _rows(pairs: list[tuple[str, str]]) -> list[ResultRow]:
    return [ResultRow(id=f"q{i}", gold=gold, prediction=pred, correct=gold == pred)
            for i, (gold, pred) in enumerate(pairs)]


def test_a_tied_majority_letter_and_answer_spread_do_not_depend_on_row_order() -> None:
    rows = _rows([("B", "C"), ("A", "A"), ("B", "A"), ("A", "C")])  # golds A/B tie, predictions A/C tie
    seen = {(answer_stats.majority_baseline(order).letter, answer_stats.answer_spread(order).top)
            for order in itertools.permutations(rows)}
    assert seen == {("A", "A")}  # the earliest letter, whatever came first


def test_binary_metrics_group_by_any_row_field_or_extra() -> None:
    from teammed.evals.metrics import binary_metrics

    rows = [ResultRow(id=f"q{i}", gold="A", prediction="A" if i % 3 else "B", correct=bool(i % 3),
                      binary_positive="A", label=f"L{i % 2}", split=f"s{i % 2}", deployment=f"d{i % 2}",
                      problem=["p", i % 2])  # type: ignore[call-arg]  (a kept extra, not a scalar)
            for i in range(6)]
    for by in ("label", "split", "deployment", "problem", "dataset"):
        groups = binary_metrics(rows, by=by)["by_group"]  # type: ignore[index]
        assert len(groups) == (1 if by == "dataset" else 2), (by, sorted(groups))
        assert sum(g["n"] for g in groups.values()) == 6


def _split_run(tmp_path):  # type: ignore[no-untyped-def]
    import json

    out = tmp_path / "split"
    out.mkdir()
    lines = []
    for i in range(6):
        model = "m1" if i % 2 else "m2"
        lines.append({"id": f"q{i}", "gold": "A", "prediction": "A", "correct": True, "system": "cot",
                      "answered_by": [{"model": model, "api_base": None, "calls": 1}], "question": f"stem {i}"})
    lines.append({**lines[0], "answered_by": [{"model": "m1", "api_base": None, "calls": 1}],
                  "question": "stem 0 again"})  # q0 written twice, by the other model
    (out / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in lines))
    return out


def test_each_part_of_a_run_split_by_model_shows_only_its_own_rows(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import re

    from teammed.evals import build_report

    build_report([_split_run(tmp_path)], tmp_path / "report")
    page = (tmp_path / "report" / "transcripts.html").read_text()
    anchors = re.findall(r'<article class="q" id="([^"]+)"', page)
    # q0 was written twice, last by m1: a question counts once, from its last row (issue 32, item 10), so
    # m1's part shows q0, q1, q3, q5 and m2's q2, q4: each question once, in the part of the model that answered it
    assert len(anchors) == len(set(anchors)) == 6, anchors
    assert sorted(a.split("-")[1] for a in anchors) == ["q0", "q1", "q2", "q3", "q4", "q5"]


def test_a_torn_tail_is_reported_once_per_report(tmp_path, caplog) -> None:  # type: ignore[no-untyped-def]
    import logging

    from teammed.evals import build_report

    run = _split_run(tmp_path)
    with (run / "results.jsonl").open("a") as handle:
        handle.write('{"id": "q9", "gol')
    with caplog.at_level(logging.WARNING):
        build_report([run], tmp_path / "report")
    assert sum("torn last line" in r.getMessage() for r in caplog.records) == 1


def test_resume_keeps_a_complete_last_row_that_lacks_its_newline(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from teammed.backends.resolve import Deployment
    from teammed.backends.scripted import ScriptedLM
    from teammed.runner import RunSettings, read_results, run_questions

    from .test_run_trust import _identity, _Program, _questions

    questions = _questions(6)
    program = _Program()

    def run(**extra) -> dict:  # type: ignore[no-untyped-def]
        return run_questions(questions, program_factory=lambda: program,
                             deployments=[Deployment("scripted", ScriptedLM(), 1)],
                             settings=RunSettings(out_dir=tmp_path / "run", identity=_identity(questions), **extra))

    results = tmp_path / "run" / "results.jsonl"
    run()
    results.write_bytes(results.read_bytes().rstrip(b"\n"))  # another tool wrote the last row without "\n"
    asked = len(program.seen)
    summary = run(resume=True)
    assert len(program.seen) == asked  # nothing answered again: the last row was complete
    assert summary["n"] == 6 and len(read_results(results)) == 6 and results.read_bytes().endswith(b"}\n")
