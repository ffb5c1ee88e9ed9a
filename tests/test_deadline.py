"""Issue 34, item 4: ``--timeout`` is the deadline of the whole request (connect, send and all of the
body), not of each read. A server that trickles its answer a byte a second ends at the deadline, on
the direct client, its coroutines and the litellm transport, and ``run`` stops by its
consecutive-failure rule, naming the deadline."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from teammed.backends.openai_http import OpenAICompatibleClient, RequestDeadlineExceeded

ROOT = Path(__file__).resolve().parents[1]


class Trickle:
    """A server that reads a request, answers ``200`` with a 10,000-byte body, then sends one byte a
    second (``mode="body"``), or never answers at all (``mode="silent"``)."""

    def __init__(self, mode: str = "body") -> None:
        self.mode = mode
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stop = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            if self.mode == "body":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n{")
            while not self.stop.wait(1.0):
                if self.mode == "body":
                    conn.sendall(b" ")
        except OSError:
            pass

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
        for conn in self.conns:
            conn.close()


@pytest.fixture
def trickle():
    server = Trickle()
    yield server
    server.close()


@pytest.mark.parametrize("mode", ["body", "silent"])
def test_the_direct_client_ends_a_request_at_its_deadline(mode) -> None:
    server = Trickle(mode)
    client = OpenAICompatibleClient(server.api_base, api_key="k", timeout_s=2.0)
    try:
        started = time.monotonic()
        with pytest.raises(RequestDeadlineExceeded, match="deadline"):
            client.complete(model="openai/x", messages=[{"role": "user", "content": "hi"}])
        # each byte came within the read timeout: only the deadline ends the request
        assert 1.9 < time.monotonic() - started < 4.0
    finally:
        client.close()
        server.close()


def test_an_lms_acall_ends_at_its_deadline(trickle) -> None:
    from teammed.backends.litellm_backend import LiteLLMBackend
    from teammed.backends.retry import RetryPolicy

    lm = LiteLLMBackend("openai/x", api_base=trickle.api_base, api_key="k", timeout_s=2.0,
                        retry=RetryPolicy(attempts=1))

    async def ask() -> None:
        await lm.acall(messages=[{"role": "user", "content": "hi"}])

    try:
        started = time.monotonic()
        with pytest.raises(Exception, match="deadline"):
            asyncio.run(ask())
        assert time.monotonic() - started < 4.0
    finally:
        lm.close()


@pytest.mark.parametrize("transport", ["auto", "litellm"])
def test_run_against_a_trickling_server_stops_naming_the_deadline(tmp_path, trickle, transport) -> None:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "teammed", "run", "--dataset", "demo", "--n", "4", "--timeout", "5",
         "--retry-attempts", "2", "--model", "openai/x", "--api-base", trickle.api_base, "--no-cache",
         "--transport", transport, "--out", str(tmp_path / "run")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env={**_env(), "OPENAI_API_KEY": "sk-test"})
    elapsed = time.monotonic() - started
    assert done.returncode != 0 and elapsed < 60, (elapsed, done.stderr[-1500:])
    assert "deadline" in done.stderr
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert rows and all(r["failed"] and "deadline" in r["error"] for r in rows)


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}


def test_a_dead_proxy_is_named_as_the_proxy_not_the_server(tmp_path, monkeypatch, capsys) -> None:
    from teammed.cli import main

    from .fake_openai import FakeOpenAI, completion

    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()  # nothing listens there
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "https_proxy", "HTTPS_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeOpenAI(lambda n, body: (200, {}, completion("{}"))) as server:
        code = main(["run", "--dataset", "demo", "--n", "1", "--model", "openai/x", "--api-base", server.api_base,
                     "--no-cache", "--retry-attempts", "1", "--out", str(tmp_path / "run")])
        assert not server.requests  # the request never got past the proxy
    err = capsys.readouterr().err
    assert code != 0 and f"the proxy http://127.0.0.1:{port}" in err and "HTTP_PROXY" in err
    assert "NO_PROXY" in err and "correct --api-base" not in err


@pytest.mark.parametrize("transport", ["auto", "litellm"])
def test_the_backend_gives_up_after_calls_in_a_row_failed_and_an_answer_resets_the_count(transport) -> None:
    """What stops tune, search, compile and reproduce (whose loops, DSPy's bootstrap among them, go on past a
    failed question) on a dead server: after ``give_up_after`` calls in a row failed every attempt, every
    call fails at once with a fatal error naming the cause and the fix."""
    import dspy

    from teammed.adapter import SchemaAdapter
    from teammed.backends import LiteLLMBackend
    from teammed.backends.retry import RetryPolicy
    from teammed.errors import FatalBackendError, TransientBackendError
    from teammed.signatures import InitialAssessment

    from .fake_openai import FakeOpenAI, completion

    healthy = {"on": False}
    answer = json.dumps({"ranking": ["B", "A"], "justification": "x", "facts": ["a"], "confidence": "High"})

    def reply(n, body):
        return (200, {}, completion(answer)) if healthy["on"] else (500, {}, {"error": {"message": "overloaded"}})

    def ask(lm):
        with dspy.context(lm=lm, adapter=SchemaAdapter()):
            return dspy.Predict(InitialAssessment)(question="q?", options={"A": "a", "B": "b"}, role="r",
                                                   shared_context="")

    with FakeOpenAI(reply) as server:
        # the streak must also last one request timeout (5 s here) without an answer: a blip is not a dead server
        lm = LiteLLMBackend("openai/x", api_base=server.api_base, api_key="k", transport=transport, timeout_s=5,
                            retry=RetryPolicy(attempts=1, base_s=0, give_up_after=3))
        from concurrent.futures import ThreadPoolExecutor

        def failing(_: int) -> type:
            try:
                with dspy.context(lm=lm, adapter=SchemaAdapter()):
                    ask(lm)
            except Exception as exc:  # noqa: BLE001 - the kind of failure is what the test checks
                return type(exc)
            return type(None)

        with ThreadPoolExecutor(4) as pool:  # four calls failing together: a blip, not a dead server
            assert list(pool.map(failing, range(4))) == [TransientBackendError] * 4
        healthy["on"] = True
        ask(lm)  # an answer: the count starts again
        healthy["on"] = False
        for _ in range(2):
            with pytest.raises(TransientBackendError):
                ask(lm)
            time.sleep(2.6)
        with pytest.raises(FatalBackendError, match="3 calls in a row failed") as third:
            ask(lm)
        assert third.value.kind == "unavailable" and "--timeout" in str(third.value)
        sent = len(server.requests)
        healthy["on"] = True
        with pytest.raises(FatalBackendError, match="giving up on the server"):
            ask(lm)
        assert len(server.requests) == sent  # given up: no request goes out


@pytest.mark.parametrize("command", ["tune", "compile"])
def test_tune_and_compile_against_a_server_that_never_answers_stop_naming_the_cause(tmp_path, command) -> None:
    """The issue's check: a silent server, ``--timeout 3 --retry-attempts 2``: the command gives up
    (DSPy's bootstrap and tune's cells go on past a failed question; the backend does not) and
    exits non-zero within 120 s, saying why and what to do."""
    server = Trickle("silent")
    args = {"tune": ["tune", "--dataset", "demo", "--budget", "calls=100000", "--optimizer", "bootstrap",
                     "--n-eval", "2", "--batch-size", "2", "--pool-size", "2", "--stage1-batches", "1",
                     "--out", str(tmp_path / "t")],
            "compile": ["compile", "--dataset", "demo", "--preset", "base", "--optimizer", "bootstrap", "--train", "4",
                        "--val", "1", "--test", "1", "--out", str(tmp_path / "compiled.json")]}[command]
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "teammed", *args, "--timeout", "3", "--retry-attempts", "2", "--model", "openai/x",
             "--api-base", server.api_base, "--no-cache"],
            cwd=ROOT, capture_output=True, text=True, timeout=180, env={**_env(), "OPENAI_API_KEY": "sk-test"})
    finally:
        server.close()
    elapsed = time.monotonic() - started
    assert done.returncode != 0 and elapsed < 120, (elapsed, done.stderr[-1500:])
    # tune's cells fail one by one until the backend gives up; compile's first evaluation has one question
    said = {"tune": "giving up on the server", "compile": "the evaluation before compiling failed"}[command]
    assert said in done.stderr and "deadline" in done.stderr and "--timeout" in done.stderr, done.stderr[-1500:]


def test_on_litellm_the_deadline_counts_from_the_request_not_the_queue_before_it(monkeypatch) -> None:
    """Issue 47, item 2: with ``--transport litellm`` on a loaded machine, a request that waited for a worker
    longer than ``--timeout`` still gets its answer: the deadline measures the server, not teammed's queue."""
    from concurrent.futures import ThreadPoolExecutor

    from teammed import interrupts
    from teammed.backends.litellm_backend import LiteLLMBackend
    from teammed.backends.retry import RetryPolicy
    from tests.fake_openai import FakeOpenAI, completion

    pool = ThreadPoolExecutor(max_workers=1)
    monkeypatch.setattr(interrupts, "workers", lambda: pool)
    with FakeOpenAI(lambda n, body: (200, {}, completion("hello"))) as server:
        lm = LiteLLMBackend("openai/x", api_base=server.api_base, api_key="k", timeout_s=1.0, transport="litellm",
                            retry=RetryPolicy(attempts=1))
        try:
            pool.submit(time.sleep, 2.5)  # the only worker is busy for longer than the timeout
            started = time.monotonic()
            [answer] = lm(messages=[{"role": "user", "content": "hi"}])
            assert "hello" in str(answer) and time.monotonic() - started >= 2.0
        finally:
            lm.close()
            pool.shutdown(wait=False)


