"""Property test (seeded random loop): a run against a fault-injecting OpenAI-compatible server on
loopback, killed with SIGKILL at random moments, with torn writes planted, then resumed.

For every mix: each question appears exactly once, every row is a valid option or failed with
its error, and the summary's counts equal the rows'.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from teammed.backends.scripted import schema_example

from .fake_openai import FakeOpenAI, completion

N_QUESTIONS = 10


def _faulty(seed: int):
    def handler(n: int, body: dict):
        rng = random.Random(f"{seed}:{n}")  # per request: independent of thread timing
        fault = rng.choices(["ok", "garbage", "500", "429", "slow", "bad_json_choice"], [5, 2, 1, 1, 1, 1])[0]
        if fault == "500":
            return 500, {}, {"error": {"message": "internal error", "type": "server_error"}}
        if fault == "429":
            return 429, {"retry-after": "0"}, {"error": {"message": "rate limited", "type": "rate_limit"}}
        if fault == "garbage":
            return 200, {}, completion("<html>the model went for a walk</html>")
        if fault == "slow":
            return rng.uniform(0.05, 0.3)
        fmt = body.get("response_format") or {}
        schema = fmt.get("json_schema", {}).get("schema") or fmt.get("schema") or {"properties": {}}
        answer = schema_example(schema)
        if isinstance(answer, dict) and "answer" in answer:
            letters = ["A", "B", "C", "D"]
            answer["answer"] = rng.choice(letters if fault == "ok" else ["Z", "maybe", ""])
        return 200, {}, completion(json.dumps(answer))
    return handler


def _data(path: Path, rng: random.Random) -> Path:
    lines = []
    for i in range(N_QUESTIONS):
        row = {"id": f"f{i:02d}", "question": f"Fault question {i}?",
               "options": {"A": "a", "B": "b", "C": "c", "D": "d"}}
        if rng.random() > 0.2:
            row["answer_idx"] = rng.choice("ABCD")
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n")
    return path


def _command(data: Path, out: Path, server: FakeOpenAI, *, resume: bool) -> list[str]:
    return [sys.executable, "-m", "teammed.cli", "run", "--dataset", str(data), "--split", "test",
            "--system", "zero_shot", "--model", "openai/fake", "--api-base", server.api_base, "--no-cache",
            "--concurrency", "2", "--retry-attempts", "2", "--retry-base", "0.01", "--retry-cap", "0.02",
            "--timeout", "5", "--max-consecutive-failures", "0", "--out", str(out),
            *(["--resume"] if resume else [])]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_faults_kills_and_torn_writes_keep_every_question_exactly_once(tmp_path, seed):
    rng = random.Random(seed)
    data = _data(tmp_path / "faults.jsonl", rng)
    out = tmp_path / "run"
    env = {**os.environ, "OPENAI_API_KEY": "sk-fake", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    results = out / "results.jsonl"
    with FakeOpenAI(_faulty(seed)) as server:
        for attempt in range(2):  # sessions killed at random moments, some leaving a torn line
            process = subprocess.Popen(_command(data, out, server, resume=attempt > 0), env=env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(2.5, 5.0))
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
            process.wait()
            if results.exists() and rng.random() < 0.6:
                with results.open("a") as sink:  # a torn write: half a row, no newline
                    sink.write('{"schema_version": 2, "id": "f0')
        final = subprocess.run(_command(data, out, server, resume=True), env=env, capture_output=True, text=True,
                               timeout=300)
    assert final.returncode == 0, final.stderr[-2000:]
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    ids = [r["id"] for r in rows]
    assert sorted(ids) == [f"f{i:02d}" for i in range(N_QUESTIONS)]  # each exactly once
    for r in rows:
        if r["failed"]:
            assert r["prediction"] is None and r["error"] and r["correct"] in (False, None)
        else:
            assert r["prediction"] in r["options"] and r["error"] is None
        assert (r["correct"] is None) == (r["gold"] is None)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == len(rows) and summary["complete"] is True
    assert summary["n_failed"] == sum(r["failed"] for r in rows)
    assert summary["n_unlabeled"] == sum(r["gold"] is None for r in rows)
    assert summary["calls"] == sum(r["calls"] for r in rows)
