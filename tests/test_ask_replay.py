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


def test_every_option_with_a_default_names_it_in_its_help() -> None:
    """Issue 36, item 3: `--help` shows every default a user would otherwise have to guess, and the value it
    names is the parser's (a help text that drifts from the code fails here)."""
    import argparse

    from teammed.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    missing, wrong = [], []
    for name, command in commands.items():
        for action in command._actions:
            if (not action.option_strings or isinstance(action, argparse._HelpAction | argparse._StoreTrueAction)
                    or action.default in (None, False, argparse.SUPPRESS)):
                continue
            text = action.help or ""
            if "default" not in text.lower():
                missing.append(f"{name} {action.option_strings[-1]} (default {action.default!r})")
                continue
            shown = f"{action.default:g}" if isinstance(action.default, float) else str(action.default)
            if "%(default)" not in text and not isinstance(action.default, list | tuple | bool) and shown not in text:
                wrong.append(f"{name} {action.option_strings[-1]}: help says {text!r}, default is {action.default!r}")
    assert not missing, "options whose --help hides their default:\n" + "\n".join(missing)
    assert not wrong, "\n".join(wrong)
