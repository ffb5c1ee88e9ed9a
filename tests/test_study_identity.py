"""A study never answers for another model or server (issue 47, item 1): search, tune and reproduce record the
model and server their answers came from, and refuse to resume a study measured on another."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from teammed.cli import main
from tests.fake_openai import FakeOpenAI, completion


def _answers(n: int, body: dict[str, Any]) -> Any:
    schema = json.dumps(body.get("response_format") or {})
    fields = {"answer": "A", "confidence": "High", "reasoning": "r", "ranking": ["A", "B", "C", "D"], "n_agents": 2,
              "reason": "r", "message": "m", "rationale": "r", "facts": ["f"], "analysis": "a", "synthesis": "s"}
    return 200, {}, completion(json.dumps({k: v for k, v in fields.items() if f'"{k}"' in schema}))


def _search(server: FakeOpenAI, tmp_path: Path, out: str, *, model: str = "openai/fake") -> list[str]:
    return ["search", "--dataset", "demo", "--n", "4", "--trials", "2", "--model", model, "--api-base",
            server.api_base, "--no-cache", "--storage", f"sqlite:///{tmp_path / 'study.db'}", "--study", "shared",
            "--out", str(tmp_path / out), "--sampler", "brute"]


def test_a_search_of_another_server_under_one_model_name_never_reuses_the_first_ones_trials(tmp_path, capsys):
    with FakeOpenAI(_answers) as first, FakeOpenAI(_answers) as second:
        assert main(_search(first, tmp_path, "one")) == 0
        assert first.requests
        capsys.readouterr()
        assert main(_search(second, tmp_path, "two")) != 0  # the same study name, the same storage
        said = capsys.readouterr().err
        assert "differ in measured_on" in said and second.requests == []
    [special] = (tmp_path / "one").glob("*.json")
    measured_on = json.loads(special.read_text())["measured_on"]
    assert measured_on.startswith("openai/fake @ ") and first.api_base in measured_on


def test_a_search_of_another_model_on_one_server_is_refused_too(tmp_path, capsys):
    with FakeOpenAI(_answers) as server:
        assert main(_search(server, tmp_path, "one")) == 0
        before = len(server.requests)
        capsys.readouterr()
        assert main(_search(server, tmp_path, "two", model="openai/other")) != 0
        assert len(server.requests) == before and "measured_on" in capsys.readouterr().err


@pytest.mark.parametrize("secret", ["PW-search"])
def test_the_recorded_server_masks_its_password(tmp_path, secret, capsys):
    with FakeOpenAI(_answers) as server:
        base = server.api_base.replace("http://", f"http://user:{secret}@")
        args = _search(server, tmp_path, "one")
        args[args.index("--api-base") + 1] = base
        assert main(args) == 0
    [special] = (tmp_path / "one").glob("*.json")
    assert "user:***@" in json.loads(special.read_text())["measured_on"]
    written = " ".join(p.read_text(errors="replace") for p in (tmp_path / "one").rglob("*") if p.is_file()
                       and p.suffix in (".json", ".md"))
    assert secret not in written and secret not in capsys.readouterr().err
