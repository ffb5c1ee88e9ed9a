"""A dry run prices every branch (issue 45, item 1): where a system's path depends on the model's answers the
plan gives the cheapest and the dearest path and an expectation, and says what its single figure assumes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from teammed import experiments as ex
from teammed.cli import main
from tests.fake_openai import FakeOpenAI, completion


def _last_choices(n: int, body: dict[str, Any]) -> Any:
    """Every choice answered with its last option and every yes/no with no: the dearest routes of MDAgents
    (advanced) and of the adaptive system (Low confidence: escalate)."""
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or \
        (body.get("response_format") or {}).get("schema") or {}
    import random

    from teammed.backends.scripted import schema_example
    from teammed.estimate import make_choices  # the stand-in's own rule, so the test prices what the server answers

    return 200, {}, completion(json.dumps(make_choices(schema, schema_example(schema), "last", random.Random(0))))


def _plan(system: str, server: FakeOpenAI | None = None, **team: Any) -> ex.Plan:
    backend = {"model": "openai/fake", "api_base": server.api_base} if server else "scripted"
    return ex.plan(ex.RunSpec(data="demo", n=3, team={"system": system, **team}, backend=backend))


@pytest.mark.parametrize("system", ["mdagents", "adaptive", "kamac", "consultation"])
def test_a_routed_system_is_priced_over_its_paths(system: str) -> None:
    [part] = _plan(system).parts
    assert part.low is not None and part.high is not None and part.expected is not None
    assert part.paths and part.low[0] < part.high[0]
    assert part.low[1] <= part.expected[1] <= part.high[1]
    assert "expected with each option of each choice equally likely" in _plan(system).text()
    assert "range, assuming nothing of the model" in _plan(system).text()


def test_a_system_with_one_path_says_so() -> None:
    plan = _plan("zero_shot")
    [part] = plan.parts
    assert not part.paths and "one path" in plan.text() and "answer lengths:" in plan.text()


@pytest.mark.parametrize("system", ["mdagents", "adaptive"])
def test_what_a_server_answering_the_dearest_way_bills_lies_in_the_range(system: str, tmp_path) -> None:
    with FakeOpenAI(_last_choices) as server:
        [part] = _plan(system, server).parts
        assert main(["run", "--dataset", "demo", "--n", "3", "--system", system, "--model", "openai/fake",
                     "--api-base", server.api_base, "--no-cache", "--out", str(tmp_path / "r")]) == 0
        billed = len(server.requests)
    assert part.low is not None and part.high is not None
    assert part.low[0] <= billed <= part.high[0], (part.low, part.high, billed)
    assert part.low[0] < part.calls  # the figure is the expectation, not the cheapest path


def _server_answering(body: dict[str, Any]) -> Any:
    """Every request answered with a schema-valid JSON of ten-word texts, its choices drawn by the request."""
    import random

    from teammed.backends.scripted import schema_example
    from teammed.estimate import make_choices

    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or \
        (body.get("response_format") or {}).get("schema") or {}
    rng = random.Random(json.dumps(body.get("messages"), sort_keys=True))
    value = make_choices(schema, schema_example(schema), "uniform", rng)
    text = json.dumps(value).replace('"noted"', '"' + " ".join(["finding"] * 10) + '"')
    return 200, {}, completion(text)


@pytest.mark.parametrize("system", ["zero_shot", "mdagents"])
def test_a_pilot_runs_k_questions_for_real_and_prices_from_what_they_measured(system: str, tmp_path, caplog) -> None:
    """``plan(spec, pilot=K)``: K questions sent and billed (said before they start), each behaviour's
    measured answer length used, the pilot's cost a line of its own, its answers kept in the response cache."""
    with FakeOpenAI(lambda n, body: _server_answering(body)) as server:
        spec = ex.RunSpec(data="demo", n=6, team={"system": system},
                          backend={"model": "openai/fake", "api_base": server.api_base, "cache_dir": str(tmp_path)})
        plain = ex.plan(spec)
        assert len(server.requests) == 0
        with caplog.at_level("WARNING"):
            piloted = ex.plan(spec, pilot=2)
        sent = len(server.requests)
        assert "are sent to openai/fake for real and billed" in caplog.text
        assert piloted.pilot is not None and piloted.pilot.questions == 2 and piloted.pilot.calls == sent > 0
        assert piloted.pilot.cached and "the run reads them instead of paying again" in piloted.text()
        assert "measured by the pilot" in piloted.text() and "ANSWER_TOKENS), whatever the model" not in piloted.text()
        assert all(v > 0 for v in piloted.pilot.lengths.values())
        asked = {json.dumps(r["messages"], sort_keys=True) for r in server.requests}
        ex.run(spec.model_copy(update={"out": tmp_path / "run"}))
        again = [r for r in server.requests[sent:] if json.dumps(r["messages"], sort_keys=True) in asked]
        assert len(server.requests) > sent and again == []  # the pilot's answers are read from the cache
    [part], [before] = piloted.parts, plain.parts
    if system == "zero_shot":  # one path: measured lengths, no share
        assert part.share is None and part.calls == before.calls
        assert part.completion_tokens != before.completion_tokens
    else:
        assert part.share is not None and part.interval is not None
        assert 0 <= part.share[1] <= part.share[0] <= part.share[2] <= 1
        assert part.interval[0] <= part.prompt_tokens + part.completion_tokens <= part.interval[1]


