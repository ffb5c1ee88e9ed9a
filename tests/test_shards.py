"""Issue 35, items 2-3: ``run --shard I/N`` covers a sample exactly once across N processes, and
``report`` merges the N shards of a run into one row (refusing overlaps, flagging missing shards)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from teammed.cli import main
from teammed.data.sampling import shard_questions
from teammed.types import Question

OPTIONS = {"A": "Myocardial infarction", "B": "Pulmonary embolism", "C": "Aortic dissection", "D": "Pericarditis"}


def _questions(n: int, *, strata: int = 3) -> list[Question]:
    return [Question(id=f"q{i:03d}", question=f"Case {i}: chest pain. Key: {'ABCD'[i % 4]}", options=OPTIONS,
                     answer_idx="ABCD"[i % 4], meta={"subject": f"s{i % strata}"}) for i in range(n)]


@pytest.mark.parametrize("n,count", [(40, 2), (41, 3), (7, 4), (3, 5)])
def test_the_shards_cover_the_sample_exactly_once(n, count) -> None:
    questions = _questions(n)
    parts = [shard_questions(questions, i, count) for i in range(1, count + 1)]
    ids = [q.id for part in parts for q in part]
    assert sorted(ids) == [q.id for q in questions] and len(set(ids)) == n  # disjoint, complete
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert parts == [shard_questions(questions, i, count) for i in range(1, count + 1)]  # deterministic
    for part in parts:  # in the sample's order
        assert [q.id for q in part] == sorted(q.id for q in part)


def test_each_shard_keeps_the_strata_within_one_question() -> None:
    questions = sorted(_questions(40, strata=3), key=lambda q: q.meta["subject"])
    whole = Counter(q.meta["subject"] for q in questions)
    for i in (1, 2):
        part = Counter(q.meta["subject"] for q in shard_questions(questions, i, 2, stratify_by="subject"))
        assert all(abs(part[s] - whole[s] / 2) <= 0.5 for s in whole)


@pytest.mark.parametrize("bad", ["0/2", "3/2", "2", "a/b", "1/0"])
def test_a_shard_that_does_not_exist_is_refused(tmp_path, capsys, bad) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["run", "--dataset", "demo", "--shard", bad, "--model", "scripted", "--out", str(tmp_path / "r")])
    assert caught.value.code == 2 and "--shard" in capsys.readouterr().err


def _data(tmp_path: Path, n: int = 40) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(q.model_dump(mode="json")) + "\n" for q in _questions(n)))
    return path


def run_shard(tmp_path: Path, data: Path, shard: str | None, out: str = "runs") -> Path:
    flags = ["--shard", shard] if shard else []
    assert main(["run", "--dataset", str(data), "--split", "all", "--n", "40", "--seed", "7", "--stratify", "subject",
                 "--model", "simulated:3", "--no-cache", *flags, "--out", str(tmp_path / out)]) == 0
    i, _, n = (shard or "/").partition("/")
    return tmp_path / out / (f"shard{i}of{n}" if shard else "")


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


def test_two_shards_answer_the_sample_once_each_in_their_own_directories(tmp_path) -> None:
    data = _data(tmp_path)
    one, two = run_shard(tmp_path, data, "1/2"), run_shard(tmp_path, data, "2/2")
    first, second = _rows(one), _rows(two)
    assert len(first) == len(second) == 20 and not {r["id"] for r in first} & {r["id"] for r in second}
    whole = _rows(run_shard(tmp_path, data, None, out="whole"))
    assert {r["id"] for r in first + second} == {r["id"] for r in whole}
    identity = json.loads((one / "run.json").read_text())["identity"]
    assert identity["shard"] == "1/2" and len(identity["question_ids"]) == 20
    # the simulated team is deterministic per question: the shards answer as the whole run does
    assert {r["id"]: r["prediction"] for r in first + second} == {r["id"]: r["prediction"] for r in whole}


def _report(tmp_path: Path, *runs: Path, out: str = "report") -> dict:
    from teammed.evals.report import build_report

    build_report(list(runs), tmp_path / out)
    return json.loads((tmp_path / out / "summary.json").read_text())


def test_report_merges_the_shards_into_the_row_of_the_whole_run(tmp_path) -> None:
    data = _data(tmp_path)
    one, two = run_shard(tmp_path, data, "1/2"), run_shard(tmp_path, data, "2/2")
    whole = run_shard(tmp_path, data, None, out="whole")
    merged, alone = _report(tmp_path, one, two, out="merged"), _report(tmp_path, whole, out="alone")
    (group,) = merged["groups"]
    (reference,) = alone["groups"]
    assert group["questions"]["n"] == 40 == reference["questions"]["n"] and not group["partial"]
    assert group["accuracy"]["mean"] == reference["accuracy"]["mean"] and len(group["runs"]) == 1
    assert "## Partial runs" not in (tmp_path / "merged" / "report.md").read_text()


def test_a_missing_shard_is_reported_as_partial(tmp_path, caplog) -> None:
    one = run_shard(tmp_path, _data(tmp_path), "1/2")
    (group,) = _report(tmp_path, one)["groups"]
    note = "partial: 1 of 2 shards (shard 2 missing)"
    assert group["questions"]["n"] == 20 and group["partial"] == [f"{one} ({note})"]
    text = (tmp_path / "report" / "report.md").read_text()
    assert "## Partial runs" in text and note in text and "†" in text
    assert any(note in r.getMessage() for r in caplog.records)
    rows = [line for line in text.split("## Table 1")[1].split("\n## ")[0].splitlines() if line.startswith("| ")]
    assert rows and not any("**" in line for line in rows)  # the only row is partial: never the best of a column


def test_overlapping_shards_are_refused_naming_both_directories(tmp_path) -> None:
    from teammed.errors import DataError

    data = _data(tmp_path)
    one = run_shard(tmp_path, data, "1/2")
    other = run_shard(tmp_path, data, "1/3", out="other")  # another split of the same sample: they overlap
    with pytest.raises(DataError, match="both answered") as caught:
        _report(tmp_path, one, other)
    assert str(one) in str(caught.value) and str(other) in str(caught.value)
