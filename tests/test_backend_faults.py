"""Issue 10: dialects per provider, fault semantics, rollouts, cache, secrets, deployments, interrupts.

Every server here is a fault-injecting fake on loopback; requests go through litellm's own
request transformation, so the bodies asserted are what each provider would receive.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import dspy
import pytest

from teammed import usage
from teammed.adapter import SchemaAdapter
from teammed.backends.cache import ResponseCache
from teammed.backends.faults import classify
from teammed.backends.litellm_backend import KEYLESS, LiteLLMBackend
from teammed.backends.resolve import BackendOptions, load_deployments_file, open_deployments
from teammed.backends.retry import RetryPolicy
from teammed.errors import BackendError, ConfigError, FatalBackendError, TransientBackendError
from teammed.redact import redact
from teammed.schema import MAX_STRING_CHARS
from teammed.signatures import InitialAssessment
from tests.fake_openai import FakeOpenAI, completion

FAST = RetryPolicy(attempts=4, base_s=0.01, cap_s=0.05)
ANSWER = json.dumps({"ranking": ["B", "A"], "justification": "x", "facts": ["a", "b"], "confidence": "High"})
LLAMACPP_REJECTION = {"error": {"message": "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
                                           "'msg': \"Input should be 'text' or 'json_object'\", "
                                           "'input': 'json_schema'}]"}}


def _ask(lm, **kwargs) -> dspy.Prediction:
    with dspy.context(lm=lm, adapter=SchemaAdapter()):
        return dspy.Predict(InitialAssessment)(question="q?", options={"A": "a", "B": "b"}, role="r",
                                               shared_context="", **kwargs)


def _lm(server, model="openai/fake", **kwargs) -> LiteLLMBackend:
    kwargs.setdefault("retry", FAST)
    kwargs.setdefault("api_key", "k")
    return LiteLLMBackend(model, api_base=server.api_base, **kwargs)


def _keywords(node) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key != "properties":
                found.add(key)
            found |= _keywords(value) if key != "properties" else set().union(*(_keywords(v) for v in value.values()))
    elif isinstance(node, list):
        for value in node:
            found |= _keywords(value)
    return found


# ---------------------------------------------------------------- the dialect table, as each provider receives it
def _body_for(model: str, **kwargs) -> tuple[dict, LiteLLMBackend]:
    with FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER))) as server:
        lm = _lm(server, model, retry=RetryPolicy(attempts=1), **kwargs)
        try:
            _ask(lm)
        except BackendError:
            pass  # a non-OpenAI provider cannot read the fake's reply; its request is what is checked
        return server.requests[0], lm


def test_openai_gets_strict_json_schema_within_its_documented_subset():
    body, lm = _body_for("openai/gpt-4o-mini", profile="openai", structured_output="json_schema_strict")
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["additionalProperties"] is False and set(schema["required"]) == set(schema["properties"])
    assert not {"maxLength", "minLength"} & _keywords(schema)  # not in OpenAI's strict subset
    assert schema["properties"]["ranking"]["minItems"] == 2  # arrays' minItems/maxItems are


def test_openai_without_api_base_defaults_to_strict():
    assert LiteLLMBackend("openai/gpt-4o-mini", api_key="k").structured_output == "json_schema_strict"
    assert LiteLLMBackend("openai/smollm2", api_base="http://x/v1", api_key="k").structured_output == "json_schema"


def test_anthropic_gets_no_length_or_count_constraints():
    body, _ = _body_for("anthropic/claude-sonnet-4-5")
    sent = body.get("output_format") or body.get("tools")
    assert sent, f"litellm sent no schema to Anthropic: {sorted(body)}"
    assert not {"maxLength", "minLength", "minItems", "maxItems", "minimum", "maximum"} & _keywords(sent)
    assert "enum" in json.dumps(sent)


def test_gemini_gets_no_additional_properties_nor_string_lengths():
    body, _ = _body_for("gemini/gemini-2.0-flash")
    config = body["generationConfig"]
    schema = config.get("response_json_schema") or config.get("response_schema") or config.get("responseSchema")
    assert schema and config["response_mime_type"] == "application/json"
    assert not {"additionalProperties", "maxLength"} & _keywords(schema)
    assert schema["properties"]["ranking"]["items"]["enum"] == ["A", "B"]


def test_ollama_gets_the_schema_as_format():
    body, _ = _body_for("ollama_chat/llama3")
    assert body["format"]["properties"]["ranking"]["items"]["enum"] == ["A", "B"]
    assert "maxLength" not in _keywords(body["format"])


def test_vllm_keeps_every_constraint_and_string_limits_fit_the_prompts():
    body, _ = _body_for("hosted_vllm/qwen")
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is False
    just = fmt["json_schema"]["schema"]["properties"]["justification"]
    assert just["maxLength"] == MAX_STRING_CHARS
    assert MAX_STRING_CHARS >= 150 * 8  # a 150-word report fits (about 7 characters a word with its space)


def test_generic_openai_compatible_server_gets_non_strict_json_schema():
    body, _ = _body_for("openai/smollm2")
    assert body["response_format"]["json_schema"]["strict"] is False


def test_structured_output_override_and_llamacpp_dialect():
    body, _ = _body_for("openai/smollm2", structured_output="json_object_schema")
    assert body["response_format"]["type"] == "json_object"
    assert body["response_format"]["schema"]["properties"]["ranking"]["items"]["enum"] == ["A", "B"]
    body, _ = _body_for("openai/smollm2", structured_output="none")
    assert "response_format" not in body


# ---------------------------------------------------------------- degradation
def test_llamacpp_500_rejection_degrades_once_and_is_remembered(caplog):
    def handler(n, body):
        if body.get("response_format", {}).get("type") == "json_schema":
            return 500, {}, LLAMACPP_REJECTION
        return 200, {}, completion(ANSWER)

    with FakeOpenAI(handler) as server, usage.track() as used, caplog.at_level(logging.WARNING):
        lm = _lm(server, retry=RetryPolicy(attempts=6, base_s=30, cap_s=60))  # a retry would take 30 s
        started = time.monotonic()
        for _ in range(3):
            assert _ask(lm).ranking == ["B", "A"]
        elapsed = time.monotonic() - started
    kinds = [r.get("response_format", {}).get("type") for r in server.requests]
    assert kinds == ["json_schema", "json_object", "json_object", "json_object"]
    assert lm.structured_output == "json_object_schema"
    assert used.format_degradations == 1 and used.retries == 0
    assert elapsed < 10
    assert sum("does not take response_format" in r.getMessage() for r in caplog.records) == 1


def test_the_whole_degradation_chain_ends_in_prompt_only():
    def handler(n, body):
        if "response_format" in body:
            return 400, {}, {"error": {"message": "response_format is not supported by this model"}}
        return 200, {}, completion(ANSWER)

    with FakeOpenAI(handler) as server:
        lm = _lm(server, structured_output="json_schema_strict")
        assert _ask(lm).ranking == ["B", "A"]
    steps = [(r.get("response_format") or {}) for r in server.requests]
    assert [s.get("json_schema", {}).get("strict") for s in steps[:2]] == [True, False]
    assert steps[2] == {"type": "json_object", "schema": steps[2]["schema"]}
    assert steps[3] == {"type": "json_object"} and steps[4] == {}
    assert lm.structured_output == "none"
    systems = [r["messages"][0]["content"] for r in server.requests]
    # compact prompts while the backend enforced the schema; the full field list once it no longer does
    assert ["output fields" in s for s in systems] == [False, False, False, True, True]


def test_parse_enforces_the_limits_a_provider_did_not_take():
    long = "x" * (MAX_STRING_CHARS + 50)
    reply = json.dumps({"ranking": ["B", "A"], "justification": long, "facts": ["a", "b", "c", "d", "e", "f", "g"],
                        "confidence": "High"})
    with FakeOpenAI(lambda n, b: (200, {}, completion(reply))) as server, usage.track() as used:
        out = _ask(_lm(server))
    assert len(out.justification) == MAX_STRING_CHARS and len(out.facts) == 5
    assert used.repaired == 1


# ---------------------------------------------------------------- fault semantics
@pytest.mark.parametrize("status,kind", [(401, "authentication"), (403, "permission"), (404, "not_found"),
                                         (400, "bad_request"), (422, "bad_request")])
def test_client_errors_are_never_retried(status, kind):
    with FakeOpenAI(lambda n, b: (status, {}, {"error": {"message": "nope"}})) as server:
        started = time.monotonic()
        with pytest.raises(FatalBackendError) as caught:
            _ask(_lm(server, retry=RetryPolicy(attempts=6, base_s=30)))
        assert len(server.requests) == 1 and time.monotonic() - started < 5
    assert caught.value.kind == kind and caught.value.fix
    if kind == "authentication":
        assert "OPENAI_API_KEY" in str(caught.value)


def test_missing_openai_key_reported_as_500_apierror_is_fatal():
    import litellm

    exc = litellm.APIError(status_code=500, message="OpenAIException - The api_key client option must be set "
                           "either by passing api_key to the client or by setting the OPENAI_API_KEY environment "
                           "variable", llm_provider="openai", model="gpt-4o-mini")
    fault = classify(exc)
    assert (fault.action, fault.kind) == ("fatal", "authentication")


def test_missing_credentials_are_detected_before_the_first_call(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    lm = LiteLLMBackend("openai/gpt-4o-mini")
    with pytest.raises(FatalBackendError, match="OPENAI_API_KEY") as caught:
        lm.check_credentials()
    assert caught.value.kind == "authentication"
    keyless = LiteLLMBackend("openai/smollm2", api_base="http://127.0.0.1:9/v1")
    keyless.check_credentials()  # a keyless server needs no dummy key from the user
    assert keyless.kwargs["api_key"] == KEYLESS


def test_retry_after_header_is_honoured():
    replies = iter([(429, {"Retry-After": "2"}, {"error": {"message": "slow down"}})])

    def handler(n, body):
        return next(replies, (200, {}, completion(ANSWER)))

    with FakeOpenAI(handler) as server:
        started = time.monotonic()
        _ask(_lm(server, retry=RetryPolicy(attempts=3, base_s=0.01, cap_s=30)))
        elapsed = time.monotonic() - started
    assert 1.9 <= elapsed < 4, elapsed


def test_retry_after_is_capped_by_retry_cap():
    replies = iter([(503, {"Retry-After": "120"}, {"error": {"message": "busy"}})])
    with FakeOpenAI(lambda n, b: next(replies, (200, {}, completion(ANSWER)))) as server:
        started = time.monotonic()
        _ask(_lm(server, retry=RetryPolicy(attempts=3, base_s=0.01, cap_s=0.5)))
        assert time.monotonic() - started < 3


@pytest.mark.parametrize("fault", ["drop", b"<html>not json", 500, 502])
def test_dropped_connections_garbage_and_5xx_are_retried(fault):
    def handler(n, body):
        if n == 1:
            return fault if not isinstance(fault, int) else (fault, {}, {"error": {"message": "oops"}})
        return 200, {}, completion(ANSWER)

    with FakeOpenAI(handler) as server:
        assert _ask(_lm(server)).ranking == ["B", "A"]
        assert len(server.requests) == 2


def test_timeout_bounds_a_hung_call():
    with FakeOpenAI(lambda n, b: 30.0) as server:
        started = time.monotonic()
        with pytest.raises(TransientBackendError, match="2 attempts"):
            _ask(_lm(server, retry=RetryPolicy(attempts=2, base_s=0.01), timeout_s=0.5))
        assert time.monotonic() - started < 5


def test_worst_case_of_one_call_with_the_defaults_is_minutes():
    assert RetryPolicy().worst_case_s(120.0) == pytest.approx(570.0)


def _closed_while_waiting(lm: LiteLLMBackend, *, started: Callable[[], bool]) -> tuple[float, list[BaseException]]:
    """Call ``lm`` on a thread, close it once ``started()``; how long the caller took to leave, and its error."""
    errors: list[BaseException] = []

    def call() -> None:
        try:
            _ask(lm)
        except BaseException as exc:  # noqa: B036 - recorded for the assertion
            errors.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    deadline = time.monotonic() + 10
    while not started():
        assert time.monotonic() < deadline, "the call never started"
        time.sleep(0.02)
    began = time.monotonic()
    lm.close()
    thread.join(30)
    assert not thread.is_alive()
    return time.monotonic() - began, errors


def test_close_releases_a_call_hung_on_the_server_at_once(monkeypatch):
    """On a kept-alive connection the request runs on the caller's own thread (no hand-over to a worker
    thread and back), yet close() frees the caller at once: the socket is shut down under the read."""
    from teammed.backends import litellm_backend

    def handed_over(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("the request was handed to a worker thread")

    with FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER)) if n == 1 else 30.0, keep_alive=True) as server:
        lm = _lm(server, timeout_s=60)
        worker = threading.Thread(target=_ask, args=(lm,))  # the connection is opened, and kept
        worker.start()
        worker.join(10)
        monkeypatch.setattr(litellm_backend, "run_interruptible", handed_over)
        took, errors = _closed_while_waiting(lm, started=lambda: len(server.requests) >= 2)
    assert took < 1 and errors and "closed" in str(errors[0])


def _fill_accept_queue(port: int) -> list[socket.socket]:
    """Connections that fill the accept queue of a ``listen(0)`` listener that never accepts: a
    further connect to ``port`` then hangs. The caller closes them."""
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    time.sleep(0.3)
    return fillers


@pytest.mark.parametrize("phase", ["connect", "tls handshake"])
def test_close_releases_a_call_stuck_opening_its_connection_at_once(phase):
    """A connect (a listener whose accept queue is full) or a TLS handshake (a server that accepts and never
    answers) cannot be cut off by shutting a socket down: such a request is sent from a thread the caller leaves."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers: list[socket.socket] = []
    accepted: list[socket.socket] = []
    if phase == "connect":
        fillers = _fill_accept_queue(port)
    else:
        def accept() -> None:
            with contextlib.suppress(OSError):
                accepted.append(listener.accept()[0])

        threading.Thread(target=accept, daemon=True).start()
    lm = LiteLLMBackend("openai/fake", api_base=f"https://127.0.0.1:{port}/v1", api_key="k", timeout_s=20,
                        retry=FAST)
    ready = time.monotonic() + 1.0
    try:
        took, errors = _closed_while_waiting(lm, started=lambda: time.monotonic() > ready)
    finally:
        for sock in [*fillers, *accepted, listener]:
            sock.close()
    assert took < 2 and errors and "closed" in str(errors[0])


