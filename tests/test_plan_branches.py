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
    assert part.branches and part.low[0] < part.high[0]
    assert part.low[1] <= part.expected[1] <= part.high[1]
    assert "the figure takes each choice's first option" in _plan(system).text()


def test_a_system_with_one_path_says_so() -> None:
    plan = _plan("zero_shot")
    [part] = plan.parts
    assert not part.branches and "one path" in plan.text() and "answer lengths:" in plan.text()


@pytest.mark.parametrize("system", ["mdagents", "adaptive"])
def test_what_a_server_answering_the_dearest_way_bills_lies_in_the_range(system: str, tmp_path) -> None:
    with FakeOpenAI(_last_choices) as server:
        [part] = _plan(system, server).parts
        assert main(["run", "--dataset", "demo", "--n", "3", "--system", system, "--model", "openai/fake",
                     "--api-base", server.api_base, "--no-cache", "--out", str(tmp_path / "r")]) == 0
        billed = len(server.requests)
    assert part.low is not None and part.high is not None
    assert part.low[0] <= billed <= part.high[0], (part.low, part.high, billed)
    assert billed > part.calls  # the figure alone (each choice's first option) would have been too low
