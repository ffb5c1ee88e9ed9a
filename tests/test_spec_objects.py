"""Specs take what a notebook holds (issue 46, item 3): a list of `Question`s for the data, a `TeamworkConfig` or a
(compiled) teamwork program for the team, a `dspy.BaseLM` for the backend, each run as the equivalent strings run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from teammed import experiments as ex
from teammed.backends import ScriptedLM
from teammed.config import TeamworkConfig
from teammed.programs.teamwork import TeamworkProgram
from teammed.types import Question

QUESTIONS = [Question(id=f"q{i}", question=f"Case {i}: a {30 + i}-year-old with chest pain. What next?",
                      options={"A": "ECG", "B": "CT", "C": "discharge"}, answer_idx="ABC"[i % 3]) for i in range(12)]


def _rows(result: ex.RunResult) -> list[tuple[str, str | None, bool | None, int]]:
    [cell] = result.cells
    lines = (Path(cell.out) / "results.jsonl").read_text().splitlines()
    return sorted((r["id"], r["prediction"], r["correct"], r["calls"]) for r in map(json.loads, lines))


def test_objects_run_as_the_equivalent_strings(tmp_path: Path) -> None:
    data = tmp_path / "questions.jsonl"
    data.write_text("".join(q.model_dump_json() + "\n" for q in QUESTIONS))
    by_name = ex.run(ex.RunSpec(data={"dataset": str(data), "dataset_name": "questions"},
                                team={"components": "leadership,smm", "n_agents": 2}, backend="scripted",
                                out=str(tmp_path / "names")))
    config = TeamworkConfig(leadership=True, shared_mental_model=True, n_agents=2)
    by_object = ex.run(ex.RunSpec(data=QUESTIONS, team=config, backend=ScriptedLM(lambda call: None),
                                  out=str(tmp_path / "objects")))
    assert _rows(by_object) == _rows(by_name) and _rows(by_object)
    assert by_object.cells[0].accuracy == by_name.cells[0].accuracy
    assert by_object.cells[0].label == by_name.cells[0].label == config.label()
    typed, named = by_object.cells[0].summary, by_name.cells[0].summary
    assert isinstance(typed, ex.RunSummary) and typed.calls == named.calls > 0 and typed["n"] == typed.n == named.n > 0
    program = ex.run(ex.RunSpec(data=QUESTIONS, team=TeamworkProgram(config), backend="scripted",
                                out=str(tmp_path / "program")))
    assert _rows(program) == _rows(by_name)


def test_objects_are_checked_like_the_flags() -> None:
    import dspy

    with pytest.raises(ValidationError, match="takes a \\(compiled\\) TeamworkProgram"):
        ex.RunSpec(data=QUESTIONS, team=dspy.Predict("question -> answer"))
    with pytest.raises(Exception, match="give only one of"):
        ex.plan(ex.RunSpec(data=QUESTIONS, team={"teamwork": TeamworkConfig(leadership=True), "preset": "all"},
                           backend="scripted"))
    spec = ex.RunSpec(data=QUESTIONS, team=TeamworkConfig(trust=True), backend=ScriptedLM(lambda call: None))
    assert "lm" not in spec.backend.model_dump() and spec.data.questions == tuple(QUESTIONS)


def test_a_callers_own_lm_is_recorded_with_its_own_settings(tmp_path: Path) -> None:
    """run.json records what the calls of a caller's `dspy.BaseLM` carry (its temperature, max_tokens and
    api base, None where it sets none), not the spec's defaults it never sends (the review found 0.0 and
    an api base of None for a `dspy.LM` that set none and one)."""
    lm = ScriptedLM(lambda call: None)
    lm.kwargs.update(temperature=0.7, max_tokens=300, api_base="http://127.0.0.1:9/v1")
    result = ex.run(ex.RunSpec(data=QUESTIONS, team="base", n=2, backend=lm, out=str(tmp_path / "own")))
    meta = json.loads((Path(result.cells[0].out) / "run.json").read_text())
    assert meta["temperature"] == 0.7 and meta["identity"]["temperature"] == 0.7
    assert meta["backends"][0]["api_base"] == "http://127.0.0.1:9/v1" and meta["backends"][0]["max_tokens"] == 300
    bare = ex.run(ex.RunSpec(data=QUESTIONS, team="base", n=2, backend=ScriptedLM(lambda call: None),
                             out=str(tmp_path / "bare")))
    assert json.loads((Path(bare.cells[0].out) / "run.json").read_text())["temperature"] is None
