"""teammed's direct client for OpenAI-compatible servers and litellm behave the same.

Every fault a server can produce is classified the same way under both transports (the
direct one is the default for ``openai/<alias> --api-base`` and the embedded model), the
server receives the same request body, and a direct call never imports litellm.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import dspy
import pytest

from teammed import usage
from teammed.adapter import SchemaAdapter
from teammed.backends.cache import ResponseCache
from teammed.backends.litellm_backend import LiteLLMBackend
from teammed.backends.retry import RetryPolicy
from teammed.errors import FatalBackendError, TransientBackendError
from teammed.signatures import InitialAssessment
from tests.fake_openai import FakeOpenAI, completion

ANSWER = json.dumps({"ranking": ["B", "A"], "justification": "x", "facts": ["a", "b"], "confidence": "High"})
FAST = RetryPolicy(attempts=3, base_s=0.01, cap_s=0.05)
TRANSPORTS = ["auto", "litellm"]


def _lm(server, transport: str, **kwargs) -> LiteLLMBackend:
    kwargs.setdefault("retry", FAST)
    lm = LiteLLMBackend("openai/fake", api_base=server.api_base, api_key="k", transport=transport, **kwargs)
    assert lm.transport == ("direct" if transport == "auto" else "litellm")
    return lm


def _ask(lm) -> dspy.Prediction:
    with dspy.context(lm=lm, adapter=SchemaAdapter()):
        return dspy.Predict(InitialAssessment)(question="q?", options={"A": "a", "B": "b"}, role="r",
                                               shared_context="")


def _then_ok(first):
    def handler(n, body):
        return first if n == 1 else (200, {}, completion(ANSWER, prompt_tokens=40, completion_tokens=9))
    return handler


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("first", [
    (429, {"Retry-After": "0"}, {"error": {"message": "slow down"}}),
    (500, {}, {"error": {"message": "internal"}}),
    (503, {}, {"error": {"message": "overloaded"}}),
    "drop",
    b"<html>not json</html>",
], ids=["429", "500", "503", "dropped", "garbage"])
def test_transient_faults_are_retried_alike(transport, first):
    with FakeOpenAI(_then_ok(first)) as server, usage.track() as used:
        assert _ask(_lm(server, transport)).ranking == ["B", "A"]
    assert used.retries == 1 and used.calls == 1
    assert (used.prompt_tokens, used.completion_tokens) == (40, 9)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("status, kind", [(401, "authentication"), (403, "permission"), (404, "not_found"),
                                          (400, "bad_request")])
def test_client_errors_are_fatal_alike(transport, status, kind):
    with FakeOpenAI(lambda n, b: (status, {}, {"error": {"message": "no"}})) as server:
        with pytest.raises(FatalBackendError) as raised:
            _ask(_lm(server, transport))
        assert len(server.requests) == 1
    assert raised.value.kind == kind


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_retry_after_is_honoured_alike(transport):
    first = (429, {"Retry-After": "1"}, {"error": {"message": "slow down"}})
    with FakeOpenAI(_then_ok(first)) as server:
        started = time.monotonic()
        _ask(_lm(server, transport, retry=RetryPolicy(attempts=3, base_s=0.01, cap_s=5)))
        waited = time.monotonic() - started
    assert 0.9 <= waited < 4


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_hung_server_times_out_and_persistent_errors_give_up_alike(transport):
    with FakeOpenAI(lambda n, b: 5.0) as server:
        started = time.monotonic()
        with pytest.raises(TransientBackendError):
            _ask(_lm(server, transport, timeout_s=0.5, retry=RetryPolicy(attempts=2, base_s=0.01, cap_s=0.02)))
        assert time.monotonic() - started < 4


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_refused_connection_is_fatal_alike(transport):
    lm = LiteLLMBackend("openai/fake", api_base="http://127.0.0.1:9/v1", api_key="k", transport=transport,
                        retry=FAST)
    with pytest.raises(FatalBackendError) as raised:
        _ask(lm)
    assert raised.value.kind == "connection"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_llamacpp_format_refusal_degrades_alike(transport):
    refusal = {"error": {"message": "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
                                    "'msg': \"Input should be 'text' or 'json_object'\"}]", "code": 500}}

    def handler(n, body):
        if body.get("response_format", {}).get("type") == "json_schema":
            return 500, {}, refusal
        return 200, {}, completion(ANSWER)

    with FakeOpenAI(handler) as server, usage.track() as used:
        lm = _lm(server, transport)
        assert _ask(lm).ranking == ["B", "A"]
    assert lm.structured_output == "json_object_schema" and used.retries == 0


def test_both_transports_send_the_same_request_body():
    bodies = {}
    for transport in TRANSPORTS:
        with FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER))) as server:
            _ask(_lm(server, transport, max_tokens=300))
            bodies[transport] = server.requests[0]
    direct, via_litellm = bodies["auto"], bodies["litellm"]
    for field in ("model", "messages", "response_format", "max_tokens", "temperature"):
        assert direct.get(field) == via_litellm.get(field), field
    assert direct["model"] == "fake"


def test_cached_direct_answers_replay_without_a_request(tmp_path):
    with FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER, prompt_tokens=40, completion_tokens=9))) as server:
        cache = ResponseCache(tmp_path / "cache")
        for _ in range(2):
            with usage.track() as used:
                assert _ask(_lm(server, "auto", cache=cache)).ranking == ["B", "A"]
        assert len(server.requests) == 1
    assert used.cache_hits == 1 and used.prompt_tokens == 40  # billable tokens, the same from cache


def test_a_direct_call_never_imports_litellm():
    code = (
        "import sys, dspy\n"
        "from teammed.backends.litellm_backend import LiteLLMBackend\n"
        "from teammed.adapter import SchemaAdapter\n"
        "from teammed.signatures import InitialAssessment\n"
        "lm = LiteLLMBackend('openai/fake', api_base=sys.argv[1], api_key='k')\n"
        "with dspy.context(lm=lm, adapter=SchemaAdapter()):\n"
        "    p = dspy.Predict(InitialAssessment)(question='q?', options={'A': 'a', 'B': 'b'}, role='r',"
        " shared_context='')\n"
        "print(p.ranking, 'litellm' in sys.modules)\n"
    )
    with FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER))) as server:
        done = subprocess.run([sys.executable, "-c", code, server.api_base], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['B', 'A'] False"
