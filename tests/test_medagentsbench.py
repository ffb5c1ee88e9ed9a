"""MedAgentsBench's data folder (`DIR/<name>/<split>.jsonl`) is a first-class source for every benchmark."""

from __future__ import annotations

import json

import pytest

from teammed.data import load_dataset
from teammed.data.registry import known_splits
from teammed.data.splits import plan_split
from teammed.errors import DataError
from tests.helpers import write_medagentsbench

# registry name (any spelling a user types) -> the folder MedAgentsBench keeps it in
NAMES = {"medqa": "medqa", "medqa_5options": "medqa_5options", "pubmedqa": "pubmedqa", "medmcqa": "medmcqa",
         "mmlu": "mmlu", "mmlu-pro": "mmlu-pro", "medbullets": "medbullets", "afrimedqa": "afrimedqa"}


@pytest.fixture(scope="module")
def mab(tmp_path_factory):
    return write_medagentsbench(tmp_path_factory.mktemp("mab"))


def _rows(folder, split="test"):
    return [json.loads(line) for line in (folder / f"{split}.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("name", list(NAMES))
def test_every_named_benchmark_loads_from_the_folder(mab, name):
    rows = _rows(mab / NAMES[name])
    questions = load_dataset(name, data_dir=mab)
    assert [q.id for q in questions] == [str(r["realidx"]) for r in rows]  # realidx is the id, int or text
    for q, row in zip(questions, rows, strict=True):
        assert q.question == row["question"].strip()
        kept = {k: v for k, v in row["options"].items() if v != "N/A"}
        assert list(q.options.values()) == list(kept.values())  # padding dropped, order kept
        assert q.options[q.answer_idx] == row["options"][row["answer_idx"]]  # gold follows its text
        assert q.meta["source_layout"] == "medagentsbench"


def test_the_dataset_name_results_carry_is_the_registry_name(mab):
    assert load_dataset("mmlu-pro", data_dir=mab)[0].meta["dataset"] == "mmlu_pro_health"
    assert load_dataset("MedBullets", data_dir=mab)[0].meta["dataset"] == "medbullets_op5"
    pubmed = load_dataset("pubmedqa", data_dir=mab)
    assert {tuple(q.options.values()) for q in pubmed} == {("yes", "no", "maybe")}
    assert [q.answer_idx for q in pubmed[:3]] == ["A", "B", "C"]
    assert pubmed[0].meta["explanation"] == "the abstract says so"
    assert load_dataset("medbullets", data_dir=mab)[0].meta["explanation"].startswith("Bullet Summary")
    assert load_dataset("medqa", data_dir=mab)[0].meta["meta_info"] == "step1"


@pytest.mark.parametrize("split, n", [("test", 24), ("test_hard", 6), ("sampled_50", 5)])
def test_splits_are_the_file_stems(mab, split, n):
    assert len(load_dataset("medqa", data_dir=mab, split=split)) == n
    assert len(load_dataset("medmcqa", data_dir=mab, split=split)) == n


def test_an_unknown_split_names_the_ones_there_and_a_stray_json_copy_is_not_a_split(mab):
    with pytest.raises(DataError, match=r"no split 'test_hrad'.*Did you mean 'test_hard'.*sampled_50, test, "
                                        r"test_hard"):
        load_dataset("medqa", data_dir=mab, split="test_hrad")
    assert known_splits("medqa", mab) == ("test", ("sampled_50", "test", "test_hard"))
    assert known_splits("pubmedqa", mab) == ("test", ("sampled_50", "test", "test_hard", "train"))


def test_tuning_reads_a_train_file_when_the_folder_has_one_else_the_tune_part(mab):
    assert plan_split("pubmedqa", purpose="tune", data_dir=mab).name == "train"
    assert plan_split("pubmedqa", purpose="eval", data_dir=mab).name == "test"
    assert plan_split("medqa", purpose="tune", data_dir=mab).name == "test/tune"
    assert plan_split("medqa", purpose="eval", data_dir=mab).name == "test/eval"
    assert plan_split("medmcqa", purpose="eval", data_dir=mab).source_split is None  # its test, not validation


def test_options_of_the_original_files_are_refused_for_the_folder(mab):
    with pytest.raises(DataError, match="with_context.*MedAgentsBench's layout"):
        load_dataset("pubmedqa", data_dir=mab, with_context=False)
    with pytest.raises(DataError, match="drop --revision"):
        load_dataset("medqa", data_dir=mab, revision="main")


def test_a_gold_answer_on_padding_is_refused_with_its_row(tmp_path):
    folder = tmp_path / "afrimedqa"
    folder.mkdir()
    row = {"realidx": "x1", "question": "q?", "options": {"A": "a", "B": "b", "C": "N/A"}, "answer_idx": "C"}
    (folder / "test.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(DataError, match=r"test.jsonl.*line 1.*answer_idx 'C' is a padding option"):
        load_dataset("afrimedqa", data_dir=tmp_path)


def test_a_folder_in_another_schema_is_left_to_its_own_loader(tmp_path):
    folder = tmp_path / "medqa"
    folder.mkdir()
    row = {"question": "q?", "options": {"A": "a", "B": "b"}, "answer_idx": "B", "answer": "b", "meta_info": "step1"}
    (folder / "test.jsonl").write_text(json.dumps(row) + "\n")
    [q] = load_dataset("medqa", data_dir=tmp_path)  # GBaker's shape: no realidx, so not MedAgentsBench's
    assert q.answer_idx == "B" and "source_layout" not in q.meta


def test_a_benchmark_only_medagentsbench_ships_says_where_to_get_it(tmp_path):
    with pytest.raises(DataError, match=r"MedAgentsBench's data folder.*data/afrimedqa/test.jsonl"):
        load_dataset("afrimedqa", data_dir=tmp_path)


@pytest.mark.parametrize("name", ["medqa", "pubmedqa", "medmcqa", "medbullets", "mmlu-pro"])
def test_run_reads_the_folder(mab, tmp_path, name, capsys):
    from teammed.cli import main

    out = tmp_path / "out"
    code = main(["run", "--dataset", name, "--data-dir", str(mab), "--model", "scripted", "--system", "zero_shot",
                 "--n", "3", "--out", str(out), "--no-cache"])
    assert code == 0, capsys.readouterr().err
    meta = json.loads((out / "run.json").read_text())
    assert meta["identity"]["split"] == ("test" if name == "pubmedqa" else "test/eval")  # PubMedQA tunes on train
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["error"] is None and r["prediction"] for r in rows)
    ids = {str(r["realidx"]) for r in _rows(mab / NAMES[name])}
    assert {r["id"] for r in rows} <= ids
