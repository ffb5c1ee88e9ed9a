"""Issue 9 gaps: tune's tuning record reaches `run`, tune's data-set identity, report grouping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teammed.backends.simulated import simulated_questions
from teammed.cli import main

SCRIPTED = ["--model", "scripted", "--n-agents", "2"]
TUNE_SMALL = ["--budget", "calls=1e6", "--model", "simulated:5", "--optimizer", "none", "--n-eval", "6",
              "--no-cache", "--pool-size", "2", "--batch-size", "5", "--stage1-batches", "1"]


def _write(path: Path, questions, *, suffix: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": q.id, "question": q.question + suffix, "options": q.options,
                                        "answer_idx": q.answer_idx}) + "\n" for q in questions))
    return path


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """One `teammed tune` over a 70-question file (simulated team): its file, output dir and record."""
    root = tmp_path_factory.mktemp("tuned")
    data = _write(root / "sim.jsonl", simulated_questions(70, seed=5, prefix="cli"))
    out = root / "out"
    assert main(["tune", "--dataset", str(data), *TUNE_SMALL, "--out", str(out)]) == 0
    special = next(p for p in out.glob("*.json") if not p.name.endswith((".program.json", "tune_report.json",
                                                                         "tune_state.json")))
    return data, out, json.loads(special.read_text()), special


def test_tune_writes_the_shared_tuning_record(tuned):
    data, out, special, _ = tuned
    from teammed.data import load_dataset
    from teammed.records import dataset_digest

    record = special["tuning"]
    assert record["dataset"] == "sim" and record["dataset_sha256"] == dataset_digest(load_dataset(str(data)))
    assert record["split"] == "file/tune" and len(record["question_ids"]) > 0
    program = json.loads(Path(special["program"]).read_text())
    meta = (program.get("teammed") or program)["meta"]
    assert meta["tuned_on"]["question_ids"] == record["question_ids"]


@pytest.mark.parametrize("flag", ["--config", "--program"])
def test_run_after_tune_evaluates_no_tuning_question(tuned, tmp_path, capsys, caplog, flag):
    data, _, special, special_path = tuned
    tuned_ids = set(special["tuning"]["question_ids"])
    given = str(special_path) if flag == "--config" else special["program"]
    run_out = tmp_path / "run"
    capsys.readouterr()
    assert main(["run", "--dataset", str(data), "--split", "all", flag, given, *SCRIPTED[:2],
                 "--out", str(run_out)]) == 0
    rows = {r["id"] for r in _rows(run_out)}
    assert rows and not rows & tuned_ids
    assert f"left out {len(tuned_ids)} of 70 questions" in caplog.text
    manifest = json.loads((run_out / "run.json").read_text())
    assert manifest["overlap"]["overlapping"] == len(tuned_ids)


def test_legacy_tuning_ids_are_still_read(tmp_path):
    from teammed.errors import DataError
    from teammed.experiments._data import tuned_on

    legacy = tmp_path / "legacy.json"
    legacy.write_text(json.dumps({"format": "teammed-special-set/1", "components": [], "tuning_ids": ["a", "b"]}))
    assert [r["question_ids"] for r in tuned_on(legacy).records] == [["a", "b"]]
    program = tmp_path / "program.json"
    program.write_text(json.dumps({"teammed": {"meta": {"tuning_ids": ["c"]}}}))
    assert [r["question_ids"] for r in tuned_on(program).records] == [["c"]]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"tuning": {"question_ids": "a,b"}}))
    with pytest.raises(DataError, match="tuning"):
        tuned_on(broken)


def test_tune_keys_two_files_of_one_name_apart(tmp_path):
    questions = simulated_questions(70, seed=5, prefix="cli")
    one = _write(tmp_path / "a" / "sampled_50.jsonl", questions)
    two = _write(tmp_path / "b" / "sampled_50.jsonl", questions, suffix=" (b)")
    outs = []
    for data in (one, two):
        out = tmp_path / f"out-{data.parent.name}"
        assert main(["tune", "--dataset", str(data), *TUNE_SMALL, "--n-tune", "10", "--out", str(out),
                     "--storage", f"sqlite:///{tmp_path / 'shared.db'}"]) == 0
        outs.append(json.loads((out / "tune_report.json").read_text()))
    names = [r["study"]["study_name"] for r in outs]
    assert names[0] != names[1] and all(n.startswith("tune-sampled_50-") for n in names)
    assert outs[0]["tuning"]["dataset_sha256"] != outs[1]["tuning"]["dataset_sha256"]
    named = tmp_path / "named"
    assert main(["tune", "--dataset", str(one), *TUNE_SMALL, "--n-tune", "10", "--out", str(named),
                 "--dataset-name", "medqa50"]) == 0
    report = json.loads((named / "tune_report.json").read_text())
    assert report["study"]["study_name"].startswith("tune-medqa50-")


def _report_groups(tmp_path: Path, runs: list[Path]) -> list[dict]:
    out = tmp_path / "report"
    assert main(["report", *map(str, runs), "--out", str(out)]) == 0
    return json.loads((out / "summary.json").read_text())["groups"]


def test_report_never_merges_runs_that_differ_beyond_the_seed(tmp_path):
    base = ["run", "--dataset", "demo", "--preset", "base", "--model", "scripted", "--n", "4"]
    runs = {name: tmp_path / name for name in ("a1", "a2", "b1")}
    assert main([*base, "--n-agents", "2", "--seed", "1", "--out", str(runs["a1"])]) == 0
    assert main([*base, "--n-agents", "2", "--seed", "2", "--out", str(runs["a2"])]) == 0
    assert main([*base, "--n-agents", "3", "--seed", "1", "--out", str(runs["b1"])]) == 0
    groups = _report_groups(tmp_path, list(runs.values()))
    assert len(groups) == 2, groups
    names = sorted(g["config"] for g in groups)
    assert names == ["base [n_agents=2]", "base [n_agents=3]"]
    sizes = sorted(len(g["runs"]) for g in groups)
    assert sizes == [1, 2]  # the two seeds of one system still merge


def test_report_loading_layer_reads_typed_rows_and_records(tmp_path):
    from teammed.deliberation import Deliberation
    from teammed.evals._rows import agent_roles, deliberation
    from teammed.evals._runs import load_run
    from teammed.records import ResultRow

    from .helpers import read_rows

    out = tmp_path / "run"
    assert main(["run", "--dataset", "demo", "--preset", "leadership", *SCRIPTED, "--n", "2", "--out", str(out)]) == 0
    rows = read_rows(load_run(out))
    assert rows and all(isinstance(row, ResultRow) for row in rows)
    record = deliberation(rows[0])
    assert isinstance(record, Deliberation) and len(record.agents) == 2
    assert agent_roles(rows[0]) == {a.id: a.role for a in record.agents}
    lines = (out / "results.jsonl").read_text().splitlines()
    newer = json.loads(lines[0]) | {"schema_version": 99}
    (out / "results.jsonl").write_text(json.dumps(newer) + "\n")
    from teammed.errors import DataError

    with pytest.raises(DataError, match="upgrade teammed"):
        load_run(out)


def test_overlap_is_matched_by_content_never_by_id_alone(tmp_path, capsys):
    """A Special Set tuned on one file, run on another whose ids collide: nothing is left out. The same
    questions under other ids (another copy of the benchmark) are left out."""
    tuned = simulated_questions(70, seed=5, prefix="cli")
    data = _write(tmp_path / "tuned.jsonl", tuned)
    out = tmp_path / "tuned_out"
    assert main(["tune", "--dataset", str(data), *TUNE_SMALL, "--out", str(out)]) == 0
    [special] = [p for p in out.glob("*.json") if not p.name.startswith("tune_") and "program" not in p.name]
    record = json.loads(special.read_text())["tuning"]
    assert len(record["question_sha256"]) == len(record["question_ids"])
    # other questions under the very same ids
    colliding = _rewritten(data, tmp_path / "colliding.jsonl", question=lambda text: "A different patient: " + text)
    assert _overlap_of_run(colliding, special, tmp_path / "run_colliding") == 0
    assert len((tmp_path / "run_colliding" / "results.jsonl").read_text().splitlines()) == 70
    # the tuned questions under new ids (the same benchmark from another loader) are still caught
    copy = _rewritten(data, tmp_path / "copy.jsonl", id=lambda text: "copy-" + text)
    assert _overlap_of_run(copy, special, tmp_path / "run_copy") == len(record["question_ids"])


def _rewritten(data: Path, path: Path, **edits) -> Path:
    """``data``'s rows with ``edits[field](value)`` applied, written to ``path``."""
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    path.write_text("".join(json.dumps({**r, **{k: f(r[k]) for k, f in edits.items()}}) + "\n" for r in rows))
    return path


