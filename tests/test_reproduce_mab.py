"""`reproduce medagentsbench`: published rows from the files, measured rows ours, tested question by question
(issue 43, item 3)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from teammed.cli import main
from tests.fake_openai import FakeOpenAI, completion
from tests.helpers import write_medagentsbench

METHODS = ("zero_shot", "cot", "mdagents", "aflow")


def _published(data: Path, out: Path, folders: tuple[str, ...]) -> Path:
    """Published files for gpt-4o on each folder's test_hard: method k is right on questions i with (i + k) % 3."""
    for folder in folders:
        rows = [json.loads(line) for line in (data / folder / "test_hard.jsonl").read_text().splitlines()]
        (out / folder).mkdir(parents=True, exist_ok=True)
        for k, method in enumerate(METHODS):
            answers = [{"realidx": r["realidx"], "question": r["question"], "options": r["options"],
                        "answer_idx": r["answer_idx"],
                        "predicted_answer": r["answer_idx"] if (i + k) % 3 else "Z",
                        "time_elapsed": 2.0, **({} if method == "aflow" else
                                                {"token_usage": {"prompt_tokens": 100 * (k + 1),
                                                                 "completion_tokens": 10}})}
                       for i, r in enumerate(rows)]
            (out / folder / f"gpt-4o-{folder}-test_hard-{method}.json").write_text(json.dumps(answers))
    return out


def _answer_a(n: int, body: dict[str, Any]) -> Any:
    """Every call answers option A with High confidence (whatever the schema asks, A fits its enums)."""
    schema = json.dumps(body.get("response_format") or {})
    fields = {"answer": "A", "confidence": "High", "reasoning": "r", "ranking": ["A", "B", "C", "D"],
              "difficulty": "basic", "rationale": "r"}
    wanted = {k: v for k, v in fields.items() if f'"{k}"' in schema} or {"answer": "A"}
    return 200, {}, completion(json.dumps(wanted), prompt_tokens=50, completion_tokens=5)


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    data = write_medagentsbench(tmp_path / "data", n_test=24, folders=("medqa", "pubmedqa"))
    return data, _published(data, tmp_path / "output", ("medqa", "pubmedqa"))


def _args(data: Path, output: Path, server: FakeOpenAI, out: Path, *more: str) -> list[str]:
    return ["reproduce", "medagentsbench", "--data-dir", str(data), "--published", str(output), "--datasets",
            "medqa,pubmedqa", "--rows", "Zero-Shot;CoT", "--model", "openai/gpt-4o", "--api-base", server.api_base,
            "--no-cache", "--out", str(out), *more]


def test_published_rows_equal_the_files_and_each_measured_row_is_tested_against_each(inputs, tmp_path, capsys):
    data, output = inputs
    with FakeOpenAI(_answer_a) as server:
        assert main(_args(data, output, server, tmp_path / "r", "--json")) == 0
        calls = len(server.requests)
    table = json.loads((tmp_path / "r" / "table.json").read_text())
    published = [r for r in table["rows"] if r["source"].startswith("published")]
    measured = [r for r in table["rows"] if r["source"] == "measured"]
    assert len(published) == 2 * len(METHODS) and len(measured) == 2 * 2
    for row in published:  # equal to a count from the files
        answers = json.loads((output / row["dataset"] / f"gpt-4o-{row['dataset']}-test_hard-{row['row']}.json")
                             .read_text())
        assert row["n"] == len(answers) == 6
        assert row["accuracy"] == sum(a["predicted_answer"] == a["answer_idx"] for a in answers) / 6
        assert row["tokens_per_question"] == (None if row["row"] == "aflow" else answers[0]["token_usage"]
                                              ["prompt_tokens"] + 10)
    zero = next(r for r in measured if (r["row"], r["dataset"]) == ("Zero-Shot", "medqa"))
    assert zero["n"] == 6 and zero["corresponds_to"] == "zero_shot" and zero["calls_per_question"] == 1
    assert calls == sum(r["calls_per_question"] * r["n"] for r in measured)
    assert len(table["tests"]) == len(measured) * len(METHODS)  # one paired test per pair
    gold = {json.loads(line)["realidx"]: json.loads(line)["answer_idx"]
            for line in (data / "medqa" / "test_hard.jsonl").read_text().splitlines()}
    ours = {i: gold[i] == "A" for i in gold}
    for test in (t for t in table["tests"] if (t["row"], t["dataset"]) == ("Zero-Shot", "medqa")):
        k = METHODS.index(test["published"])
        theirs = {r: bool((i + k) % 3) for i, r in enumerate(gold)}
        assert (test["b"], test["c"]) == (sum(ours[q] and not theirs[q] for q in gold),
                                          sum(theirs[q] and not ours[q] for q in gold))
    assert "| Zero-Shot | measured | 6 |" in (tmp_path / "r" / "table.md").read_text()


def test_the_dry_run_sends_nothing_and_a_missing_folder_is_refused(inputs, tmp_path, capsys):
    data, output = inputs
    with FakeOpenAI(_answer_a) as server:
        assert main([*_args(data, output, server, tmp_path / "r"), "--dry-run"]) == 0
        assert server.requests == []
    said = capsys.readouterr()
    assert "medqa test_hard Zero-Shot, 6 questions" in said.out + said.err
    assert "pubmedqa test_hard CoT, 6 questions" in said.out + said.err
    with FakeOpenAI(_answer_a) as server:
        assert main([a for a in _args(data, output, server, tmp_path / "r2") if a not in ("--published", str(output))
                     ]) != 0
        assert server.requests == []
    assert "--published DIR" in capsys.readouterr().err


def test_a_killed_table_resumes_to_the_same_table(inputs, tmp_path):
    data, output = inputs
    slow_after = 5

    def slow(n: int, body: dict[str, Any]) -> Any:
        if n >= slow_after:
            time.sleep(0.5)
        return _answer_a(n, body)

    with FakeOpenAI(slow) as server:
        args = [sys.executable, "-m", "teammed", *_args(data, output, server, tmp_path / "r")]
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while len(server.requests) < slow_after + 2 and time.time() < deadline:
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        first = len(server.requests)
        assert first < 24  # killed midway
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        resumed = len(server.requests) - first
    with FakeOpenAI(_answer_a) as server:
        assert main(_args(data, output, server, tmp_path / "fresh")) == 0
    assert resumed < 24  # the finished cells were not run again
    strip = lambda t: {k: v for k, v in t.items() if k != "settings"}  # noqa: E731
    again = json.loads((tmp_path / "r" / "table.json").read_text())
    fresh = json.loads((tmp_path / "fresh" / "table.json").read_text())
    assert strip(again)["tests"] == strip(fresh)["tests"]
    assert [r["accuracy"] for r in again["rows"]] == [r["accuracy"] for r in fresh["rows"]]