@pytest.mark.parametrize("gone", ["closed by the server", "idle past the keep-alive expiry"])
def test_close_releases_a_call_reconnecting_after_its_kept_alive_connection_went(gone, monkeypatch):
    """A kept-alive connection the server closed (or idle past its expiry) is reopened by httpcore on
    the calling thread, where a hung connect could not be cut off. It is seen before the request,
    which is then sent from a thread the caller leaves: here the reconnect hangs (the listener's
    accept queue is full) and close() still frees the caller at once."""
    from teammed.backends import openai_http

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    body = json.dumps(completion(ANSWER)).encode()
    served = threading.Event()

    def serve_one() -> None:  # one request on one connection, kept alive, then closed (or left idle)
        conn = listener.accept()[0]
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        head, _, rest = data.partition(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length")))
        while len(rest) < length:
            rest += conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)
        served.set()
        if gone == "closed by the server":
            time.sleep(0.2)
            conn.close()
        else:
            held.append(conn)

    held: list[socket.socket] = []
    if gone == "idle past the keep-alive expiry":
        monkeypatch.setattr(openai_http, "KEEPALIVE_S", 0.6)
    threading.Thread(target=serve_one, daemon=True).start()
    lm = LiteLLMBackend("openai/fake", api_base=f"http://127.0.0.1:{port}/v1", api_key="k", timeout_s=20,
                        retry=FAST)
    fillers: list[socket.socket] = []
    try:
        worker = threading.Thread(target=_ask, args=(lm,))  # the connection is opened, and kept
        worker.start()
        worker.join(10)
        assert served.is_set()
        time.sleep(0.5)
        fillers = _fill_accept_queue(port)  # from now on a connect hangs
        ready = time.monotonic() + 1.0
        took, errors = _closed_while_waiting(lm, started=lambda: time.monotonic() > ready)
    finally:
        for sock in [*fillers, *held, listener]:
            sock.close()
    assert took < 2 and errors and "closed" in str(errors[0])


