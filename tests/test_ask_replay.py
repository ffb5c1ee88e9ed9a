"""Issue 36, item 2: ``teammed ask --dataset NAME --id ID`` replays one question of a data set, and shows
its gold answer after the team's."""

from __future__ import annotations

import json

import pytest

from teammed.cli import main

from .helpers import write_medagentsbench


@pytest.fixture
def folder(tmp_path):
    return write_medagentsbench(tmp_path / "data")


def _first_id(folder, name: str = "medqa") -> tuple[str, dict]:
    row = json.loads((folder / name / "test.jsonl").read_text().splitlines()[3])
    return str(row["realidx"]), row


def test_ask_replays_a_question_of_a_medagentsbench_folder_and_shows_its_gold(folder, capsys) -> None:
    realidx, row = _first_id(folder)
    assert main(["ask", "--dataset", "medqa", "--data-dir", str(folder), "--id", realidx,
                 "--model", "scripted"]) == 0
    out = capsys.readouterr().out
    assert row["question"][:40] in out  # the replayed stem is the one deliberated over
    gold = row["answer_idx"]
    assert f"Gold: {gold}) {row['options'][gold]}" in out and ("the team is right" in out or "wrong" in out)
    assert out.index("Answer:") < out.index("Gold:")  # the gold comes after the team's answer


def test_ask_names_the_nearest_ids_of_an_unknown_one(folder, capsys) -> None:
    realidx, _ = _first_id(folder)
    assert main(["ask", "--dataset", "medqa", "--data-dir", str(folder), "--id", realidx + "9",
                 "--model", "scripted"]) != 0
    err = capsys.readouterr().err
    assert "no question with id" in err and "Nearest ids" in err


@pytest.mark.parametrize("argv,said", [
    (["ask", "--dataset", "demo", "--model", "scripted"], "needs --id"),
    (["ask", "Which?", "--dataset", "demo", "--id", "demo-01", "--model", "scripted"], "not both"),
    (["ask", "Which?", "--id", "demo-01", "--option", "A=x", "--option", "B=y", "--model", "scripted"],
     "give --dataset too"),
    (["ask", "--model", "scripted"], "question is empty"),
])
def test_careless_ask_flags_are_refused_naming_the_fix(argv, said, capsys) -> None:
    assert main(argv) != 0
    assert said in capsys.readouterr().err


def test_ask_replays_with_a_peer_system_too(capsys) -> None:
    assert main(["ask", "--dataset", "demo", "--id", "demo-01", "--system", "cot", "--model", "scripted"]) == 0
    assert "Gold: " in capsys.readouterr().out
