"""Runs that describe themselves (issue 22 item 2) and ``--temperature`` (issue 18 item 5).

Two deployments on two fake OpenAI-compatible servers: every row names the deployment(s) that
answered it (model string and redacted api_base), ``run.json`` records temperature, max_tokens, the
dialect each deployment ended on and a hash of the program's prompts, ``report`` splits rows whose
answering models differ, ``--temperature`` reaches the server and a ``--resume`` with another
temperature is refused, naming it.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from teammed.cli import main
from teammed.evals._runs import group_runs, load_run
from teammed.records import RunIdentity, load_row
from tests import schema_fake
from tests.fake_openai import FakeOpenAI

XGRAMMAR = {"object": "error", "message": "The provided JSON schema contains features not supported by xgrammar.",
            "type": "BadRequestError", "param": None, "code": 400}


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def _rows(out: Path) -> list:
    return [load_row(json.loads(line)) for line in (out / "results.jsonl").read_text().splitlines()]


def _deployments_file(tmp_path: Path, entries: list[tuple[str, str, str]]) -> Path:
    path = tmp_path / "deployments.yaml"
    path.write_text(json.dumps({"model_list": [
        {"model_name": name, "litellm_params": {"model": model, "api_base": base}} for name, model, base in entries]}))
    return path


def _run(out: Path, *extra: str, n: int = 4) -> int:
    return main(["run", "--dataset", "demo", "--n", str(n), "--n-agents", "2", "--out", str(out), "--no-cache",
                 "--retry-base", "0.01", "--retry-cap", "0.05", *extra])


def _refuse_json_schema(n, request):
    """A server (vLLM with xgrammar) that refuses json_schema: its deployment degrades."""
    if (request.get("response_format") or {}).get("type") == "json_schema":
        return 400, {}, XGRAMMAR
    return schema_fake.handler(n, request)


def test_each_row_names_the_deployment_that_answered_and_run_json_describes_the_run(tmp_path):
    out = tmp_path / "run"
    with FakeOpenAI(schema_fake.handler) as a, FakeOpenAI(_refuse_json_schema) as b:
        path = _deployments_file(tmp_path, [("a", "openai/fake-a", a.api_base), ("b", "openai/fake-b", b.api_base)])
        code = _run(out, "--deployments", str(path), "--max-tokens", "300", "--temperature", "0.5")
    assert code == 0
    rows = _rows(out)
    assert len(rows) == 4
    served = {"a": ("openai/fake-a", a.api_base), "b": ("openai/fake-b", b.api_base)}
    for row in rows:  # round-robin: each question goes to one model_name, each of its calls to that server
        model, base = served[row.deployment.split()[0]]
        assert row.answered_by == [{"model": model, "api_base": base, "calls": row.calls}], row.answered_by
        assert row.answered_models == model
    assert {row.deployment.split()[0] for row in rows} == {"a", "b"}
    # every request reached its server with the temperature asked for
    assert {r.get("temperature") for r in a.requests + b.requests} == {0.5}
    assert {r.get("max_tokens") for r in a.requests + b.requests} == {300}

    manifest = json.loads((out / "run.json").read_text())
    assert manifest["temperature"] == 0.5 == manifest["identity"]["temperature"]
    assert manifest["max_tokens"] == 300
    assert len(manifest["prompt_sha256"]) == 64
    backends = {entry["deployment"].split()[0]: entry for entry in manifest["backends"]}
    assert backends["a"]["structured_output"] == "json_schema" and backends["a"]["degradations"] == []
    # b refused json_schema: run.json holds the dialect it ended on, and the step that led there
    last = (b.requests[-1].get("response_format") or {}).get("type")
    assert backends["b"]["structured_output"] not in ("json_schema", "json_schema_strict")
    assert backends["b"]["degradations"][0][0] == "json_schema" and last != "json_schema"
    assert backends["b"]["members"] == [{"model": "openai/fake-b", "api_base": b.api_base}]
    assert all(entry["temperature"] == 0.5 and entry["max_tokens"] == 300 for entry in backends.values())

    # the report never averages the two answering models as one system
    groups = group_runs([load_run(out)])
    assert len(groups) == 2
    assert sorted(len(g.rows) for g in groups) == [2, 2]
    names = sorted(g.config for g in groups)
    assert "openai/fake-a" in names[0] and "openai/fake-b" in names[1], names


def test_a_router_spreading_calls_names_every_deployment_per_call(tmp_path):
    """One model_name over two servers: the Router picks per call; each row lists the distinct
    deployments that answered, with their calls, and the counts add up to what each server got."""
    out = tmp_path / "run"
    with FakeOpenAI(schema_fake.handler) as a, FakeOpenAI(schema_fake.handler) as b:
        path = _deployments_file(tmp_path, [("team", "openai/fake-a", a.api_base),
                                            ("team", "openai/fake-b", b.api_base)])
        code = _run(out, "--deployments", str(path), n=3)
    assert code == 0
    rows = _rows(out)
    per_server: Counter = Counter()
    for row in rows:
        assert sum(d["calls"] for d in row.answered_by) == row.calls
        assert len({(d["model"], d["api_base"]) for d in row.answered_by}) == len(row.answered_by)
        for d in row.answered_by:
            assert (d["model"], d["api_base"]) in {("openai/fake-a", a.api_base), ("openai/fake-b", b.api_base)}
            per_server[d["api_base"]] += d["calls"]
    assert per_server[a.api_base] == len(a.requests) and per_server[b.api_base] == len(b.requests)
    assert len(a.requests) and len(b.requests)  # the Router used both
    assert {r.get("temperature") for r in a.requests + b.requests} == {0.0}  # the default stays 0
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["temperature"] == 0.0 and manifest["max_tokens"] == 512
    assert {m["model"] for m in manifest["backends"][0]["members"]} == {"openai/fake-a", "openai/fake-b"}


def test_temperature_reaches_the_server_request_body(tmp_path):
    with FakeOpenAI(schema_fake.handler) as server:
        code = _run(tmp_path / "run", "--model", "openai/fake", "--api-base", server.api_base, "--temperature",
                    "0.5", n=1)
    assert code == 0
    assert server.requests and {r.get("temperature") for r in server.requests} == {0.5}
    row = _rows(tmp_path / "run")[0]
    assert row.answered_by == [{"model": "openai/fake", "api_base": server.api_base, "calls": row.calls}]


def test_resume_with_another_temperature_is_refused_naming_it(tmp_path, capsys):
    out = tmp_path / "run"
    assert _run(out, "--model", "scripted", n=2) == 0
    assert json.loads((out / "run.json").read_text())["identity"]["temperature"] == 0.0
    capsys.readouterr()
    code = _run(out, "--model", "scripted", "--resume", "--temperature", "0.5", n=2)
    err = capsys.readouterr().err
    assert code != 0
    assert "--resume refused" in err and "temperature: 0.0 (run) vs 0.5 (now)" in err


def test_an_older_run_json_without_temperature_loads_and_resumes_at_the_default(tmp_path):
    out = tmp_path / "run"
    assert _run(out, "--model", "scripted", n=2) == 0
    manifest = json.loads((out / "run.json").read_text())
    for key in ("temperature", "backends", "max_tokens", "prompt_sha256"):
        manifest.pop(key, None)
    del manifest["identity"]["temperature"]
    (out / "run.json").write_text(json.dumps(manifest))
    assert RunIdentity.model_validate(manifest["identity"]).temperature == 0.0
    assert _run(out, "--model", "scripted", "--resume", n=2) == 0


def test_rows_written_before_answered_by_still_load():
    row = load_row({"schema_version": 2, "id": "q1", "gold": "A", "prediction": "A", "correct": True})
    assert row.answered_by == [] and row.answered_models is None
    assert load_row({"schema_version": 2, "id": "q1", "answered_by": None}).answered_by == []


def test_the_prompt_hash_changes_with_the_prompts_and_not_otherwise(tmp_path):
    from teammed.config import preset
    from teammed.programs.teamwork import TeamworkProgram
    from teammed.records import prompt_digest

    first, second = TeamworkProgram(preset("base")), TeamworkProgram(preset("base"))
    assert prompt_digest(first) == prompt_digest(second)
    predictor = first.named_predictors()[0][1]
    predictor.signature = predictor.signature.with_instructions("Something else entirely.")
    assert prompt_digest(first) != prompt_digest(second)


def _one_group(tmp_path: Path, server: FakeOpenAI, *params: dict) -> Path:
    path = tmp_path / "deployments.yaml"
    path.write_text(json.dumps({"model_list": [{"model_name": "team", "litellm_params": {
        "model": "openai/fake", "api_base": server.api_base, **extra}} for extra in params]}))
    return path


def test_a_deployments_own_temperature_is_never_overridden_by_the_default(tmp_path):
    with FakeOpenAI(schema_fake.handler) as server:
        deployments = _one_group(tmp_path, server, {"temperature": 0.7, "max_tokens": 333})
        assert main(["run", "--dataset", "demo", "--n", "1", "--n-agents", "2", "--deployments", str(deployments),
                     "--out", str(tmp_path / "run"), "--no-cache"]) == 0
    assert server.requests
    assert {(b["temperature"], b["max_tokens"]) for b in server.requests} == {(0.7, 333)}


@pytest.mark.parametrize("params, flags, words", [
    (({"temperature": 0.7},), ["--temperature", "0.2"], "--temperature 0.2 was given"),
    (({"temperature": 0.7}, {"temperature": 0.1}), [], "set different temperature"),
])
def test_conflicting_temperatures_are_refused_before_any_call(tmp_path, capsys, params, flags, words):
    with FakeOpenAI(schema_fake.handler) as server:
        deployments = _one_group(tmp_path, server, *params)
        code = main(["run", "--dataset", "demo", "--n", "1", "--n-agents", "2", "--deployments", str(deployments),
                     "--out", str(tmp_path / "run"), "--no-cache", *flags])
    assert code == 2 and words in capsys.readouterr().err
    assert not server.requests