# ---------------------------------------------------------------- DSPy interface: rollouts, cache, no deprecation
def test_distinct_rollouts_reach_the_server_and_repeats_are_cached(tmp_path):
    with FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER))) as server:
        lm = _lm(server, cache=ResponseCache(tmp_path), temperature=1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            _ask(lm, config={"rollout_id": 1})
            _ask(lm, config={"rollout_id": 2})
            _ask(lm, config={"rollout_id": 1})  # same rollout: cached
            _ask(lm, config={"rollout_id": 1, "cache": False})  # DSPy's cache=False: sent again
    assert len(server.requests) == 3
    assert all("rollout_id" not in r for r in server.requests)


def test_cache_hits_keep_billable_usage_and_spend_nothing(tmp_path):
    with FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER, prompt_tokens=100, completion_tokens=10))) as server:
        lm = _lm(server, cache=ResponseCache(tmp_path))
        with usage.track() as cold:
            _ask(lm)
        with usage.track() as warm:
            _ask(lm)
    assert (cold.prompt_tokens, cold.completion_tokens) == (warm.prompt_tokens, warm.completion_tokens) == (100, 10)
    assert (warm.spent_prompt_tokens, warm.spent_completion_tokens, warm.cache_hits) == (0, 0, 1)
    assert cold.spent_prompt_tokens == 100


