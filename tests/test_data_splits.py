"""A folder given as --dataset that holds several splits is never merged (issue 22, item 5).

MedAgentsBench's ``medqa/`` holds ``test.jsonl`` and ``test_hard.jsonl`` (some ids in both):
``datasets`` reads both as its ``test`` split. teammed picks the split asked for (a file stem)
or refuses, naming the splits found and the flag that chooses. Fixtures are written in tmp_path.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from teammed.cli import main
from teammed.data import load_dataset
from teammed.errors import DataError


def _row(i: int, tag: str) -> dict[str, Any]:
    return {"id": f"q{i}", "question": f"{tag} question {i}: most likely diagnosis?",
            "options": {"A": "Myocardial infarction", "B": "Pulmonary embolism", "C": "Pericarditis"},
            "answer_idx": "A", "answer": "Myocardial infarction"}


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# No test reaches the hub (offline, no data dir from the environment, a tripwire): tests/conftest.py
pytestmark = pytest.mark.usefixtures("hub_unreachable")


@pytest.fixture
def medagents(tmp_path: Path) -> Path:
    """A MedAgentsBench-like folder: test (3 questions), test_hard (2, ids shared with test), sampled_50 (1)."""
    folder = tmp_path / "medqa"
    _write(folder / "test.jsonl", [_row(i, "Test") for i in range(3)])
    _write(folder / "test_hard.jsonl", [_row(i, "Hard") for i in range(2)])
    _write(folder / "sampled_50.jsonl", [_row(9, "Sampled")])
    return folder


def test_a_folder_of_several_splits_without_split_is_refused_naming_them(medagents: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING), pytest.raises(DataError) as refused:
        load_dataset(medagents)
    message = str(refused.value)
    assert "sampled_50, test, test_hard" in message and "--split" in message and "never merged" in message
    assert not [r for r in caplog.records if "more than once" in r.getMessage()]  # no silent renaming


@pytest.mark.parametrize(("split", "n", "tag"), [("test", 3, "Test"), ("test_hard", 2, "Hard"),
                                                  ("sampled_50", 1, "Sampled")])
def test_split_picks_one_file_stem_and_only_it(medagents: Path, split: str, n: int, tag: str,
                                               caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        questions = load_dataset(medagents, split=split)
    assert len(questions) == n and all(q.question.startswith(tag) for q in questions)
    assert [q.id for q in questions] == [q.id for q in load_dataset(medagents / f"{split}.jsonl")]  # as the file
    assert not [r for r in caplog.records if "more than once" in r.getMessage()]


def test_an_unknown_split_of_a_several_split_folder_names_the_splits(medagents: Path) -> None:
    with pytest.raises(DataError, match=r"has no split 'hard' \(splits, one per file name: sampled_50, test, "
                                        r"test_hard\); pass --split"):
        load_dataset(medagents, split="hard")
    with pytest.raises(DataError, match="has no split 'all'"):  # "all" would merge them: refused too
        load_dataset(medagents, split="all")


def test_shards_of_one_split_are_read_together(tmp_path: Path) -> None:
    folder = tmp_path / "sharded"
    _write(folder / "data" / "test_hard-00000-of-00002.jsonl", [_row(0, "Hard")])
    _write(folder / "data" / "test_hard-00001-of-00002.jsonl", [_row(1, "Hard")])
    _write(folder / "data" / "test-00000-of-00001.jsonl", [_row(i, "Test") for i in range(3)])
    assert [q.question[:4] for q in load_dataset(folder, split="test_hard")] == ["Hard", "Hard"]
    with pytest.raises(DataError, match="test, test_hard"):
        load_dataset(folder)


def test_a_folder_of_one_split_is_read_as_before(tmp_path: Path) -> None:
    one = _write(tmp_path / "one" / "test.jsonl", [_row(i, "Test") for i in range(3)]).parent
    assert len(load_dataset(one)) == 3
    odd = _write(tmp_path / "odd" / "sampled_50.jsonl", [_row(i, "Sampled") for i in range(2)]).parent
    assert len(load_dataset(odd)) == 2  # its only split, read as the test split


def test_standard_split_names_stay_apart_as_datasets_reads_them(tmp_path: Path) -> None:
    folder = tmp_path / "std"
    _write(folder / "train.jsonl", [_row(7, "Train")])
    _write(folder / "test.jsonl", [_row(i, "Test") for i in range(3)])
    assert len(load_dataset(folder)) == 3  # the test split by default
    assert [q.question[:5] for q in load_dataset(folder, split="train")] == ["Train"]


def test_run_refuses_then_reads_the_split_asked_for(medagents: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    common = ["run", "--dataset", str(medagents), "--system", "zero_shot", "--model", "scripted"]
    assert main([*common, "--out", str(tmp_path / "refused")]) != 0
    err = capsys.readouterr().err
    assert "test_hard" in err and "--split" in err
    assert main([*common, "--split", "test_hard", "--out", str(tmp_path / "hard")]) == 0
    rows = [json.loads(x) for x in (tmp_path / "hard" / "results.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == ["q0", "q1"]