def _overlap_of_run(data: Path, special: Path, out: Path) -> int:
    """How many questions a scripted run of all of ``data`` under the Special Set found tuned on."""
    assert main(["run", "--dataset", str(data), "--split", "all", "--config", str(special), "--model", "scripted",
                 "--n", "70", "--out", str(out), "--no-cache"]) == 0
    return json.loads((out / "run.json").read_text())["overlap"]["overlapping"]

def test_a_run_that_kept_tuning_questions_is_its_own_labelled_row_in_report(tmp_path):
    from teammed.evals.report import build_report

    tuned = simulated_questions(70, seed=6, prefix="ov")
    data = _write(tmp_path / "d.jsonl", tuned)
    assert main(["tune", "--dataset", str(data), *TUNE_SMALL, "--out", str(tmp_path / "t")]) == 0
    [special] = [p for p in (tmp_path / "t").glob("*.json") if not p.name.startswith("tune_")
                 and "program" not in p.name]
    runs = []
    for name, extra in (("clean", []), ("kept", ["--allow-overlap"])):
        out = tmp_path / name
        assert main(["run", "--dataset", str(data), "--split", "all", "--config", str(special), "--model",
                     "scripted", "--n", "70", "--out", str(out), "--no-cache", *extra]) == 0
        runs.append(out)
    text = build_report(runs, tmp_path / "report").read_text()
    table = text.split("## Table 1")[1].split("##")[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "Config" not in line]
    assert len([r for r in rows if "[tuning overlap]" in r]) == 1 and len(rows) >= 2