def test_unparseable_answers_are_not_cached(tmp_path):
    with FakeOpenAI(lambda n, b: (200, {}, completion("I cannot answer in JSON"))) as server:
        lm = _lm(server, cache=ResponseCache(tmp_path))
        _ask(lm)
        _ask(lm)
    assert len(server.requests) == 2


def test_a_corrupt_cache_entry_is_a_miss(tmp_path):
    cache = ResponseCache(tmp_path)
    with FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER))) as server:
        lm = _lm(server, cache=cache)
        _ask(lm)
        store = cache._open()
        for key in list(store):
            store.set(key, {"v": 2, "usage": {}, "response": {"not": "a response"}})
        assert _ask(lm).ranking == ["B", "A"]
        assert len(server.requests) == 2


def test_an_unwritable_cache_warns_once_and_runs_uncached(tmp_path, caplog):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    with FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER))) as server, caplog.at_level(logging.WARNING):
        lm = _lm(server, cache=ResponseCache(blocked / "cache"))
        for _ in range(3):
            assert _ask(lm).ranking == ["B", "A"]
    assert len(server.requests) == 3
    assert sum("running uncached" in r.getMessage() for r in caplog.records) == 1


def test_cache_command_info_and_clear(tmp_path, capsys):
    from teammed.cli import main

    with FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER))) as server:
        _ask(_lm(server, cache=ResponseCache(tmp_path)))
    assert main(["cache", "info", "--cache-dir", str(tmp_path)]) == 0
    assert "entries     1" in capsys.readouterr().out
    assert main(["cache", "clear", "--cache-dir", str(tmp_path)]) == 0
    assert "removed 1" in capsys.readouterr().out


