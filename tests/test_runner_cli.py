"""Runs end to end through the CLI with the dry-run backend: files, resume, kill -9, errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from teammed.cli import main
from teammed.config import TeamworkConfig
from teammed.programs.accounting import expected_calls

ROW_KEYS = {"id", "gold", "prediction", "correct", "confidence", "calls", "prompt_tokens", "completion_tokens",
            "latency_s", "n_agents", "roles", "trust", "config", "transcript", "error"}


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_run_writes_results_summary_and_manifest(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", "--dataset", "demo", "--n", "4", "--seed", "111", "--preset", "all", "--n-agents", "3",
                 "--model", "scripted", "--out", str(out)])
    assert code == 0
    rows = _rows(out)
    assert len(rows) == 4 and all(ROW_KEYS <= set(r) for r in rows)
    config = TeamworkConfig(**rows[0]["config"])
    for r in rows:  # the README's formula, row by row
        assert r["calls"] == expected_calls(config, 3, tie=bool(r["record"]["tie"] and config.leadership))
        assert r["prediction"] in r["options"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 4 and summary["n_failed"] == 0 and "accuracy" in summary
    assert summary["calls"] == sum(r["calls"] for r in rows)
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["packages"]["dspy"] and manifest["sampling"]["seed"] == 111
    assert "accuracy" in capsys.readouterr().out


def test_existing_run_needs_resume(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["run", "--dataset", "demo", "--n", "2", "--model", "scripted", "--out", str(out), "--n-agents", "2"]
    assert main(args) == 0
    assert main(args) == 2
    assert "--resume" in capsys.readouterr().err
    assert main([*args, "--resume"]) == 0
    assert len(_rows(out)) == 2


def test_bad_config_is_a_clear_error(tmp_path, capsys):
    code = main(["run", "--dataset", "demo", "--components", "mm", "--model", "scripted", "--out", str(tmp_path)])
    assert code == 2
    assert "mutual_monitoring requires leadership" in capsys.readouterr().err


def test_unknown_dataset_suggests(tmp_path, capsys):
    assert main(["run", "--dataset", "dmeo", "--model", "scripted", "--out", str(tmp_path)]) == 2
    assert "demo" in capsys.readouterr().err


def test_grid_of_seeds_and_presets(tmp_path):
    out = tmp_path / "grid"
    assert main(["run", "--dataset", "demo", "--n", "2", "--seeds", "111,222", "--presets", "base,trust",
                 "--n-agents", "2", "--model", "scripted", "--out", str(out)]) == 0
    found = sorted(p.parent.relative_to(out).as_posix() for p in out.rglob("results.jsonl"))
    assert found == ["base/seed111", "base/seed222", "trust/seed111", "trust/seed222"]


def test_kill_9_then_resume_keeps_every_question_exactly_once(tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "teammed.cli", "run", "--dataset", "demo", "--n", "12", "--n-agents", "2",
               "--model", "scripted:0.03", "--concurrency", "2", "--out", str(out)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = out / "results.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and (not results.exists() or len(results.read_text().splitlines()) < 3):
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    done_before = len(_rows(out))
    assert 3 <= done_before < 12
    subprocess.run([*command, "--resume"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ids = [r["id"] for r in _rows(out)]
    assert len(ids) == 12 and len(set(ids)) == 12


def test_ask_prints_answer_and_transcript(capsys):
    code = main(["ask", "Most likely diagnosis?", "--option", "A=MI", "--option", "B=PE", "--preset", "all",
                 "--n-agents", "2", "--model", "scripted"])
    assert code == 0
    text = capsys.readouterr().out
    for expected in ("Phase 1", "Phase 2", "mutual monitoring", "Trust over the deliberation", "Answer: ", "Vote"):
        assert expected in text


@pytest.mark.parametrize("bad", [["--option", "A"], ["--option", "A="]])
def test_ask_rejects_malformed_options(bad, capsys):
    assert main(["ask", "q?", *bad, "--model", "scripted"]) == 2


def test_search_writes_special_set_that_run_accepts(tmp_path):
    out = tmp_path / "special_sets"
    assert main(["search", "--dataset", "demo", "--n", "3", "--trials", "2", "--sampler", "brute",
                 "--model", "scripted", "--out", str(out)]) == 0
    (path,) = out.glob("demo-*.json")  # named by data set name + content hash
    special = json.loads(path.read_text())
    assert special["trials"]["complete"] == 2 and "config" in special
    assert main(["run", "--dataset", "demo", "--n", "2", "--config", str(path), "--model", "scripted",
                 "--out", str(tmp_path / "run")]) == 0
    assert _rows(tmp_path / "run")[0]["config"] == special["config"]


def test_compile_then_run_program_and_refuse_other_config(tmp_path, capsys):
    program = tmp_path / "prog.json"
    assert main(["compile", "--dataset", "demo", "--optimizer", "labeled", "--train", "3", "--val", "1", "--test",
                 "2", "--preset", "leadership", "--n-agents", "2", "--model", "scripted", "--out", str(program)]) == 0
    assert main(["run", "--dataset", "demo", "--n", "2", "--program", str(program), "--model", "scripted",
                 "--out", str(tmp_path / "run")]) == 0
    label = _rows(tmp_path / "run")[0]["label"]  # compiled runs never merge with uncompiled ones
    assert label.startswith("leadership+compiled-") and label != "leadership"
    assert main(["run", "--dataset", "demo", "--n", "2", "--program", str(program), "--preset", "all",
                 "--model", "scripted", "--out", str(tmp_path / "run2")]) == 2
    assert "was compiled for [leadership]" in capsys.readouterr().err


def test_report_over_a_grid(tmp_path):
    grid = tmp_path / "grid"
    assert main(["run", "--dataset", "demo", "--n", "3", "--seeds", "111,222", "--presets", "base,leadership",
                 "--n-agents", "2", "--model", "scripted", "--out", str(grid)]) == 0
    assert main(["report", str(grid), "--baseline", "base", "--out", str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "±" in text and "McNemar" in text
    assert (tmp_path / "report" / "ablation.png").exists()


def test_few_shot_draws_examples_outside_the_sample(tmp_path):
    assert main(["run", "--dataset", "demo", "--n", "2", "--system", "zero_shot", "--model", "scripted",
                 "--out", str(tmp_path / "zero")]) == 0
    assert main(["run", "--dataset", "demo", "--n", "2", "--system", "few_shot", "--model", "scripted",
                 "--out", str(tmp_path / "few")]) == 0
    zero, few = _rows(tmp_path / "zero"), _rows(tmp_path / "few")
    assert {r["id"] for r in zero} == {r["id"] for r in few}
    assert all(f["prompt_tokens"] > z["prompt_tokens"] for z, f in zip(zero, few, strict=True))


def test_image_questions_need_a_vision_model(tmp_path, capsys):
    data = tmp_path / "vqa.jsonl"
    data.write_text(json.dumps({"question": "Is this carcinoma?", "options": {"A": "yes", "B": "no"},
                                "answer_idx": "A", "image": str(tmp_path / "slide.png")}) + "\n")
    assert main(["run", "--dataset", str(data), "--split", "all", "--model", "scripted",
                 "--out", str(tmp_path / "o")]) == 2
    assert "text-only model" in capsys.readouterr().err
