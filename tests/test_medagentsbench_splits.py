"""Every split file in a MedAgentsBench folder loads, with or without ``realidx`` (issue 32, item 8).

MedAgentsBench's ``medqa_5options`` folder has no ``test.jsonl`` and none of its files hold
``realidx``; other folders mix files with and without it. Rows without ``realidx`` get the
content id every teammed loader gives an id-less question.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from teammed.data import load_dataset
from teammed.data._fields import content_id
from teammed.data.medagentsbench import FOLDERS, find_layout
from teammed.data.registry import known_splits
from teammed.errors import DataError


def _row(i: int, *, n: int = 5, realidx: Any = None, **extra: Any) -> dict[str, Any]:
    """A row as MedAgentsBench's medqa_5options/test_hard.jsonl holds it: no realidx unless given."""
    options = {"ABCDE"[k]: f"Option {k + 1} of question {i}" for k in range(n)}
    row: dict[str, Any] = {"question": f"A patient (case {i}) presents with fever. Which is the diagnosis?",
                           "answer": options["B"], "options": options, "meta_info": "step1", "answer_idx": "B",
                           "cleanse_cot": "Text Only", "predicted_answer_base_direct": "A", **extra}
    if realidx is not None:
        row = {"realidx": realidx, **row}
    return row


def _write(folder: Path, split: str, rows: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{split}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _expected_id(row: dict[str, Any]) -> str:
    kept = {k: v for k, v in row["options"].items() if v != "N/A"}
    return content_id(row["question"], dict(zip("ABCDEFGHIJ", kept.values(), strict=False)))


@pytest.fixture
def five_options(tmp_path: Path) -> Path:
    """MedAgentsBench's medqa_5options folder: test_hard and sampled_50 only, no realidx anywhere."""
    folder = tmp_path / "medqa_5options"
    _write(folder, "test_hard", [_row(i) for i in range(6)])
    _write(folder, "sampled_50", [_row(i) for i in (1, 3, 7)])
    _write(folder, "test_good_reimp", [_row(i) for i in range(10, 14)])
    return tmp_path


def test_a_split_file_without_realidx_loads_with_content_ids(five_options: Path) -> None:
    rows = [json.loads(line) for line in (five_options / "medqa_5options" / "test_hard.jsonl").read_text().splitlines()]
    questions = load_dataset("medqa_5options", data_dir=five_options, split="test_hard")
    assert [q.id for q in questions] == [_expected_id(r) for r in rows]
    assert all(re.fullmatch(r"q-[0-9a-f]{12}", q.id) for q in questions)
    assert len({q.id for q in questions}) == 6
    assert [q.answer_idx for q in questions] == ["B"] * 6 and len(questions[0].options) == 5
    assert questions[0].meta["source_layout"] == "medagentsbench"
    assert questions[0].meta["dataset"] == "medqa_5options"


def test_content_ids_are_stable_across_files_loads_and_loaders(five_options: Path, tmp_path: Path) -> None:
    hard = {q.question: q.id for q in load_dataset("medqa_5options", data_dir=five_options, split="test_hard")}
    again = {q.question: q.id for q in load_dataset("medqa_5options", data_dir=five_options, split="test_hard")}
    sampled = {q.question: q.id for q in load_dataset("medqa_5options", data_dir=five_options, split="sampled_50")}
    assert hard == again
    assert {k: v for k, v in sampled.items() if k in hard} == {k: hard[k] for k in sampled if k in hard}
    assert len(set(sampled) & set(hard)) == 2  # questions 1 and 3 are in both files, with one id each
    # the same rows read by MedQA's own loader (a hub-shaped medqa_5options/test.jsonl) get the same ids
    own = tmp_path / "own"
    _write(own / "medqa_5options", "test", [_row(i) for i in range(6)])
    by_own_loader = {q.question: q.id for q in load_dataset("medqa_5options", data_dir=own)}
    assert "source_layout" not in load_dataset("medqa_5options", data_dir=own)[0].meta
    assert by_own_loader == hard


def test_every_file_in_the_folder_is_a_split(five_options: Path) -> None:
    assert known_splits("medqa_5options", five_options) == ("test", ("sampled_50", "test_good_reimp", "test_hard"))
    assert len(load_dataset("medqa_5options", data_dir=five_options, split="sampled_50")) == 3
    assert len(load_dataset("medqa_5options", data_dir=five_options, split="test_good_reimp")) == 4


def test_an_absent_split_lists_the_splits_present(five_options: Path) -> None:
    with pytest.raises(DataError, match=r"has no split 'test_hrad'\. Did you mean 'test_hard'\?.*"
                                        r"sampled_50, test_good_reimp, test_hard") as raised:
        load_dataset("medqa_5options", data_dir=five_options, split="test_hrad")
    assert "Unknown split" not in str(raised.value)
    with pytest.raises(DataError, match=r"has no split 'train'.*Splits \(file stems\): sampled_50, "
                                        r"test_good_reimp, test_hard"):
        load_dataset("medqa_5options", data_dir=five_options, split="train")
    # no test.jsonl: the default split is absent, and the error says which to pick
    with pytest.raises(DataError, match=r"has no test\.jsonl; choose a split.*sampled_50, test_good_reimp, test_hard"):
        load_dataset("medqa_5options", data_dir=five_options)


def test_rows_with_and_without_realidx_in_one_file(tmp_path: Path) -> None:
    rows = [_row(0, realidx=17), _row(1), _row(2, realidx="x-2")]
    _write(tmp_path / "medqa", "test_hard", rows)
    _write(tmp_path / "medqa", "test", [_row(i, realidx=100 + i) for i in range(4)])
    ids = [q.id for q in load_dataset("medqa", data_dir=tmp_path, split="test_hard")]
    assert ids == ["17", _expected_id(rows[1]), "x-2"]
    assert [q.id for q in load_dataset("medqa", data_dir=tmp_path)] == ["100", "101", "102", "103"]


def test_identical_rows_get_deterministic_suffixes_and_a_warning_naming_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rows = [_row(0), _row(1), _row(0), _row(2), _row(0)]
    path = _write(tmp_path / "medqa_5options", "test_hard", rows)
    with caplog.at_level(logging.WARNING, logger="teammed.data.medagentsbench"):
        ids = [q.id for q in load_dataset("medqa_5options", data_dir=tmp_path, split="test_hard")]
    first = _expected_id(rows[0])
    assert ids == [first, _expected_id(rows[1]), f"{first}-2", _expected_id(rows[3]), f"{first}-3"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert str(path) in warnings[0] and first in warnings[0] and "2 rows repeat" in warnings[0]
    # the same file loads to the same ids every time
    assert [q.id for q in load_dataset("medqa_5options", data_dir=tmp_path, split="test_hard")] == ids


def test_a_repeated_realidx_is_suffixed_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _write(tmp_path / "medqa", "test", [_row(0, realidx=5), _row(1, realidx=5), _row(2, realidx=6)])
    with caplog.at_level(logging.WARNING, logger="teammed.data.medagentsbench"):
        ids = [q.id for q in load_dataset("medqa", data_dir=tmp_path)]
    assert ids == ["5", "5-2", "6"]
    assert any("test.jsonl" in r.getMessage() and "(5)" in r.getMessage() for r in caplog.records)


def test_no_warning_when_ids_are_unique(five_options: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        load_dataset("medqa_5options", data_dir=five_options, split="test_hard")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("name", list(FOLDERS))
def test_every_split_file_of_every_benchmark_loads(tmp_path: Path, name: str) -> None:
    folder = tmp_path / FOLDERS[name]
    present = {"test": [_row(i, n=4, realidx=f"{name}-{i}") for i in range(5)],
               "test_hard": [_row(i, n=4) for i in range(3)],  # no realidx, as in several folders
               "sampled_50_hard": [_row(i, n=4) for i in range(2)],
               "test_hard_reimp_leftout": [_row(i, n=4, realidx=i) for i in range(4)]}
    for split, rows in present.items():
        _write(folder, split, rows)
    assert known_splits(name, tmp_path) == ("test", tuple(sorted(present)))
    for split, rows in present.items():
        questions = load_dataset(name, data_dir=tmp_path, split=split)
        assert [q.id for q in questions] == [str(r["realidx"]) if "realidx" in r else _expected_id(r) for r in rows]
        assert all(q.meta["source_layout"] == "medagentsbench" for q in questions)


@pytest.mark.parametrize("name", ["medqa", "medqa_5options", "medmcqa", "mmlu_pro_health", "medbullets_op5"])
def test_a_hub_shaped_test_file_alone_still_goes_to_its_own_loader(tmp_path: Path, name: str) -> None:
    _write(tmp_path / FOLDERS[name], "test", [_row(0, n=4), _row(1, n=4)])
    assert find_layout(tmp_path, name) is None  # a plain split name without realidx: not MedAgentsBench's
    _write(tmp_path / FOLDERS[name], "test_hard", [_row(0, n=4)])
    layout = find_layout(tmp_path, name)  # a stem only MedAgentsBench uses: the folder is its layout
    assert layout is not None and sorted(layout.splits) == ["test", "test_hard"]


def test_a_benchmark_only_medagentsbench_ships_loads_without_realidx(tmp_path: Path) -> None:
    _write(tmp_path / "afrimedqa", "test", [_row(i, n=4) for i in range(3)])
    _write(tmp_path / "afrimedqa", "train", [_row(i, n=4) for i in range(10, 12)])
    assert known_splits("afrimedqa", tmp_path) == ("test", ("test", "train"))
    assert len(load_dataset("afrimedqa", data_dir=tmp_path)) == 3
    with pytest.raises(DataError, match=r"no split 'test_hard'.*Splits \(file stems\): test, train"):
        load_dataset("afrimedqa", data_dir=tmp_path, split="test_hard")


def test_run_reads_a_split_without_realidx(five_options: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The reported command: ``teammed run --dataset medqa_5options --data-dir DIR --split test_hard``."""
    from teammed.cli import main

    out = tmp_path / "out"
    code = main(["run", "--dataset", "medqa_5options", "--data-dir", str(five_options), "--split", "test_hard",
                 "--model", "scripted", "--system", "zero_shot", "--out", str(out), "--no-cache"])
    assert code == 0, capsys.readouterr().err
    assert json.loads((out / "run.json").read_text())["identity"]["split"] == "test_hard"
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    expected = {q.id for q in load_dataset("medqa_5options", data_dir=five_options, split="test_hard")}
    assert len(rows) == 6 and {r["id"] for r in rows} == expected
    assert all(r["error"] is None for r in rows)
