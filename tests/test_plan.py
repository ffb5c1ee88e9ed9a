"""A price before spending: ``--dry-run`` and `teammed.experiments.plan` send no request, write nothing,
and count the prompts the real run sends with the model's tokenizer."""

from __future__ import annotations

import json

import pytest

from teammed import experiments as ex
from teammed.cli import main
from teammed.estimate import estimate_program, prices_for
from tests.fake_openai import FakeOpenAI, completion
from tests.schema_fake import handler


def _counting(server_tokens: list[int]):
    """The schema-filling fake server, billing prompt tokens as litellm's counter counts the messages."""
    import litellm

    def answer(n, body):
        status, headers, payload = handler(n, body)
        tokens = litellm.token_counter(model="gpt-4o", messages=body["messages"])
        server_tokens.append(tokens)
        return status, headers, payload

    return answer


def test_a_dry_run_sends_no_request_and_writes_nothing(tmp_path, capsys):
    with FakeOpenAI(lambda n, body: (200, {}, completion("{}"))) as server:
        for argv in (["run", "--dataset", "demo", "--n", "3", "--preset", "all", "--out", str(tmp_path / "run")],
                     ["compile", "--dataset", "demo", "--optimizer", "bootstrap", "--train", "2", "--val", "2",
                      "--test", "2", "--out", str(tmp_path / "p.json")],
                     ["search", "--dataset", "demo", "--n", "4", "--trials", "3", "--out", str(tmp_path / "sets")],
                     ["tune", "--dataset", "demo", "--budget", "calls=5000", "--optimizer", "none", "--batch-size", "2",
                      "--out", str(tmp_path / "tune")],
                     ["reproduce", "001-table1", "--datasets", "demo", "--n", "3", "--seeds", "1",
                      "--rows", "Zero-Shot;Leadership", "--out", str(tmp_path / "rep")]):
            code = main([*argv, "--model", "openai/fake", "--api-base", server.api_base, "--no-cache", "--dry-run",
                         "--json"])
            captured = capsys.readouterr()
            assert code == 0, captured.err
            document = json.loads(captured.out)
            assert document["calls"] > 0 and document["prompt_tokens"] > document["calls"] * 50, argv[0]
            assert document["completion_tokens"] > 0 and document["usd"] is None, argv[0]
            assert "self-hosted" in document["price_note"]
        assert server.requests == []
    assert list(tmp_path.iterdir()) == []  # nothing written, not even a directory


def test_the_estimate_makes_the_programs_calls_and_counts_its_prompts_as_the_server_does(tmp_path, monkeypatch):
    """Against a server that bills prompts with the same tokenizer and answers in a few words (the stand-in
    told to answer as briefly): the calls are equal, the prompt tokens within 10%."""
    import teammed.estimate

    monkeypatch.setattr(teammed.estimate, "ANSWER_TOKENS", {})
    monkeypatch.setattr(teammed.estimate, "DEFAULT_ANSWER_TOKENS", 6)
    billed: list[int] = []
    with FakeOpenAI(_counting(billed)) as server:
        for preset in ("base", "all"):
            billed.clear()
            spec = ex.RunSpec(data="demo", team=ex.TeamSpec(preset=preset, n_agents=3), n=4,
                              backend=ex.BackendSpec(model="openai/fake", api_base=server.api_base, cache=False),
                              out=tmp_path / preset)
            plan = ex.plan(spec)
            ex.run(spec)
            assert plan.calls == len(billed), preset
            assert plan.prompt_tokens == pytest.approx(sum(billed), rel=0.10), preset


def test_a_priced_model_is_priced_at_litellm_s_prices_and_own_backends_are_not():
    from teammed.config import preset
    from teammed.data import load_dataset
    from teammed.programs.teamwork import TeamworkProgram

    questions = load_dataset("demo")[:2]
    found = estimate_program(lambda: TeamworkProgram(preset("base")), questions, model="gpt-4o-mini")
    (per_prompt, per_answer), why = prices_for("gpt-4o-mini", None)
    assert why is None and found.usd == pytest.approx(found.prompt_tokens * per_prompt
                                                      + found.completion_tokens * per_answer)
    assert "gpt-4o-mini" in found.tokenizer
    for model, api_base, note in (("local", None, "teammed's own backend"), ("scripted", None, "own backend"),
                                  ("openai/x", "http://127.0.0.1:1/v1", "self-hosted")):
        price, why = prices_for(model, api_base)
        assert price is None and note in why
    assert prices_for("openai/no-such-model-anywhere", None)[1].startswith("litellm's price list has no price")


def test_plan_refuses_what_it_cannot_price():
    from teammed.errors import ConfigError

    with pytest.raises(ConfigError, match="prices run, compile, search, tune and reproduce"):
        ex.plan(ex.ReportSpec(dirs=("runs",)))
    with pytest.raises(ConfigError, match="no questions"):
        from teammed.programs.peers import build_system

        estimate_program(lambda: build_system("zero_shot"), [], model="gpt-4o")


def test_the_estimate_runs_every_system():
    from teammed.data import load_dataset
    from teammed.programs.peers import SYSTEMS, build_system

    questions = load_dataset("demo")[:1]
    for name in SYSTEMS:
        found = estimate_program(lambda name=name: build_system(name), questions, model="gpt-4o")
        assert found.calls >= 1 and found.prompt_tokens > 0, name