# ---------------------------------------------------------------- secrets
def test_redaction_of_urls_keys_and_tokens():
    assert redact("http://user:s3cret@host:8000/v1") == "http://user:***@host:8000/v1"
    assert redact("https://tok@host/v1") == "https://***@host/v1"
    assert "abcdef" not in redact("https://h/v1?api_key=abcdef&x=1")
    assert "sk-proj-abcdefghijklmnop" not in redact("key sk-proj-abcdefghijklmnop rejected")


def test_no_password_in_errors_or_dumped_state():
    with FakeOpenAI(lambda n, b: (401, {}, {"error": {"message": "bad"}})) as server:
        base = server.api_base.replace("http://", "http://alice:hunter2@")
        lm = LiteLLMBackend("openai/fake", api_base=base, retry=FAST, api_key="k")
        with pytest.raises(FatalBackendError) as caught:
            _ask(lm)
    assert "hunter2" not in str(caught.value) and "hunter2" not in json.dumps(lm.dump_state())


# ---------------------------------------------------------------- deployments
def test_deployments_file_spreads_requests_over_two_servers(tmp_path):
    with FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER))) as one, \
         FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER))) as two:
        path = tmp_path / "deployments.yaml"
        path.write_text(
            "model_list:\n"
            f"  - model_name: team\n    litellm_params: {{model: openai/a, api_base: '{one.api_base}', rpm: 600}}\n"
            f"  - model_name: team\n    litellm_params: {{model: openai/b, api_base: '{two.api_base}', "
            f"rpm: 600, max_parallel_requests: 2}}\n"
        )
        with open_deployments([], deployments_file=path, options=BackendOptions(retry=FAST)) as deployments:
            assert len(deployments) == 1
            lm = deployments[0].lm
            for i in range(12):
                with dspy.context(lm=lm, adapter=SchemaAdapter()):
                    dspy.Predict(InitialAssessment)(question=f"q{i}?", options={"A": "a", "B": "b"}, role="r",
                                                    shared_context="")
        assert one.requests and two.requests
        assert {r["model"] for r in one.requests} == {"a"} and {r["model"] for r in two.requests} == {"b"}


