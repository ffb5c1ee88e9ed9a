"""The litellm backend against a fake OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
import random

import dspy
import pytest

from teammed import usage
from teammed.adapter import SchemaAdapter, response_format_for
from teammed.backends.cache import ResponseCache
from teammed.backends.litellm_backend import LiteLLMBackend
from teammed.backends.resolve import Deployment
from teammed.backends.retry import RetryPolicy
from teammed.errors import BackendError
from teammed.records import RunIdentity
from teammed.runner import RunSettings, run_questions
from teammed.signatures import InitialAssessment
from teammed.types import Question
from tests.fake_openai import FakeOpenAI, completion

FAST = RetryPolicy(attempts=4, base_s=0.01, cap_s=0.05)
ANSWER = json.dumps({"ranking": ["B", "A"], "justification": "x", "facts": ["a", "b"], "confidence": "High"})


def _ask(lm: LiteLLMBackend) -> dspy.Prediction:
    with dspy.context(lm=lm, adapter=SchemaAdapter()):
        return dspy.Predict(InitialAssessment)(question="q?", options={"A": "a", "B": "b"}, role="r",
                                               shared_context="")


def test_retry_policy_by_hand():
    policy = RetryPolicy(base_s=60, cap_s=300)
    rng = random.Random(0)
    delays = [policy.delay(k, rng=rng) for k in range(5)]
    for k, delay in enumerate(delays):
        nominal = min(60 * 2**k, 300)
        assert 0.8 * nominal <= delay <= 1.2 * nominal
    assert policy.delay(0, retry_after=500, rng=rng) == 300  # Retry-After is capped by --retry-cap
    assert policy.delay(3, retry_after=1, rng=rng) >= 0.8 * 300
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)


def test_429_then_200_costs_only_time():
    def handler(n, body):
        if n <= 2:
            return 429, {"retry-after": "0.05"}, {"error": {"message": "slow down", "type": "rate_limit"}}
        return 200, {}, completion(ANSWER)

    with FakeOpenAI(handler) as server, usage.track() as used:
        lm = LiteLLMBackend("openai/fake", api_base=server.api_base, retry=FAST, api_key="k")
        out = _ask(lm)
    assert out.ranking == ["B", "A"] and out.confidence == "High"
    assert len(server.requests) == 3
    assert used.calls == 1 and used.retries == 2 and used.prompt_tokens == 11


@pytest.mark.parametrize("status", [500, 503])
def test_server_errors_are_retried(status):
    with FakeOpenAI(lambda n, b: (status, {}, {"error": {"message": "boom"}}) if n == 1 else
                    (200, {}, completion(ANSWER))) as server:
        out = _ask(LiteLLMBackend("openai/fake", api_base=server.api_base, retry=FAST, api_key="k"))
    assert out.ranking == ["B", "A"]
    assert len(server.requests) == 2


def test_timeout_is_retried():
    with FakeOpenAI(lambda n, b: 2.0 if n == 1 else (200, {}, completion(ANSWER))) as server:
        lm = LiteLLMBackend("openai/fake", api_base=server.api_base, retry=FAST, timeout_s=0.5, api_key="k")
        out = _ask(lm)
    assert out.ranking == ["B", "A"]


def test_persistent_failure_gives_up_with_the_model_named():
    with FakeOpenAI(lambda n, b: (503, {}, {"error": {"message": "down"}})) as server:
        with pytest.raises(BackendError, match="openai/fake.* still failing after 4 attempts"):
            _ask(LiteLLMBackend("openai/fake", api_base=server.api_base, retry=FAST, api_key="k"))
        assert len(server.requests) == 4


def test_401_fails_fast_naming_the_key_variable():
    with FakeOpenAI(lambda n, b: (401, {}, {"error": {"message": "bad key", "type": "invalid_api_key"}})) as server:
        with pytest.raises(BackendError, match="OPENAI_API_KEY"):
            _ask(LiteLLMBackend("openai/fake", api_base=server.api_base, retry=FAST, api_key="k"))
        assert len(server.requests) == 1


@pytest.mark.parametrize("status", [400, 404])
def test_client_errors_fail_fast(status):
    with FakeOpenAI(lambda n, b: (status, {}, {"error": {"message": "nope"}})) as server:
        with pytest.raises(BackendError, match="openai/fake"):
            _ask(LiteLLMBackend("openai/fake", api_base=server.api_base, retry=FAST, api_key="k"))
        assert len(server.requests) == 1


def test_request_carries_the_schema_with_valid_letters_only():
    with FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER))) as server:
        _ask(LiteLLMBackend("openai/fake", api_base=server.api_base, structured_output="json_object_schema",
                            api_key="k"))
    fmt = server.requests[0]["response_format"]
    assert fmt["type"] == "json_object"
    assert fmt["schema"]["properties"]["ranking"]["items"]["enum"] == ["A", "B"]
    assert fmt["schema"]["title"] == "InitialAssessment"


def test_response_format_dialects():
    schema = {"title": "T", "type": "object", "properties": {}}
    assert response_format_for("json_object_schema", schema) == {"type": "json_object", "schema": schema}
    assert response_format_for("json_schema", schema)["json_schema"]["schema"] == schema
    assert response_format_for("none", schema) is None
    with pytest.raises(ValueError, match="dialect"):
        response_format_for("xml", schema)


def test_garbage_output_is_repaired_and_counted_never_raised():
    torn = 'I think B. {"ranking": ["B"], "confidence": "High"'
    with FakeOpenAI(lambda n, b: (200, {}, completion(torn))) as s:
        with usage.track() as used:
            out = _ask(LiteLLMBackend("openai/fake", api_base=s.api_base, api_key="k"))
    assert out.confidence == "High" and out.ranking == ["B"]
    assert used.repaired == 1 and used.parse_failures == 0
    with FakeOpenAI(lambda n, b: (200, {}, completion("no json here at all"))) as s:
        with usage.track() as used:
            out = _ask(LiteLLMBackend("openai/fake", api_base=s.api_base, api_key="k"))
    assert out.ranking == [] and out.confidence == "Low"
    assert used.parse_failures == 1


def test_cache_is_keyed_by_backend_and_hits_cost_no_tokens(tmp_path):
    cache = ResponseCache(tmp_path)
    with FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER))) as one, \
         FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER))) as two:
        first = LiteLLMBackend("openai/fake", api_base=one.api_base, cache=cache, api_key="k")
        second = LiteLLMBackend("openai/fake", api_base=two.api_base, cache=cache, api_key="k")
        with usage.track() as used:
            _ask(first)
            _ask(first)   # served from the cache
            _ask(second)  # same model string, another server: not shared
        assert len(one.requests) == 1 and len(two.requests) == 1
    assert used.calls == 3 and used.cache_hits == 1
    assert used.prompt_tokens == 33  # billable: the cached call counts what it would cost
    assert used.spent_prompt_tokens == 22  # spent: the cached call cost nothing


def test_round_robin_over_deployments(tmp_path):
    def answer(n, body):
        return 200, {}, completion(json.dumps({"answer": "A", "ranking": ["A", "B"]}))

    questions = [Question(id=f"q{i}", question=f"q{i}?", options={"A": "a", "B": "b"}, answer_idx="A")
                 for i in range(6)]
    from teammed.programs.peers import build_system

    with FakeOpenAI(answer) as one, FakeOpenAI(answer) as two:
        deployments = [
            Deployment("one", LiteLLMBackend("openai/fake", api_base=one.api_base, api_key="k"), 1),
            Deployment("two", LiteLLMBackend("openai/fake", api_base=two.api_base, api_key="k"), 1),
        ]
        identity = RunIdentity(system="zero_shot", label="zero_shot", model="fake", dataset="t",
                               dataset_sha256="0" * 64, split="test", seed=1, question_ids=[q.id for q in questions])
        settings = RunSettings(out_dir=tmp_path, identity=identity)
        summary = run_questions(questions, program_factory=lambda: build_system("zero_shot"),
                                deployments=deployments, settings=settings)
        assert len(one.requests) == 3 and len(two.requests) == 3
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert {r["id"]: r["deployment"] for r in rows} == {f"q{i}": ("one", "two")[i % 2] for i in range(6)}
    assert summary["n"] == 6 and summary["calls"] == 6


def test_raw_newlines_in_strings_and_out_of_range_grades_parse_cleanly():
    from teammed.schema import parse_outputs
    from teammed.signatures import AssessmentQuality

    outcome = parse_outputs(InitialAssessment, '{"ranking": ["A"], "justification": "line one\nline two", '
                                               '"facts": ["a", "b"], "confidence": "Medium"}')
    assert not outcome.repaired and outcome.values["justification"] == "line one\nline two"
    grades = parse_outputs(AssessmentQuality, '{"grades": [1.0, 2.5]}')
    assert not grades.repaired and grades.values["grades"] == [1.0, 2.5]


def test_the_cli_scripted_backend_keeps_no_prompts():
    """A long `--model scripted` dry run must not hold every prompt it sent (it held ~127 KB per question)."""
    from teammed.backends.resolve import BackendOptions, open_deployments
    from teammed.backends.scripted import ScriptedLM

    with open_deployments(["scripted"], options=BackendOptions()) as deployments:
        lm = deployments[0].lm
        lm(messages=[{"role": "user", "content": "x"}])
        assert lm.calls == []
    kept = ScriptedLM()
    kept(messages=[{"role": "user", "content": "x"}])
    assert len(kept.calls) == 1  # tests still see what was asked
