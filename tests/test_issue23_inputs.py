"""Issue 23.7: every budget and input either binds or is refused, up front and naming the fix.

``--budget usd=nan`` and ``calls=10,calls=20`` used to be accepted (NaN in tune_report.json, the
last duplicate kept); ``usd=X`` never bound on a model without a price; ``--split bogus`` on a file
ran the whole file; a question with no text was scored.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teammed.cli import main
from teammed.data import load_dataset
from teammed.errors import ConfigError, DataError
from teammed.experiments import BackendSpec
from teammed.experiments.tune import check_usd_budget
from teammed.optimizers.tune_queue import parse_budget

QUESTION = {"options": {"A": "yes", "B": "no"}, "answer_idx": "A"}


def _exit_code(argv: list[str]) -> int:
    """``main(argv)``'s exit status, whether it returns it or argparse exits with it (a bad flag value)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def _tune(tmp_path: Path, *flags: str) -> int:
    return _exit_code(["tune", "--dataset", "demo", "--n-eval", "2", "--out", str(tmp_path / "tuned"), *flags])


# ---------------------------------------------------------------- budgets
@pytest.mark.parametrize("budget", ["usd=nan", "usd=NaN", "usd=inf", "tokens=-inf", "calls=nan"])
def test_a_budget_that_is_not_a_finite_number_is_refused(tmp_path, capsys, budget):
    assert _tune(tmp_path, "--model", "scripted", "--budget", budget) == 2
    err = capsys.readouterr().err
    assert "finite" in err and budget in err
    assert not (tmp_path / "tuned").exists()  # refused before anything is created
    with pytest.raises(ConfigError, match="finite"):
        parse_budget(budget)


@pytest.mark.parametrize("budget", ["calls=10,calls=20", "usd=1, tokens=5,usd=2"])
def test_a_budget_naming_a_limit_twice_is_refused(tmp_path, capsys, budget):
    assert _tune(tmp_path, "--model", "scripted", "--budget", budget) == 2
    assert "twice" in capsys.readouterr().err
    assert not (tmp_path / "tuned").exists()
    with pytest.raises(ConfigError, match="twice"):
        parse_budget(budget)


def test_distinct_limits_still_combine():
    budget = parse_budget("calls=10, tokens=2e6")
    assert (budget.calls, budget.tokens, budget.usd) == (10, 2e6, None)


@pytest.mark.parametrize(("model", "why"), [
    (["--model", "scripted"], "teammed's own backend"),
    (["--model", "simulated"], "teammed's own backend"),
    (["--model", "local"], "teammed's own backend"),
    (["--model", "openai/qwen", "--api-base", "http://127.0.0.1:9/v1"], "self-hosted server"),
    (["--model", "openai/no-such-model-in-any-price-list"], "no price"),
])
def test_a_usd_budget_on_an_unpriced_model_is_refused_up_front(tmp_path, capsys, model, why):
    assert _tune(tmp_path, *model, "--budget", "usd=1") == 2
    err = capsys.readouterr().err
    assert "usd=1 would never bind" in err and why in err and "calls=N or tokens=N" in err
    assert not (tmp_path / "tuned").exists()  # nothing was started, no server was asked


def test_a_usd_tune_budget_of_reproduce_is_refused_on_an_unpriced_model(tmp_path, capsys):
    assert _exit_code(["reproduce", "001-table1", "--model", "scripted", "--tune-budget", "usd=2",
                 "--out", str(tmp_path / "rep")]) == 2
    assert "--tune-budget usd=2 would never bind" in capsys.readouterr().err
    assert not (tmp_path / "rep").exists()


def test_a_usd_budget_on_a_priced_model_or_a_calls_budget_is_accepted():
    priced = BackendSpec(model="openai/gpt-4o-mini")
    check_usd_budget(priced, "usd=1", flag="--budget")  # litellm prices it: the budget binds
    unpriced = BackendSpec(model="scripted")
    check_usd_budget(unpriced, "calls=100", flag="--budget")  # no usd=: nothing to refuse
    with pytest.raises(ConfigError, match="would never bind"):
        check_usd_budget(unpriced, "calls=100,usd=1", flag="--budget")


# ---------------------------------------------------------------- splits of a single file
def _file(tmp_path: Path, *questions: str, name: str = "q.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": text, **QUESTION}) + "\n"
                            for i, text in enumerate(questions)))
    return path


def test_an_unknown_split_of_a_single_file_is_refused(tmp_path, capsys):
    data = _file(tmp_path, "First?", "Second?", "Third?")
    out = tmp_path / "run"
    assert main(["run", "--dataset", str(data), "--split", "bogus", "--model", "scripted", "--system", "zero_shot",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Unknown split 'bogus'" in err and str(data) in err and "all (the whole file)" in err
    assert not out.exists()
    with pytest.raises(DataError, match="Unknown split 'bogus'"):
        load_dataset(data, split="bogus")


@pytest.mark.parametrize("split", ["test", "all", None])
def test_the_files_own_split_and_all_read_the_whole_file(tmp_path, split):
    data = _file(tmp_path, "First?", "Second?", "Third?")
    assert [q.id for q in load_dataset(data, split=split)] == ["q0", "q1", "q2"]


# ---------------------------------------------------------------- empty questions
@pytest.mark.parametrize("blank", ["", "   ", "\t\n"])
def test_an_empty_question_is_refused_at_load_naming_the_file_and_line(tmp_path, capsys, blank):
    data = _file(tmp_path, "First?", blank, "Third?")
    out = tmp_path / "run"
    assert main(["run", "--dataset", str(data), "--model", "scripted", "--system", "zero_shot",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{data}, line 2" in err and "question's text is empty" in err
    assert not out.exists()  # nothing was scored
    with pytest.raises(DataError, match=r"line 2: the question's text is empty"):
        load_dataset(data)


def test_an_empty_question_in_csv_and_json_files_is_refused_with_its_place(tmp_path):
    csv = tmp_path / "q.csv"
    csv.write_text("id,question,A,B,answer_idx\nq0,First?,yes,no,A\nq1, ,yes,no,A\n")
    with pytest.raises(DataError, match=r"q\.csv, line 3: the question's text is empty"):
        load_dataset(csv)
    array = tmp_path / "q.json"
    array.write_text(json.dumps([{"id": "q0", "question": "First?", **QUESTION},
                                 {"id": "q1", "question": "", **QUESTION}]))
    with pytest.raises(DataError, match=r"q\.json, item 1: the question's text is empty"):
        load_dataset(array)


def test_a_null_question_is_refused_like_an_empty_one(tmp_path):
    data = tmp_path / "q.jsonl"
    data.write_text(json.dumps({"id": "q0", "question": None, **QUESTION}) + "\n")
    with pytest.raises(DataError, match=r"line 1: the question's text is empty"):
        load_dataset(data)
