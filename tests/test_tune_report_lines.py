"""Tune's report reads right (issue 48, item 5): no racing table without rows, and a runner-up that was measured
on enough questions, said with how many."""

from __future__ import annotations

import json
from typing import Any

from teammed.optimizers.report import noise_text
from teammed.optimizers.tune import _racing_lines, _runner_up


def test_a_race_that_dropped_nothing_prints_no_empty_table() -> None:
    lines = _racing_lines({"winner": "all", "races": [{"entrants": ["a", "b"], "rounds": 3, "winner": "all",
                                                        "survivors": ["a", "b"]}], "history": []})
    assert not any(line.startswith("| race |") for line in lines)
    assert "No configuration was dropped: every race ran to its end." in lines


class _Queue:
    def __init__(self, results: dict[str, dict[str, Any]]) -> None:
        self._results = results

    def results(self) -> dict[str, dict[str, Any]]:
        return self._results


def _cell(components: dict[str, bool], ids: list[str], correct: list[bool]) -> tuple[str, dict[str, Any]]:
    key = json.dumps({"kind": "eval", "part": "tune", "config": components, "prompts": "p"}, sort_keys=True)
    return key, {"ids": ids, "correct": correct}


def test_the_runner_up_was_measured_on_enough_questions_and_says_on_how_many() -> None:
    ids = [f"q{i}" for i in range(20)]
    results = dict([_cell({"leadership": True}, ids, [i < 6 for i in range(20)]),  # the winner: 30%
                    _cell({"trust": True}, ids[:4], [True, True, True, False]),  # 75% on 4: dropped early
                    _cell({"shared_mental_model": True}, ids, [i < 5 for i in range(20)])])  # 25% on all 20
    versus = _runner_up(_Queue(results), "leadership")  # type: ignore[arg-type]
    assert versus is not None and versus["runner_up"] == "shared_mental_model" and versus["runner_up_n"] == 20
    assert "shared_mental_model (25.0% on 20 questions)" in noise_text(versus)