def test_on_litellm_a_status_the_server_sent_is_reported_as_that_status() -> None:
    from teammed.backends.litellm_backend import LiteLLMBackend
    from teammed.backends.retry import RetryPolicy
    from teammed.errors import FatalBackendError
    from tests.fake_openai import FakeOpenAI

    unauthorized = {"error": {"message": "Invalid API key", "type": "invalid_request_error", "code": "invalid_api_key"}}
    with FakeOpenAI(lambda n, body: (401, {}, unauthorized)) as server:
        lm = LiteLLMBackend("openai/x", api_base=server.api_base, api_key="k", timeout_s=3.0, transport="litellm",
                            retry=RetryPolicy(attempts=2))
        try:
            with pytest.raises(FatalBackendError) as caught:
                lm(messages=[{"role": "user", "content": "hi"}])
        finally:
            lm.close()
    assert "deadline" not in str(caught.value) and ("401" in str(caught.value) or "key" in str(caught.value).lower())


def test_a_server_silent_for_long_is_given_up_on_whatever_the_command(monkeypatch) -> None:
    """Issue 47, item 6: no answer for `SILENT_S` and a call failed after every attempt: the backend gives up,
    even where calls in a row are not counted (``run``: give_up_after 0). At the defaults (120 s, 4 attempts)
    one call takes about 8 minutes, so every command stops within about 10 of the server's last answer."""
    from teammed.backends import litellm_backend
    from teammed.backends.litellm_backend import LiteLLMBackend
    from teammed.backends.retry import RetryPolicy
    from teammed.errors import FatalBackendError, TransientBackendError

    assert litellm_backend.SILENT_S == 300.0 and RetryPolicy().worst_case_s(120.0) < 600  # one call: 9.5 min at most
    monkeypatch.setattr(litellm_backend, "SILENT_S", 1.5)
    server = Trickle("silent")
    lm = LiteLLMBackend("openai/x", api_base=server.api_base, api_key="k", timeout_s=1.0,
                        retry=RetryPolicy(attempts=1, give_up_after=0))
    try:
        with pytest.raises(TransientBackendError):  # 1 s without an answer: not yet given up
            lm(messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(FatalBackendError, match="giving up on the server: no answer for"):
            lm(messages=[{"role": "user", "content": "again"}])
    finally:
        lm.close()
        server.close()