def test_deployments_file_refuses_literal_keys_and_names_missing_variables(tmp_path, monkeypatch):
    path = tmp_path / "d.json"
    path.write_text(json.dumps([{"model_name": "m", "litellm_params": {"model": "openai/x", "api_key": "sk-123"}}]))
    with pytest.raises(ConfigError, match="api_key_env"):
        load_deployments_file(path)
    monkeypatch.delenv("TEAMMED_TEST_KEY", raising=False)
    path.write_text(json.dumps([{"model_name": "m", "litellm_params": {"model": "openai/x",
                                                                        "api_key_env": "TEAMMED_TEST_KEY"}}]))
    with pytest.raises(ConfigError, match="TEAMMED_TEST_KEY"):
        load_deployments_file(path)


def test_requests_in_flight_are_bounded_per_deployment():
    with FakeOpenAI(lambda n, b: 0.3 if False else (time.sleep(0.3), (200, {}, completion(ANSWER)))[1]) as server:
        lm = _lm(server, max_parallel_requests=2)
        threads = [threading.Thread(target=_ask, args=(lm,), kwargs={"config": {"rollout_id": i}})
                   for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    assert server.max_in_flight == 2 and len(server.requests) == 8


# ---------------------------------------------------------------- interrupts (a real process)
def _teammed(*args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1"}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.Popen([sys.executable, "-m", "teammed.cli", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def _teammed_script(script: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1"}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.Popen([sys.executable, "-c", script, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _stop_once_it_calls(server: FakeOpenAI, proc: subprocess.Popen, stop: Callable[[], object]) -> tuple[float, str]:
    """Once ``proc`` has sent a request, ``stop()``; (seconds until it exited, its stderr)."""
    deadline = time.monotonic() + 60
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.requests, "the run never reached the server"
    started = time.monotonic()
    stop()
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return time.monotonic() - started, err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_a_hung_call_ends_the_run_within_two_seconds(tmp_path, sig):
    with FakeOpenAI(lambda n, b: 60.0) as server:
        proc = _teammed("run", "--dataset", "demo", "--n", "3", "--model", "openai/hung", "--api-base",
                        server.api_base, "--no-cache", "--out", str(tmp_path / "run"), "--n-agents", "2")
        elapsed, err = _stop_once_it_calls(server, proc, lambda: proc.send_signal(sig))
    assert elapsed < 2.0, (elapsed, err)
    assert proc.returncode in (130, 143, -sig), err
    assert "Traceback" not in err and "cannot schedule new futures" not in err


# A process-directed signal goes to any thread that does not block it. This script plays a
# library's thread that receives it (the kernel's choice): the handler is then only pending for
# the main thread, which must still notice while it waits on a hung call.
_SIGNAL_ON_ANOTHER_THREAD = """
import os, signal, sys, threading, time
from teammed.cli import main

def bystander():
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.02)
    signal.pthread_kill(threading.get_ident(), int(sys.argv[2]))
    time.sleep(3600)

threading.Thread(target=bystander, daemon=True).start()
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("command", ["run", "ask", "search"])
def test_a_signal_that_lands_on_another_thread_still_ends_the_run(tmp_path, sig, command):
    go = tmp_path / "go"
    with FakeOpenAI(lambda n, b: 60.0) as server:
        args = {"run": ["run", "--dataset", "demo", "--n", "3", "--n-agents", "2", "--out", str(tmp_path / "run")],
                "ask": ["ask", "A 30-year-old man has a fever. Diagnosis?", "--option", "A=Flu", "--option", "B=Cold",
                        "--n-agents", "2"],
                "search": ["search", "--dataset", "demo", "--n", "4", "--trials", "2", "--concurrency", "2",
                           "--out", str(tmp_path / "sets")]}[command]
        args += ["--no-cache", "--model", "openai/hung", "--api-base", server.api_base]
        proc = _teammed_script(_SIGNAL_ON_ANOTHER_THREAD, str(go), str(int(sig)), *args)
        elapsed, err = _stop_once_it_calls(server, proc, go.touch)
    assert elapsed < 2.0, (elapsed, err)
    assert proc.returncode in (130, 143), (proc.returncode, err)
    assert ("interrupted" if sig == signal.SIGINT else "terminated") in err, err


def test_teammed_worker_threads_keep_stop_signals_for_the_main_thread():
    from teammed.interrupts import run_interruptible
    from teammed.programs.parallel import Background, parallel_map

    def blocked() -> set[int]:
        return set(signal.pthread_sigmask(signal.SIG_BLOCK, []))

    wanted = {signal.SIGINT, signal.SIGTERM}
    assert wanted <= run_interruptible(blocked, check=lambda: None)
    with Background() as bg:
        assert wanted <= bg.start(blocked).result()
    assert all(wanted <= got for got in parallel_map(lambda _: blocked(), [1, 2]))
    assert not wanted & blocked()  # and the main thread still takes them


def test_a_401_stops_with_the_key_variable_named(tmp_path):
    with FakeOpenAI(lambda n, b: (401, {}, {"error": {"message": "invalid key"}})) as server:
        proc = _teammed("run", "--dataset", "demo", "--n", "2", "--model", "openai/x", "--api-base",
                        server.api_base, "--no-cache", "--out", str(tmp_path / "run"), "--n-agents", "2")
        _, err = proc.communicate(timeout=60)
    assert "OPENAI_API_KEY" in err
    assert len(server.requests) <= 4  # no retries: one request per question in flight at most


def test_url_password_never_reaches_artifacts_or_stderr(tmp_path):
    with FakeOpenAI(lambda n, b: (401, {}, {"error": {"message": "invalid key"}})) as server:
        base = server.api_base.replace("http://", "http://bob:topsecret@")
        proc = _teammed("run", "--dataset", "demo", "--n", "1", "--model", "openai/x", "--api-base", base,
                        "--no-cache", "--out", str(tmp_path / "run"), "--n-agents", "2")
        out, err = proc.communicate(timeout=60)
    assert "topsecret" not in out + err
    for path in Path(tmp_path).rglob("*"):
        if path.is_file():
            assert "topsecret" not in path.read_text(errors="replace"), path


def test_dspy_usage_tracking_sees_the_calls():
    with FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER, prompt_tokens=40, completion_tokens=4))) as server:
        with dspy.track_usage() as tracker:
            _ask(_lm(server))
    totals = tracker.get_total_tokens()
    assert totals["openai/fake"]["prompt_tokens"] == 40


def test_router_fallbacks_from_the_deployments_file(tmp_path):
    with FakeOpenAI(lambda n, b: (503, {}, {"error": {"message": "down"}})) as down, \
         FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER))) as backup:
        path = tmp_path / "deployments.yaml"
        path.write_text(
            "model_list:\n"
            f"  - model_name: main\n    litellm_params: {{model: openai/a, api_base: '{down.api_base}'}}\n"
            f"  - model_name: backup\n    litellm_params: {{model: openai/b, api_base: '{backup.api_base}'}}\n"
            "router_settings:\n  fallbacks: [{main: [backup]}]\n"
        )
        options = BackendOptions(retry=RetryPolicy(attempts=1))
        with open_deployments([], deployments_file=path, options=options) as deployments:
            main = next(d for d in deployments if d.spec.startswith("main"))
            assert _ask(main.lm).ranking == ["B", "A"]
        assert down.requests and backup.requests


def test_a_second_ctrl_c_exits_quietly(tmp_path):
    with FakeOpenAI(lambda n, b: 60.0) as server:
        proc = _teammed("run", "--dataset", "demo", "--n", "3", "--model", "openai/hung", "--api-base",
                        server.api_base, "--no-cache", "--out", str(tmp_path / "run"), "--n-agents", "2")
        deadline = time.monotonic() + 60
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode in (130, -signal.SIGINT), err
    assert "Traceback" not in err and "cannot schedule new futures" not in err


def test_cli_dialect_choices_match_the_schema_module():
    from teammed import cli_backend, schema

    assert cli_backend.DIALECTS == schema.DIALECTS


def test_copies_with_rollout_ids_are_distinct_requests_and_share_shutdown(tmp_path):
    with FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER))) as server:
        lm = _lm(server, cache=ResponseCache(tmp_path))
        first, second = lm.copy(rollout_id=1, temperature=1.0), lm.copy(rollout_id=2, temperature=1.0)
        _ask(first)
        _ask(second)
        _ask(lm.copy(rollout_id=1, temperature=1.0))  # the same rollout again: from the cache
        assert len(server.requests) == 2
        lm.close()
        with pytest.raises(BackendError, match="closed"):
            _ask(lm.copy(rollout_id=3, temperature=1.0))


def test_router_cools_down_a_failing_deployment_and_results_stay_exact(tmp_path):
    """Two deployments of one model, one answering 500: after ``allowed_fails`` it cools down, the
    healthy one takes the traffic, every call succeeds once and usage counts each call once."""
    with FakeOpenAI(lambda n, b: (500, {}, {"error": {"message": "overloaded", "type": "server_error"}})) as bad, \
         FakeOpenAI(lambda n, b: (200, {}, completion(ANSWER))) as good:
        path = tmp_path / "deployments.yaml"
        path.write_text(
            "model_list:\n"
            f"  - model_name: team\n    litellm_params: {{model: openai/a, api_base: '{bad.api_base}'}}\n"
            f"  - model_name: team\n    litellm_params: {{model: openai/b, api_base: '{good.api_base}'}}\n"
            "router_settings:\n  allowed_fails: 1\n  cooldown_time: 120\n  routing_strategy: simple-shuffle\n"
        )
        with open_deployments([], deployments_file=path,
                              options=BackendOptions(retry=RetryPolicy(attempts=4, base_s=0.01, cap_s=0.02))) \
                as deployments, usage.track() as used:
            answers = [_ask(deployments[0].lm).ranking for _ in range(16)]
    assert answers == [["B", "A"]] * 16
    assert len(good.requests) == 16 == used.calls
    assert len(bad.requests) <= 2, f"the failing deployment got {len(bad.requests)} requests despite its cooldown"


@pytest.mark.parametrize("status, body", [
    (400, {"object": "error", "message": "The provided JSON schema contains features not supported by xgrammar.",
           "type": "BadRequestError", "param": None, "code": 400}),  # vLLM
    (400, {"error": "invalid format: expected \"json\" or a JSON schema"}),  # Ollama's OpenAI endpoint
    (400, {"error": "'response_format.type' must be 'json_schema' or 'text'"}),  # LM Studio
    (422, {"detail": [{"loc": ["body", "response_format", "type"], "msg": "unexpected value"}]}),  # FastAPI servers
    (400, {"error": {"message": "Invalid value.", "type": "invalid_request_error",
                     "param": "response_format.json_schema.schema", "code": None}}),  # only `param` says it
])
def test_format_refusals_worded_any_way_degrade_and_are_never_retried(status, body):
    def handler(n, request):
        if request.get("response_format", {}).get("type") == "json_schema":
            return status, {}, body
        return 200, {}, completion(ANSWER)

    with FakeOpenAI(handler) as server, usage.track() as used:
        lm = _lm(server, retry=RetryPolicy(attempts=6, base_s=30, cap_s=60))  # a retry would take 30 s
        started = time.monotonic()
        assert _ask(lm).ranking == ["B", "A"]
        assert time.monotonic() - started < 10
    assert used.retries == 0 and used.format_degradations >= 1
    assert server.requests[-1]["response_format"]["type"] != "json_schema"


def test_the_embedded_model_gets_a_longer_default_timeout():
    """A request to the one-slot embedded server that times out keeps the slot busy; its retry would
    queue behind it. Its default is 600 s; --timeout wins for every backend."""
    from teammed.backends.resolve import BackendOptions
    from teammed.cli import build_parser, spec_of
    from teammed.experiments._backend import backend_options

    assert BackendOptions().timeout_for() == 120.0 and BackendOptions().timeout_for(local=True) == 600.0
    assert BackendOptions(timeout_s=30).timeout_for(local=True) == 30.0
    parsed = build_parser().parse_args(["run", "--dataset", "demo", "--no-cache"])
    assert backend_options(spec_of(parsed).backend, command="run").timeout_for(local=True) == 600.0
    parsed = build_parser().parse_args(["run", "--dataset", "demo", "--no-cache", "--timeout", "45"])
    assert backend_options(spec_of(parsed).backend, command="run").timeout_for(local=True) == 45.0