def test_a_pilot_is_refused_without_a_dry_run_and_below_one_question(capsys) -> None:
    with pytest.raises(SystemExit, match="2"):
        main(["run", "--dataset", "demo", "--model", "scripted", "--pilot", "2"])
    assert "--pilot prices the command before it runs: add --dry-run" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="2"):
        main(["run", "--dataset", "demo", "--model", "scripted", "--dry-run", "--pilot", "0"])
    assert "argument --pilot: must be at least 1 (got 0)" in capsys.readouterr().err
    with pytest.raises(Exception, match="at least 1 question"):
        ex.plan(ex.RunSpec(data="demo", n=2, backend="scripted"), pilot=0)


def test_share_interval_is_exact_and_clipped() -> None:
    from teammed.experiments.pilot import share_interval

    mean, low, high = share_interval([100, 100, 100], 100, 200)
    assert (mean, low) == (0.0, 0.0) and 0.70 < high < 0.71  # Clopper-Pearson 97.5% upper of 0 of 3
    mean, low, high = share_interval([300, 150], 100, 200)  # clipped to 1 and 0.5
    assert mean == 0.75 and low > 0 and high == 1.0


def test_the_billing_stand_in_answers_as_a_server_held_to_the_schema_would() -> None:
    """The tune's dry run answers (`billing_stand_in`) as a server does: a ranking is a permutation (not the
    options' order, which made the team answer the first option on every question), a team's size is drawn
    like any choice, a request that differs only in its temperature is sampled anew (a bootstrap's retries), and
    each free text stays within its maxLength (a longer one was cut and repaired, and its demo dropped)."""
    from teammed.backends.scripted import ScriptedCall
    from teammed.estimate import billing_stand_in

    lm = billing_stand_in(model="openai/gpt-4o-mini", api_base=None, max_tokens=512, lengths=2000.0)
    schema = {"title": "FinalRanking", "type": "object", "properties": {
        "ranking": {"type": "array", "items": {"enum": ["A", "B", "C", "D"]}},
        "n_agents": {"enum": [2, 3, 4]},
        "rationale": {"type": "string", "maxLength": 300}}}

    def answer(temperature: float, question: int) -> dict[str, Any]:
        messages = [{"role": "user", "content": f"question {question}"}]
        return lm.responder(ScriptedCall("FinalRanking", {}, schema, messages, {"temperature": temperature}))

    answers = [answer(0.0, q) for q in range(40)]
    assert {a["ranking"][0] for a in answers} == {"A", "B", "C", "D"}
    assert all(sorted(a["ranking"]) == ["A", "B", "C", "D"] for a in answers)
    assert {a["n_agents"] for a in answers} == {2, 3, 4}
    assert all(0 < len(a["rationale"]) <= 300 for a in answers)
    assert answer(0.0, 1) == answer(0.0, 1)  # seeded by the request: a figure never depends on thread order
    assert any(answer(1.0, q)["ranking"] != answer(0.0, q)["ranking"] for q in range(5))
