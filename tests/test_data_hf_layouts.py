"""Local data in every Hugging Face layout, the offline HF cache, revision pinning, stable ids.

Fixtures are written with ``datasets`` in each test; nothing touches the network.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import datasets
import pytest

from teammed.cli import main
from teammed.data import _hub, load_dataset
from teammed.errors import DataError

MEDQA_ROWS = [
    {"question": "A 58-year-old man has crushing chest pain. Most likely diagnosis?",
     "options": {"A": "Myocardial infarction", "B": "Pulmonary embolism", "C": "Pericarditis", "D": "GERD"},
     "answer_idx": "A", "answer": "Myocardial infarction", "meta_info": "step1"},
    {"question": "A 30-year-old woman has pleuritic pain after a flight. Most likely diagnosis?",
     "options": {"A": "Myocardial infarction", "B": "Pulmonary embolism", "C": "Pericarditis", "D": "GERD"},
     "answer_idx": "B", "answer": "Pulmonary embolism", "meta_info": "step2&3"},
    {"question": "Which drug reverses heparin?",
     "options": {"A": "Vitamin K", "B": "Protamine", "C": "Idarucizumab", "D": "Andexanet"},
     "answer_idx": "B", "answer": "Protamine", "meta_info": "step1"},
]
TRAIN_ROWS = [{**MEDQA_ROWS[0], "question": "Train: " + MEDQA_ROWS[0]["question"]}]


# No test reaches the hub (offline, no data dir from the environment, a tripwire): tests/conftest.py
pytestmark = pytest.mark.usefixtures("hub_unreachable")


def _table(rows: list[dict]) -> datasets.Dataset:
    return datasets.Dataset.from_list(rows)


def _ids(questions) -> list[str]:
    return [q.id for q in questions]


def test_save_to_disk_dataset_directory(tmp_path: Path) -> None:
    _table(MEDQA_ROWS).save_to_disk(tmp_path / "medqa_disk")
    questions = load_dataset(tmp_path / "medqa_disk")
    assert [q.answer_idx for q in questions] == ["A", "B", "B"]
    assert questions[0].options["A"] == "Myocardial infarction"


def test_save_to_disk_datasetdict_directory_and_its_splits(tmp_path: Path) -> None:
    datasets.DatasetDict({"train": _table(TRAIN_ROWS), "test": _table(MEDQA_ROWS)}).save_to_disk(tmp_path / "dd")
    assert len(load_dataset(tmp_path / "dd")) == 3  # the test split by default
    assert load_dataset(tmp_path / "dd", split="train")[0].question.startswith("Train:")
    with pytest.raises(DataError, match=r"has no split 'validation' \(splits: train, test\)"):
        load_dataset(tmp_path / "dd", split="validation")


def test_an_arrow_file(tmp_path: Path) -> None:
    _table(MEDQA_ROWS).save_to_disk(tmp_path / "saved")
    (arrow,) = sorted((tmp_path / "saved").glob("*.arrow"))
    assert len(load_dataset(arrow)) == 3


def test_a_copy_of_a_hub_repository_with_parquet_shards(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    _table(MEDQA_ROWS).to_parquet(repo / "data" / "test-00000-of-00001.parquet")
    _table(TRAIN_ROWS).to_parquet(repo / "data" / "train-00000-of-00001.parquet")
    assert len(load_dataset(repo)) == 3
    assert len(load_dataset(repo, split="train")) == 1


@pytest.mark.parametrize("folder", ["medqa", "GBaker/MedQA-USMLE-4-options"])
def test_registry_names_find_hf_layouts_in_the_data_dir(tmp_path: Path, folder: str) -> None:
    repo = tmp_path / folder
    (repo / "data").mkdir(parents=True)
    _table(MEDQA_ROWS).to_parquet(repo / "data" / "test-00000-of-00001.parquet")
    questions = load_dataset("medqa", data_dir=tmp_path)
    assert len(questions) == 3 and questions[0].meta["dataset"] == "medqa"


def test_registry_names_find_save_to_disk_folders(tmp_path: Path) -> None:
    datasets.DatasetDict({"test": _table(MEDQA_ROWS)}).save_to_disk(tmp_path / "medqa")
    assert len(load_dataset("medqa", data_dir=tmp_path)) == 3


def test_a_directory_without_data_is_refused_clearly(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="is a directory without data files"):
        load_dataset(tmp_path / "empty")


def _cache_medqa(cache: Path, tmp_path: Path) -> None:
    """Write what ``datasets.load_dataset('GBaker/MedQA-USMLE-4-options')`` leaves in the HF cache."""
    from datasets.data_files import DataFilesDict
    from datasets.packaged_modules.json.json import Json

    source = tmp_path / "download" / "test.jsonl"
    source.parent.mkdir(parents=True)
    source.write_text("".join(json.dumps(r) + "\n" for r in MEDQA_ROWS))
    stage = tmp_path / "stage"
    builder = Json(cache_dir=str(stage), dataset_name="MedQA-USMLE-4-options", hash="0123abcd",
                   data_files=DataFilesDict.from_patterns({"test": [str(source)]}, base_path=str(source.parent)))
    builder.download_and_prepare()
    built = next(p for p in (stage / "med_qa-usmle-4-options").iterdir() if p.is_dir())
    (cache / "GBaker___med_qa-usmle-4-options").mkdir(parents=True)
    shutil.move(str(built), str(cache / "GBaker___med_qa-usmle-4-options" / "default"))


def test_hf_hub_offline_reads_the_local_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "hf-cache"
    _cache_medqa(cache, tmp_path)
    monkeypatch.delenv("TEAMMED_OFFLINE")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    before = datasets.config.HF_HUB_OFFLINE
    questions = load_dataset("medqa")  # no data_dir: straight to the (cached) hub copy
    assert [q.answer_idx for q in questions] == ["A", "B", "B"]
    assert datasets.config.HF_HUB_OFFLINE == before  # datasets' offline switch is restored, not leaked


def test_teammed_offline_skips_the_cache_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "hf-cache"
    _cache_medqa(cache, tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    with pytest.raises(DataError, match="skipped because TEAMMED_OFFLINE=1"):
        load_dataset("medqa")


def test_hub_loads_pin_the_revision(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEAMMED_OFFLINE")
    for variable in _hub.CACHE_ONLY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    seen: dict[str, Any] = {}

    def probe(ref, timeout, revision=None):
        seen["probe"] = revision

    def fake_load(repo, config, *, split, revision=None):
        seen["load"] = (repo, split, revision)
        return MEDQA_ROWS

    monkeypatch.setattr(_hub, "_probe", probe)
    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    questions = load_dataset("medqa", revision="9f3c2a1")
    assert seen == {"probe": "9f3c2a1", "load": ("GBaker/MedQA-USMLE-4-options", "test", "9f3c2a1")}
    assert len(questions) == 3


def test_a_revision_with_local_data_is_refused(tmp_path: Path) -> None:
    (tmp_path / "medqa_test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in MEDQA_ROWS))
    with pytest.raises(DataError, match="pins a download from the Hugging Face hub, but medqa was found locally"):
        load_dataset("medqa", data_dir=tmp_path, revision="v1")
    with pytest.raises(DataError, match="is local data; drop --revision"):
        load_dataset(tmp_path / "medqa_test.jsonl", revision="v1")


def test_question_ids_are_the_same_from_every_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jsonl = tmp_path / "files" / "medqa_test.jsonl"
    jsonl.parent.mkdir()
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in MEDQA_ROWS))
    _table(MEDQA_ROWS).save_to_disk(tmp_path / "disk")
    (tmp_path / "hub" / "medqa" / "data").mkdir(parents=True)
    _table(list(reversed(MEDQA_ROWS))).to_parquet(tmp_path / "hub" / "medqa" / "data" / "test-00000-of-00001.parquet")
    by_loader = {
        "unified file": load_dataset(jsonl),
        "medqa file": load_dataset("medqa", data_dir=jsonl.parent),
        "save_to_disk as medqa": load_dataset(tmp_path / "disk", source="medqa"),
        "save_to_disk as unified": load_dataset(tmp_path / "disk"),
        "hub copy, other order": load_dataset("medqa", data_dir=tmp_path / "hub"),
    }
    expected = sorted(_ids(by_loader["unified file"]))
    assert len(set(expected)) == 3
    for loader, questions in by_loader.items():
        assert sorted(_ids(questions)) == expected, loader


def test_source_ids_win_and_row_order_does_not_matter(tmp_path: Path) -> None:
    rows = [{"question": f"Q{i}?", "opa": "a", "opb": "b", "opc": "c", "opd": "d", "cop": 0} for i in range(3)]
    for name, order in (("one", rows), ("two", list(reversed(rows)))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "medmcqa_validation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in order))
    one = {q.question: q.id for q in load_dataset("medmcqa", data_dir=tmp_path / "one", split="dev")}
    two = {q.question: q.id for q in load_dataset("medmcqa", data_dir=tmp_path / "two", split="dev")}
    assert one == two and len(set(one.values())) == 3
    with_ids = [{**r, "id": f"mcq-{i}"} for i, r in enumerate(rows)]
    (tmp_path / "ids").mkdir()
    (tmp_path / "ids" / "medmcqa_validation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in with_ids))
    assert _ids(load_dataset("medmcqa", data_dir=tmp_path / "ids", split="dev")) == ["mcq-0", "mcq-1", "mcq-2"]


def test_run_reads_a_save_to_disk_directory(tmp_path: Path) -> None:
    datasets.DatasetDict({"test": _table(MEDQA_ROWS)}).save_to_disk(tmp_path / "medqa_disk")
    out = tmp_path / "run"
    assert main(["run", "--dataset", str(tmp_path / "medqa_disk"), "--split", "all", "--system", "zero_shot",
                 "--model", "scripted",
                 "--out", str(out)]) == 0
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and rows[0]["dataset"] == "medqa_disk"


def test_a_registry_name_wins_over_a_folder_of_that_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "medqa").mkdir()
    (tmp_path / "medqa" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in MEDQA_ROWS))
    monkeypatch.chdir(tmp_path)
    questions = load_dataset("medqa", data_dir=tmp_path)
    assert len(questions) == 3 and questions[0].meta["dataset"] == "medqa"  # the registry's schema
    assert len(load_dataset("./medqa")) == 3  # a path is read as local data


def test_every_command_pins_the_revision_and_run_records_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from teammed.cli import main

    monkeypatch.delenv("TEAMMED_OFFLINE")
    for variable in _hub.CACHE_ONLY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    seen: list[Any] = []
    monkeypatch.setattr(_hub, "_probe", lambda ref, timeout, revision=None: None)

    def fake_load(repo, config, *, split, revision=None):
        seen.append(revision)
        return MEDQA_ROWS

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    common = ["--dataset", "medqa", "--revision", "9f3c2a1", "--model", "scripted", "--no-cache"]
    assert main(["run", *common, "--split", "all", "--n-agents", "2", "--out", str(tmp_path / "run")]) == 0
    identity = json.loads((tmp_path / "run" / "run.json").read_text())["identity"]
    assert identity["revision"] == "9f3c2a1"
    assert main(["search", *common, "--split", "all", "--n", "2", "--trials", "1", "--sampler", "brute",
                 "--out", str(tmp_path / "sets")]) == 0
    assert seen and set(seen) == {"9f3c2a1"}
