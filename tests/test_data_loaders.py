"""Loaders, registry and error messages of teammed.data, on small invented fixtures; no network."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from PIL import Image

from teammed.data import (
    _hub,
    available_datasets,
    load_dataset,
    medmcqa_questions,
    pathvqa_questions,
    registry,
    unified_questions,
)
from teammed.data.ddxplus import SPEC as DDXPLUS
from teammed.data.pmc_vqa import strip_choice_prefix
from teammed.errors import DataError
from teammed.types import Question

FIXTURES = Path(__file__).parent / "data" / "fixtures"


# No test reaches the hub (offline, no data dir from the environment, a tripwire): tests/conftest.py
pytestmark = pytest.mark.usefixtures("hub_unreachable")


def _online(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in _hub.OFFLINE_VARIABLES:
        monkeypatch.delenv(variable, raising=False)


def _copy(tmp_path: Path, *names: str) -> Path:
    for name in names:
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / name, target)
    return tmp_path


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


# --- registry ---------------------------------------------------------------------------


def test_every_benchmark_is_registered() -> None:
    assert set(available_datasets()) >= {
        "demo", "medqa", "medqa_5options", "medmcqa", "pubmedqa", "mmlu_pro_health", "medbullets_op4",
        "medbullets_op5", "ddxplus", "pathvqa", "pmc_vqa", "clinical_notes",
    }


def test_unknown_name_suggests_the_closest_and_lists_all() -> None:
    pattern = r"Unknown data set 'medqaa'\. Did you mean 'medqa'\? Available: demo, medqa,"
    with pytest.raises(DataError, match=pattern):
        load_dataset("medqaa")


def test_names_match_case_and_dash_insensitively() -> None:
    assert len(load_dataset("MedQA", data_dir=FIXTURES)) == 4
    assert len(load_dataset("MMLU-Pro", data_dir=FIXTURES)) == 3
    assert len(load_dataset("GBaker/MedQA-USMLE-4-options", data_dir=FIXTURES)) == 4


def test_unknown_option_and_split_are_explained() -> None:
    with pytest.raises(DataError, match=r"Unknown option 'with_contxt'.*Did you mean 'with_context'\?"):
        load_dataset("pubmedqa", data_dir=FIXTURES, with_contxt=False)
    with pytest.raises(DataError, match=r"Unknown split 'tset' for 'medqa'\. Did you mean 'test'\?"):
        load_dataset("medqa", data_dir=FIXTURES, split="tset")


def test_split_aliases_map_to_file_spellings() -> None:
    assert [q.id for q in load_dataset("medmcqa", data_dir=FIXTURES, split="dev")][:1] == ["m-001"]


def test_offline_without_local_copy_says_how_to_provide_one(tmp_path: Path) -> None:
    with pytest.raises(DataError) as caught:
        load_dataset("medqa", data_dir=tmp_path)
    message = str(caught.value)
    assert "skipped because TEAMMED_OFFLINE=1" in message
    assert "DIR/medqa_test.*" in message and "DIR/medqa/test.*" in message
    assert "--data-dir DIR" in message and "TEAMMED_DATA_DIR" in message
    assert "answer_idx" in message


def test_hf_hub_offline_reads_only_the_local_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import datasets

    _online(monkeypatch)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "empty-cache")
    with pytest.raises(DataError) as caught:
        load_dataset("pubmedqa")
    message = str(caught.value)
    assert "not in the local Hugging Face cache and HF_HUB_OFFLINE=1 forbids downloading it" in message
    assert "datasets.load_dataset('qiaojin/PubMedQA'" in message


def test_local_only_data_sets_never_try_the_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    _online(monkeypatch)
    with pytest.raises(DataError, match="credentialed") as caught:
        load_dataset("clinical_notes")
    assert "DIR/clinical_notes_test.*" in str(caught.value)
    with pytest.raises(DataError, match="release_evidences.json"):
        load_dataset("ddxplus")


def test_unreachable_hub_is_a_data_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _online(monkeypatch)

    def unreachable(ref: _hub.HubRef, timeout: float) -> None:
        raise _hub.HubUnavailable(f"the Hugging Face hub did not answer for {ref.repo}: boom")

    monkeypatch.setattr(_hub, "_probe", unreachable)
    with pytest.raises(DataError, match="did not answer.*boom"):
        load_dataset("medqa")


def test_hub_rows_are_mapped_when_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    _online(monkeypatch)
    rows = [json.loads(line) for line in (FIXTURES / "medmcqa_hub_sample.jsonl").read_text().splitlines()]
    calls = []

    def fake_load(repo: str, config: str | None, *, split: str) -> list[dict[str, Any]]:
        calls.append((repo, config, split))
        return rows[:2]  # cop 0 and 2 only: still read 0-based because the rows come from the hub

    monkeypatch.setattr(_hub, "_probe", lambda ref, timeout: None)
    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    questions = load_dataset("medmcqa", split="validation")
    assert calls == [("openlifescienceai/medmcqa", None, "validation")]
    assert [q.answer_idx for q in questions] == ["A", "C"]


def test_data_dir_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(registry.DATA_DIR_VARIABLE, str(FIXTURES))
    assert len(load_dataset("medqa")) == 4


def test_data_dir_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="is not a directory"):
        load_dataset("medqa", data_dir=tmp_path / "missing")


def test_missing_file_and_unknown_source() -> None:
    with pytest.raises(DataError, match="No such data file"):
        load_dataset("does/not/exist.jsonl")
    with pytest.raises(DataError, match=r"Unknown source= 'medmcq'.*Did you mean 'medmcqa'\?"):
        load_dataset(str(FIXTURES / "medmcqa_hub_sample.jsonl"), source="medmcq")
    with pytest.raises(DataError, match="source= names the schema of a data file"):
        load_dataset("medqa", data_dir=FIXTURES, source="medqa")


# --- unified schema and file formats ------------------------------------------------------


def test_unified_jsonl_ids_meta_context_and_image() -> None:
    questions = load_dataset(str(FIXTURES / "unified_sample.jsonl"))
    first, second, third, fourth = questions
    assert (first.id, first.answer_idx, first.meta) == ("u-1", "B", {"meta_info": "step1"})
    assert (second.id, second.answer_idx, second.meta) == ("42", "B", {"topic": "hematology"})
    assert third.options == {"A": "yes", "B": "no", "C": "maybe"}
    assert (third.context, third.image) == ("An invented abstract.", "figs/x.png")
    assert third.id.startswith("q-")
    assert third.id == load_dataset(str(FIXTURES / "unified_sample.jsonl"))[2].id
    assert fourth.answer_idx is None


def test_unified_errors_name_file_and_line() -> None:
    pattern = r"unified_bad\.jsonl, line 3: answer 'D' is not one of the options A, B"
    with pytest.raises(DataError, match=pattern):
        load_dataset(str(FIXTURES / "unified_bad.jsonl"))


def test_missing_field_and_bad_json_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"question": "q", "options": {"A": "x", "B": "y"}}\n{"options": {"A": "x", "B": "y"}}\n')
    pattern = r"rows\.jsonl, line 2: missing field 'question' \(fields present: options\)"
    with pytest.raises(DataError, match=pattern):
        load_dataset(str(path))
    path.write_text('{"question": "q", "options": {"A": "x", "B": "y"}}\n{"question": \n')
    with pytest.raises(DataError, match=r"rows\.jsonl, line 2: invalid JSON"):
        load_dataset(str(path))


def test_csv_lines_count_multiline_cells(tmp_path: Path) -> None:
    questions = load_dataset(str(FIXTURES / "unified_sample.csv"))
    assert [q.options for q in questions] == [
        {"A": "Sodium", "B": "Calcium", "C": "Chloride"},
        {"A": "Right coronary artery", "B": "Left circumflex"},
    ]
    bad = tmp_path / "bad.csv"
    bad.write_text('question,options,answer_idx\n"two\nlines","[""x"", ""y""]",A\nthird,"[""x""]",A\n')
    with pytest.raises(DataError, match=r"bad\.csv, line 4: a question needs 2 to 10 options \(got 1\)"):
        load_dataset(str(bad))


def test_json_list_and_data_wrapper_and_parquet(tmp_path: Path) -> None:
    rows = [{"question": f"q{i}", "options": {"A": "x", "B": "y"}, "answer_idx": "ABA"[i]} for i in range(3)]
    (tmp_path / "list.json").write_text(json.dumps(rows))
    (tmp_path / "wrapped.json").write_text(json.dumps({"data": rows}))
    pd.DataFrame(rows).to_parquet(tmp_path / "rows.parquet")
    expected = [("q0", "A"), ("q1", "B"), ("q2", "A")]
    for name in ("list.json", "wrapped.json", "rows.parquet"):
        assert [(q.question, q.answer_idx) for q in load_dataset(str(tmp_path / name))] == expected


def test_unsupported_extension(tmp_path: Path) -> None:
    (tmp_path / "rows.txt").write_text("hello")
    with pytest.raises(DataError, match=r"unsupported file type '\.txt'"):
        load_dataset(str(tmp_path / "rows.txt"))


def test_duplicate_ids_are_made_unique() -> None:
    row = {"question": "same", "options": {"A": "x", "B": "y"}}
    (single,) = unified_questions([row])
    ids = [q.id for q in unified_questions([row, row, row])]
    assert ids == [single.id, f"{single.id}-2", f"{single.id}-3"]


def test_empty_result_is_an_error(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "mmlu_pro_test.jsonl", [
        {"question_id": 1, "question": "2+2?", "options": ["3", "4"], "answer": "B", "answer_index": 1,
         "category": "math", "src": "x"},
    ])
    with pytest.raises(DataError, match=r"No usable mmlu_pro_health questions .*\(1 rows read\)"):
        load_dataset("mmlu_pro_health", data_dir=path.parent)


# --- demo -------------------------------------------------------------------------------


def test_demo_is_bundled_and_well_formed() -> None:
    questions = load_dataset("demo")
    assert len(questions) == 20
    assert [q.id for q in questions] == [f"demo-{i:02d}" for i in range(1, 21)]
    assert all(4 <= len(q.options) <= 5 and q.answer_idx in q.options for q in questions)
    assert len({q.answer_idx for q in questions}) >= 4
    assert {q.meta["meta_info"] for q in questions} == {"step1", "step2&3"}
    assert all(q.meta["dataset"] == "demo" for q in questions)


# --- per-source loaders -------------------------------------------------------------------


def test_medqa_gbaker_shape() -> None:
    questions = load_dataset("medqa", data_dir=FIXTURES)
    assert [q.answer_idx for q in questions] == ["A", "B", "D", "C"]
    assert questions[0].options["A"] == "Sporothrix schenckii"
    assert questions[2].meta == {"dataset": "medqa", "meta_info": "step2&3"}


def test_medqa_bigbio_shape_has_five_options() -> None:
    questions = load_dataset("medqa_5options", data_dir=FIXTURES)
    assert [len(q.options) for q in questions] == [5, 5, 5]
    assert questions[0].options["E"] == "Vertebral artery" and questions[0].answer_idx == "E"


def test_medqa_csv_and_parquet_shards(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in (FIXTURES / "medqa_test.jsonl").read_text().splitlines()]
    frame = pd.DataFrame(rows)
    shards = tmp_path / "medqa"
    shards.mkdir()
    frame.iloc[:2].to_parquet(shards / "test-00000-of-00002.parquet")
    frame.iloc[2:].to_parquet(shards / "test-00001-of-00002.parquet")
    from_shards = load_dataset("medqa", data_dir=tmp_path)
    assert [q.answer_idx for q in from_shards] == ["A", "B", "D", "C"]
    frame.assign(options=frame["options"].map(json.dumps)).to_csv(tmp_path / "medqa_train.csv", index=False)
    from_csv = load_dataset("medqa", data_dir=tmp_path, split="train")
    assert [q.model_dump() for q in from_csv] == [q.model_dump() for q in from_shards]


def test_medmcqa_original_json_is_one_based_with_subjects() -> None:
    questions = load_dataset("medmcqa", data_dir=FIXTURES)
    assert [q.answer_idx for q in questions] == ["B", "D", "A", "C"]
    subjects = [q.meta["subject_name"] for q in questions]
    assert subjects == ["Pharmacology", "Anatomy", "Biochemistry", "Anatomy"]


def test_medmcqa_hub_shape_is_zero_based_and_unlabeled_is_none() -> None:
    questions = load_dataset(str(FIXTURES / "medmcqa_hub_sample.jsonl"), source="medmcqa")
    assert [q.answer_idx for q in questions] == ["A", "C", None]


def test_medmcqa_ambiguous_cop_needs_cop_base() -> None:
    rows = [{"id": "x", "question": "q", "opa": "a", "opb": "b", "opc": "c", "opd": "d", "cop": 2}]
    with pytest.raises(DataError, match="Pass cop_base=0.*or cop_base=1"):
        medmcqa_questions(rows)
    assert medmcqa_questions(rows, cop_base=1)[0].answer_idx == "B"
    assert medmcqa_questions(rows, cop_base=0)[0].answer_idx == "C"


def test_pubmedqa_hub_shape_with_and_without_context() -> None:
    questions = load_dataset("pubmedqa", data_dir=FIXTURES)
    assert [q.answer_idx for q in questions] == ["A", "B", "C"]
    assert questions[0].options == {"A": "yes", "B": "no", "C": "maybe"}
    assert questions[0].id == "90000001"
    assert questions[0].context.startswith("BACKGROUND: Hypertension is common")
    assert "RESULTS: Systolic pressure fell" in questions[0].context
    bare = load_dataset("pubmedqa", data_dir=FIXTURES, with_context=False)
    assert all(q.context is None for q in bare)


def test_pubmedqa_original_ori_pqal_json() -> None:
    questions = load_dataset(str(FIXTURES / "pubmedqa" / "ori_pqal.json"), source="pubmedqa")
    labeled = [(q.id, q.answer_idx) for q in questions]
    assert labeled == [("91000001", "A"), ("91000002", "B"), ("91000003", "C")]
    assert questions[0].context == (
        "METHODS: A trial of text reminders.\n\nRESULTS: Uptake rose from 40% to 52%."
    )
    assert questions[0].meta["year"] == "2019"


def test_mmlu_pro_keeps_health_and_drops_padding() -> None:
    questions = load_dataset("mmlu_pro_health", data_dir=FIXTURES)
    assert [q.id for q in questions] == ["7001", "7002", "7004"]
    assert len(questions[0].options) == 10
    assert questions[1].options == {"A": "4-6", "B": "8-10", "C": "12-20", "D": "24-30"}
    assert questions[1].answer_idx == "C"
    assert questions[2].options == {"A": "Vitamin C", "B": "Vitamin B1", "C": "Vitamin K"}
    assert questions[2].options[questions[2].answer_idx] == "Vitamin K"
    assert len(load_dataset("mmlu_pro_health", data_dir=FIXTURES, category=None)) == 5


def test_medbullets_op4_and_op5() -> None:
    op4 = load_dataset("medbullets_op4", data_dir=FIXTURES)
    op5 = load_dataset("medbullets_op5", data_dir=FIXTURES)
    assert [len(q.options) for q in op4] == [4, 4, 4]
    assert [len(q.options) for q in op5] == [5, 5, 5]
    assert [q.answer_idx for q in op5] == ["E", "A", "C"]
    assert op4[0].meta["explanation"] == "PTHrP secretion,\nclassically squamous."


def test_ddxplus_vignette_options_and_gold() -> None:
    questions = load_dataset("ddxplus", data_dir=FIXTURES, seed=0)
    first = questions[0]
    assert first.id == "ddxplus-test-0"
    assert first.question.startswith("A 55-year-old male consults.")
    assert "Chief complaint: Do you have a fever? yes" in first.question
    assert "- Where is the pain located? side of the chest(R)" in first.question
    assert "- How intense is the pain (0-10)? 6" in first.question
    assert "History and risk factors:\n- Do you smoke cigarettes? yes" in first.question
    assert first.question.endswith("What is the most likely diagnosis?")
    assert first.options[first.answer_idx] == "Pneumonia"
    expected = {"Pneumonia", "Bronchitis", "URTI", "Pulmonary embolism", "Pericarditis"}
    assert set(first.options.values()) == expected
    multi = questions[2]  # two pain locations, and the pathology is not in the top-5 differential
    assert "Where is the pain located? chest, side of the chest(R)" in multi.question
    assert multi.options[multi.answer_idx] == "Unstable angina" and len(multi.options) == 5
    assert len(questions[1].options) == 3
    for question in questions:
        assert question.options[question.answer_idx] == question.meta["pathology"]


def test_ddxplus_gold_position_varies_and_follows_the_seed() -> None:
    first = load_dataset("ddxplus", data_dir=FIXTURES, seed=0)
    again = load_dataset("ddxplus", data_dir=FIXTURES, seed=0)
    other = load_dataset("ddxplus", data_dir=FIXTURES, seed=1)
    assert len({q.answer_idx for q in first}) >= 3
    assert [q.options for q in first] == [q.options for q in again]
    assert [q.options for q in first] != [q.options for q in other]


def test_ddxplus_needs_the_release_json_files(tmp_path: Path) -> None:
    _copy(tmp_path, "ddxplus/release_test_patients.csv")
    with pytest.raises(DataError, match="needs release_evidences.json .*evidences_path"):
        load_dataset("ddxplus", data_dir=tmp_path)
    evidences = FIXTURES / "ddxplus" / "release_evidences.json"
    conditions = FIXTURES / "ddxplus" / "release_conditions.json"
    loaded = load_dataset("ddxplus", data_dir=tmp_path, evidences_path=evidences, conditions_path=conditions)
    assert len(loaded) == 6


def test_ddxplus_reads_the_zipped_release(tmp_path: Path) -> None:
    import zipfile

    folder = _copy(tmp_path, "ddxplus/release_evidences.json", "ddxplus/release_conditions.json") / "ddxplus"
    with zipfile.ZipFile(folder / "release_test_patients.zip", "w") as archive:
        archive.write(FIXTURES / "ddxplus" / "release_test_patients.csv", "release_test_patients")
    assert DDXPLUS.find_local(tmp_path, "test") == [folder / "release_test_patients.zip"]
    assert len(load_dataset("ddxplus", data_dir=tmp_path)) == 6


def test_pathvqa_keeps_yes_no_and_path_strings() -> None:
    questions = load_dataset("pathvqa", data_dir=FIXTURES)
    assert [(q.image, q.answer_idx) for q in questions] == [
        ("images/slide_001.jpg", "A"),
        ("images/slide_003.jpg", "B"),
        ("images/slide_005.jpg", "A"),
    ]
    assert questions[0].options == {"A": "yes", "B": "no"}


def test_pathvqa_saves_embedded_images(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), "red").save(buffer, format="PNG")
    rows = [
        {"image": {"bytes": buffer.getvalue(), "path": None}, "question": "Is it red?", "answer": "yes"},
        {"image": Image.new("RGB", (4, 4), "blue"), "question": "Is it red?", "answer": "no"},
        {"image": Image.new("RGB", (4, 4), "blue"), "question": "Which color?", "answer": "blue"},
    ]
    questions = pathvqa_questions(rows, image_dir=tmp_path / "cache")
    assert len(questions) == 2
    for question in questions:
        path = Path(question.image)
        assert path.parent == tmp_path / "cache" and path.suffix == ".png" and path.is_file()
    assert Image.open(questions[1].image).getpixel((0, 0)) == (0, 0, 255)
    assert questions[0].id != questions[1].id


def test_pathvqa_default_cache_is_inside_the_data_dir(tmp_path: Path) -> None:
    rows = [{"image": {"bytes": b"\x89PNG fake", "path": "x.png"}, "question": "Q?", "answer": "yes"}]
    pd.DataFrame(rows).to_parquet(tmp_path / "pathvqa_test.parquet")
    (question,) = load_dataset("pathvqa", data_dir=tmp_path)
    assert Path(question.image).parent == tmp_path / "pathvqa" / "images"


def test_pmc_vqa_strips_prefixes_and_joins_images(tmp_path: Path) -> None:
    questions = load_dataset("pmc_vqa", data_dir=FIXTURES, images_dir=tmp_path)
    assert questions[0].options == {"A": "CT", "B": "MRI", "C": "Ultrasound", "D": "PET"}
    assert questions[1].options["A"] == "A mass"
    assert [q.answer_idx for q in questions] == ["B", "A", "D"]
    assert questions[2].image == str(tmp_path / "PMC100003_fig2.jpg")
    assert strip_choice_prefix("(C) PET") == "PET"


def test_pmc_vqa_default_images_folder_is_next_to_the_csv(caplog: pytest.LogCaptureFixture) -> None:
    questions = load_dataset("pmc_vqa", data_dir=FIXTURES)
    assert questions[0].image == str(FIXTURES / "pmc_vqa" / "images" / "PMC100001_fig1.jpg")
    assert "does not exist" in caplog.text


def test_clinical_notes_questions_and_context() -> None:
    questions = load_dataset("clinical_notes", data_dir=FIXTURES)
    first = questions[0]
    assert first.question == (
        "Based on the Subjective and Objective sections, does this patient have pneumonia?"
    )
    assert first.context.startswith("Subjective:\nPt reports 3 days of productive cough\nand fevers.")
    assert "\n\nObjective:\nT 38.6" in first.context
    assert first.options == {"A": "Yes", "B": "No"}
    assert [q.answer_idx for q in questions] == ["A", "B", "A", None]
    assert questions[3].id.startswith("note-")
    from_jsonl = load_dataset(str(FIXTURES / "clinical_notes_sample.jsonl"), source="clinical_notes")
    assert [q.answer_idx for q in from_jsonl] == ["A", "B", "B"]


def test_clinical_notes_bad_label_names_the_csv_line(tmp_path: Path) -> None:
    path = tmp_path / "clinical_notes_test.csv"
    path.write_text('subjective,objective,problem,label\n"S\nmore",O,copd,yes\nS,O,asthma,perhaps\n')
    with pytest.raises(DataError, match=r"clinical_notes_test\.csv, line 4: label must be yes or no"):
        load_dataset("clinical_notes", data_dir=tmp_path)


def test_every_loader_returns_valid_questions() -> None:
    for name in available_datasets():
        for question in load_dataset(name, data_dir=FIXTURES):
            assert isinstance(question, Question)
            assert question.answer_idx is None or question.answer_idx in question.options
