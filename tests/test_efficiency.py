"""Issue 11 goals 3-5: what runs at once, what is imported, what stays in memory.

Requests in flight are counted on the benchmark's fake server (loopback, fixed latency,
schema-valid answers), from the start and end time it logs for every request.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import dspy
import pytest

from teammed.backends import ScriptedLM
from teammed.backends.resolve import Deployment
from teammed.cli import main
from teammed.programs.teamwork import TeamworkProgram
from teammed.runner import RunSettings, run_questions
from teammed.types import Question
from tests.helpers import fake_server_module

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("litellm", "dspy", "matplotlib", "optuna", "datasets", "openai")


def _requests(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def max_in_flight(requests: list[dict[str, Any]]) -> int:
    """The most requests the server held at one moment."""
    events = sorted([(r["start"], 1) for r in requests] + [(r["end"], -1) for r in requests],
                    key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak


@pytest.fixture
def fake_server(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-for-tests")

    def start(latency_s: float):
        log = tmp_path / f"requests-{latency_s}.jsonl"
        return fake_server_module().FakeServer(latency_s=latency_s, log_path=log), log

    return start


def _python(code: str) -> str:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


# ---------------------------------------------------------------- imports
def test_help_and_cli_import_load_no_model_or_plotting_stack():
    code = ("import sys, contextlib, io\n"
            "import teammed.cli\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "    teammed.cli.main(['--help'])\n"
            "for sub in ('run', 'ask', 'report', 'compile', 'search'):\n"
            "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "        teammed.cli.main([sub, '--help'])\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r} + ('pydantic',))))")
    assert _python(code) == "[]"  # pydantic alone took --help from 0.06 s to 0.14 s


def test_summarizing_a_run_does_not_load_plotting():
    code = ("import sys\n"
            "import teammed.runner\n"
            "from teammed.evals import Summarizer\n"  # what `teammed run` passes the runner as metrics=
            "s = Summarizer()\n"
            "s.add({'id': 'q', 'gold': 'A', 'prediction': 'A', 'correct': True, 'failed': False})\n"
            "assert s.result()['n'] == 1, s\n"
            "print(sorted(m for m in ('matplotlib', 'optuna') if m in sys.modules))")
    assert _python(code) == "[]"


def test_evals_package_still_exports_its_names_lazily():
    import teammed.evals as evals

    assert callable(evals.summarize) and callable(evals.build_report) and callable(evals.mcnemar)
    with pytest.raises(AttributeError):
        evals.no_such_name  # noqa: B018


def test_teammed_command_exits_cleanly_with_its_code(tmp_path):
    """The console entry point skips interpreter teardown but keeps exit codes and output."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    ok = subprocess.run([sys.executable, "-m", "teammed.cli", "run", "--dataset", "demo", "--n", "1", "--preset",
                         "base", "--n-agents", "2", "--model", "scripted", "--out", str(tmp_path / "r")],
                        capture_output=True, text=True, timeout=300, env=env)
    assert ok.returncode == 0, ok.stderr
    assert "accuracy" in ok.stdout and (tmp_path / "r" / "summary.json").is_file()
    bad = subprocess.run([sys.executable, "-m", "teammed.cli", "run", "--dataset", "nope-no-such", "--model",
                          "scripted", "--out", str(tmp_path / "x")], capture_output=True, text=True, timeout=300,
                         env=env)
    assert bad.returncode == 2 and "error" in bad.stderr


# ---------------------------------------------------------------- memory
def test_dspy_history_and_trace_stay_empty_after_a_run(tmp_path):
    from dspy.clients import base_lm

    lm = ScriptedLM()
    program = TeamworkProgram()
    questions = [Question(id=f"q{i}", question=f"Case {i}: chest pain. Diagnosis?",
                          options={"A": "MI", "B": "PE", "C": "Dissection"}, answer_idx="A") for i in range(3)]
    from teammed.records import RunIdentity

    identity = RunIdentity(system="teamwork", label="base", model="scripted", deployments=["scripted"], dataset="t",
                           dataset_sha256="0" * 64, split="test", seed=0, question_ids=[q.id for q in questions])
    settings = RunSettings(out_dir=tmp_path, identity=identity)
    global_before = len(base_lm.GLOBAL_HISTORY)
    trace_before = len(dspy.settings.trace or [])
    summary = run_questions(questions, program_factory=lambda: program,
                            deployments=[Deployment("scripted", lm, 4)], settings=settings, questions_in_flight=2)
    assert summary["n"] == 3 and summary["calls"] > 0
    assert lm.history == []
    assert len(base_lm.GLOBAL_HISTORY) == global_before
    assert all(m.history == [] for _, m in program.named_sub_modules() if hasattr(m, "history"))
    assert len(dspy.settings.trace or []) == trace_before
    # the written rows keep their transcripts; memory does not need to
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert all(r["transcript"] for r in rows)


# ---------------------------------------------------------------- concurrency
def test_round_two_runs_in_parallel_with_one_question_in_flight(tmp_path, fake_server):
    import threading

    from teammed import interrupts

    threads_before = interrupts.workers().threads
    server, log = fake_server(0.3)
    with server:
        code = main(["run", "--dataset", "demo", "--n", "2", "--preset", "base", "--n-agents", "3",
                     "--model", "openai/fake", "--api-base", server.api_base, "--no-cache", "--concurrency", "1",
                     "--retry-attempts", "1", "--out", str(tmp_path / "run")])
    assert code == 0
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert not any(r["failed"] for r in rows)
    requests = _requests(log)
    assert max_in_flight(requests) >= 3  # three clinicians assess at once
    # one question in flight: the second question's first request starts after the first's last ended
    first = sorted(requests, key=lambda r: r["start"])
    per_question = len(first) // 2
    assert max(r["end"] for r in first[:per_question]) <= min(r["start"] for r in first[per_question:]) + 0.05
    # worker threads are reused: a few per call in flight (the assessment waiting on its request), not one
    # per request (18) and none started by a deliberation of its own
    assert interrupts.workers().threads - threads_before <= 6
    assert sum(t.name == "teammed-worker" for t in threading.enumerate()) == interrupts.workers().threads
    assert not [t.name for t in threading.enumerate() if t.name.startswith("teammed_")]


def test_parallel_requests_bounds_requests_in_flight(tmp_path, fake_server):
    server, log = fake_server(0.2)
    with server:
        assert main(["run", "--dataset", "demo", "--n", "4", "--preset", "base", "--n-agents", "3",
                     "--model", "openai/fake", "--api-base", server.api_base, "--no-cache", "--concurrency", "4",
                     "--parallel-requests", "2", "--retry-attempts", "1", "--out", str(tmp_path / "run")]) == 0
    assert max_in_flight(_requests(log)) == 2


def test_concurrency_below_one_is_refused(tmp_path, capsys):
    for flag in ("--concurrency", "--parallel-requests"):
        try:
            code = main(["run", "--dataset", "demo", "--model", "scripted", flag, "0", "--out", str(tmp_path)])
        except SystemExit as exc:  # refused while parsing the flag
            code = exc.code
        assert code == 2
        assert flag in capsys.readouterr().err


def test_search_honours_concurrency(tmp_path, fake_server):
    server, log = fake_server(0.2)
    with server:
        code = main(["search", "--dataset", "demo", "--n", "8", "--trials", "1", "--batch-size", "8",
                     "--concurrency", "8", "--model", "openai/fake", "--api-base", server.api_base, "--no-cache",
                     "--retry-attempts", "1", "--out", str(tmp_path / "sets"),
                     "--storage", str(tmp_path / "study.log")])
    assert code == 0
    assert max_in_flight(_requests(log)) >= 8  # eight questions at once (it was 4 with --concurrency 8)


def test_compile_evaluates_with_concurrency(tmp_path, fake_server):
    server, log = fake_server(0.2)
    with server:
        code = main(["compile", "--dataset", "demo", "--optimizer", "labeled", "--train", "1", "--val", "1",
                     "--test", "4", "--preset", "leadership", "--n-agents", "2", "--concurrency", "4",
                     "--model", "openai/fake", "--api-base", server.api_base, "--no-cache", "--retry-attempts", "1",
                     "--out", str(tmp_path / "program.json")])
    assert code == 0
    assert max_in_flight(_requests(log)) >= 4  # four questions at once (two clinicians each)


def test_fake_server_answers_valid_varied_json_with_real_token_counts(tmp_path):
    module = fake_server_module()
    import random

    schema = {"title": "Ranked", "type": "object", "required": ["ranking", "answer", "confidence", "why"],
              "properties": {"ranking": {"type": "array", "items": {"type": "string", "enum": list("ABCDE")},
                                         "minItems": 5, "maxItems": 5},
                             "answer": {"type": "string", "enum": list("ABCDE")},
                             "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                             "why": {"type": "string", "maxLength": 40}}}
    answers = [module.schema_answer(schema, random.Random(seed)) for seed in range(20)]
    assert all(sorted(a["ranking"]) == list("ABCDE") for a in answers)
    assert all(0 <= a["confidence"] <= 1 and len(a["why"]) <= 40 for a in answers)
    assert len({a["answer"] for a in answers}) > 1 and len({tuple(a["ranking"]) for a in answers}) > 1
    messages = [{"role": "user", "content": "hello world"}]
    assert module.count_prompt_tokens(messages) == 3 + 3 + 1 + 2  # cl100k: "user" 1, "hello world" 2


# ---------------------------------------------------------------- per-call overhead
def test_request_threads_are_reused_and_bounded_by_requests_in_flight():
    import threading
    import time

    from teammed.interrupts import Workers

    pool = Workers(name="test-request")
    for i in range(50):  # one at a time: one thread serves them all
        job = pool.submit(lambda i=i: i * 2)
        assert job.result(5) == i * 2
    assert pool.threads == 1
    gate = threading.Event()
    jobs = [pool.submit(gate.wait) for _ in range(6)]
    time.sleep(0.1)
    gate.set()
    assert all(job.result(5) for job in jobs)
    assert pool.threads == 6  # six at once need six threads, not one per request ever made
    nested = pool.submit(lambda: pool.submit(lambda: 7).result(5))  # a call waiting on a call never deadlocks
    assert nested.result(5) == 7


def test_an_interrupted_wait_gives_up_at_once_and_errors_reach_the_caller():
    import threading
    import time

    from teammed.interrupts import run_interruptible

    hung = threading.Event()
    started = time.monotonic()

    class Closed(Exception):
        pass

    def check() -> None:
        if time.monotonic() - started > 0.3:
            raise Closed

    with pytest.raises(Closed):
        run_interruptible(hung.wait, check=check, poll_s=0.05)  # a hung request, abandoned
    assert time.monotonic() - started < 2
    with pytest.raises(ZeroDivisionError):
        run_interruptible(lambda: 1 / 0, check=lambda: None)
    hung.set()


def test_connections_are_kept_alive_and_never_exceed_the_requests_in_flight(fake_server):
    """httpcore's pool scans every connection and waiting request whenever a request starts or ends
    (over half the CPU at 64 questions in flight); the client keeps a stack of one-connection
    clients instead. A request reuses an idle warm connection, and the connections open never
    exceed the requests that were in flight at once, however many threads send them."""
    import threading

    from teammed.backends.openai_http import OpenAICompatibleClient

    server, log = fake_server(0.05)
    with server:
        client = OpenAICompatibleClient(server.api_base, api_key=None, timeout_s=10)
        start = threading.Barrier(4)

        def ask() -> None:
            start.wait()
            for _ in range(3):
                reply = client.complete(model="openai/fake", messages=[{"role": "user", "content": "hi"}])
                assert reply.choices

        for _ in range(3):  # twelve threads in all, never more than four requests at once
            threads = [threading.Thread(target=ask) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        for _ in range(5):  # one at a time: always the same warm connection
            client.complete(model="openai/fake", messages=[{"role": "user", "content": "hi"}])
        client.close()
        assert all(c.is_closed for c in client._clients) and not client._idle
    requests = _requests(log)
    assert len(requests) == 41
    assert len({r["peer"] for r in requests[-5:]}) == 1
    assert len({r["peer"] for r in requests}) <= 4  # twelve threads, four in flight: four connections at most


def test_close_does_not_wait_for_a_request_in_flight():
    import socket
    import threading
    import time

    from teammed.backends.openai_http import OpenAICompatibleClient

    listener = socket.create_server(("127.0.0.1", 0))
    held = []
    threading.Thread(target=lambda: held.append(listener.accept()), daemon=True).start()  # never answers
    client = OpenAICompatibleClient(f"http://127.0.0.1:{listener.getsockname()[1]}/v1", api_key=None,
                                    timeout_s=3)
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            client.complete(model="openai/fake", messages=[{"role": "user", "content": "hi"}])
        except BaseException as exc:  # noqa: BLE001 - the timeout (or the closed connection) is expected
            errors.append(exc)

    caller = threading.Thread(target=ask)
    caller.start()
    time.sleep(0.3)
    started = time.monotonic()
    client.close()
    assert time.monotonic() - started < 0.5
    caller.join(10)
    assert errors and not caller.is_alive()
    listener.close()


def _raw_server(script, *, close_idle_after: float | None = None, closed=None):  # type: ignore[no-untyped-def]
    """A loopback server that reads each request and answers with ``script(n)`` bytes (n from 1).

    With ``close_idle_after``, it closes each connection that long after its first answer, without
    saying so (as servers drop idle keep-alive connections); ``closed`` (a semaphore) is released
    once per connection closed. Returns the listener, the request count and the number of
    connections accepted."""
    import socket
    import threading
    import time

    listener = socket.create_server(("127.0.0.1", 0))
    count, accepted = [0], [0]

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted[0] += 1
            with conn:
                while True:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    if not data:
                        break
                    head, _, rest = data.partition(b"\r\n\r\n")
                    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                      if line.lower().startswith(b"content-length")))
                    while len(rest) < length:
                        rest += conn.recv(65536)
                    count[0] += 1
                    for part in script(count[0]):
                        conn.sendall(part)
                    if close_idle_after is not None:
                        time.sleep(close_idle_after)
                        break
            if closed is not None:
                closed.release()

    threading.Thread(target=serve, daemon=True).start()
    return listener, count, accepted


def _answer(content: str) -> bytes:
    body = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()
    return (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: " + str(len(body)).encode()
            + b"\r\n\r\n" + body)


def test_an_informational_status_never_hands_one_request_the_answer_to_another():
    """A 102/103 before the answer is skipped (h11 reads on to the final response); a client that took
    it for the answer would hand the next request the previous one's answer on a reused connection."""
    import time

    from teammed.backends.openai_http import OpenAICompatibleClient

    def script(n):  # type: ignore[no-untyped-def]
        if n == 1:
            yield b"HTTP/1.1 102 Processing\r\n\r\n"
            time.sleep(0.2)
        yield _answer(f"answer {n}")

    listener, _, _ = _raw_server(script)
    client = OpenAICompatibleClient(f"http://127.0.0.1:{listener.getsockname()[1]}/v1", api_key=None,
                                    timeout_s=5)
    try:
        first = client.complete(model="openai/fake", messages=[{"role": "user", "content": "1"}])
        second = client.complete(model="openai/fake", messages=[{"role": "user", "content": "2"}])
        assert (first.choices[0].message.content, second.choices[0].message.content) == ("answer 1", "answer 2")
    finally:
        client.close()
        listener.close()


def test_requests_name_their_client_and_take_json():
    """http.client sends no User-Agent of its own; some gateways refuse a request without one."""
    import socket
    import threading

    from teammed import __version__
    from teammed.backends.openai_http import OpenAICompatibleClient

    listener = socket.create_server(("127.0.0.1", 0))
    heads: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            heads.append(data.partition(b"\r\n\r\n")[0].lower())
            conn.sendall(_answer("{}"))

    threading.Thread(target=serve, daemon=True).start()
    client = OpenAICompatibleClient(f"http://127.0.0.1:{listener.getsockname()[1]}/v1", api_key="sk-x",
                                    timeout_s=5)
    client.complete(model="openai/fake", messages=[{"role": "user", "content": "hi"}])
    client.close()
    listener.close()
    assert f"user-agent: teammed/{__version__}".encode() in heads[0]
    assert b"content-type: application/json" in heads[0] and b"authorization: bearer sk-x" in heads[0]


def test_api_base_forms_map_to_the_chat_completions_url():
    from teammed.backends.openai_http import OpenAICompatibleClient

    def url(base: str) -> str:
        return OpenAICompatibleClient(base, api_key=None, timeout_s=1).url

    assert url("http://[::1]/v1") == "http://[::1]/v1/chat/completions"
    assert url("https://example.org/v1/") == "https://example.org/v1/chat/completions"
    assert url("http://h:8080/my%20models/v1?api-version=2") == "http://h:8080/my%20models/v1/chat/completions?" \
                                                              "api-version=2"
    assert url("http://u:p%40ss@h:8080/v1") == "http://h:8080/v1/chat/completions"  # sent as Basic auth
    with pytest.raises(ValueError):
        url("ftp://h/v1")


def test_run_progress_counts_calls_without_dspy_callbacks(tmp_path, capsys, monkeypatch):
    """Progress listens to teammed's own call hooks (`teammed.events.Tracker` on `teammed.usage`): DSPy
    callbacks inspect the arguments of every module and LM call, which cost about an eighth of a call's CPU."""
    from teammed import events

    seen: list[Any] = []
    step = events.Tracker.step

    def spy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(list(dspy.settings.callbacks or []))
        return step(self, *args, **kwargs)

    monkeypatch.setattr(events.Tracker, "step", spy)
    assert main(["run", "--dataset", "demo", "--n", "2", "--model", "scripted", "--n-agents", "3",
                 "--out", str(tmp_path / "r")]) == 0
    assert seen and not any(callbacks for callbacks in seen)  # no DSPy callback installed while it ran
    rows = [json.loads(line) for line in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    err = capsys.readouterr().err
    assert f"{sum(r['calls'] for r in rows)} billable calls" in err  # the live count equals the rows'


def test_output_schema_is_cached_but_each_call_gets_its_own_copy():
    from teammed.schema import output_schema
    from teammed.signatures import InitialAssessment

    first = output_schema(InitialAssessment, {"options": {"A": "x", "B": "y"}})
    first["properties"].clear()
    again = output_schema(InitialAssessment, {"options": {"A": "x", "B": "y"}})
    assert again["properties"] and again == output_schema(InitialAssessment, {"options": {"A": "x", "B": "y"}})


def test_a_keepalive_connection_the_server_closed_while_idle_is_replaced_not_failed():
    """Servers drop idle keep-alive connections (uvicorn after 5 s); the next request must open a fresh
    one rather than fail on the dead socket and wait out a retry backoff."""
    import threading
    import time

    from teammed.backends.openai_http import OpenAICompatibleClient

    closed = threading.Semaphore(0)
    listener, _, accepted = _raw_server(lambda n: [_answer("{}")], close_idle_after=0.05, closed=closed)
    client = OpenAICompatibleClient(f"http://127.0.0.1:{listener.getsockname()[1]}/v1", api_key=None,
                                    timeout_s=5)
    try:
        for _ in range(3):
            assert client.complete(model="openai/fake", messages=[{"role": "user", "content": "hi"}]).choices
            assert closed.acquire(timeout=10)  # the server has dropped the idle connection
            time.sleep(0.05)  # and the FIN has reached the client's socket
    finally:
        client.close()
        listener.close()
    assert accepted[0] == 3


def test_a_failing_listener_neither_fails_the_call_nor_loses_its_usage(caplog):
    from teammed import usage

    class Broken:
        def call_started(self, signature: str) -> None:
            raise BrokenPipeError("stderr is gone")

        def call_finished(self, signature: str, *, tokens: int, latency_s: float, **_: object) -> None:
            raise BrokenPipeError("stderr is gone")

    class Counter:
        calls = 0

        def call_started(self, signature: str) -> None:
            pass

        def call_finished(self, signature: str, *, tokens: int, latency_s: float, **_: object) -> None:
            self.calls += 1

    counter = Counter()
    lm = ScriptedLM()
    with usage.track() as used, usage.listen(Broken()), usage.listen(counter):
        with usage.listen(counter):  # nested: the same listener twice hears each call twice
            lm(messages=[{"role": "user", "content": "hi"}])
        assert counter.calls == 2
        lm(messages=[{"role": "user", "content": "hi"}])  # the outer block still listens
    assert counter.calls == 3 and used.calls == 2
    assert usage._listeners == ()
    assert "usage listener" in caplog.text


def test_the_request_pool_starts_afresh_in_a_forked_child():
    import os

    from teammed import interrupts

    interrupts.run_interruptible(lambda: None, check=lambda: None)  # the parent has an idle thread
    pid = os.fork()
    if pid == 0:  # the child: the inherited pool has no threads; a request must still run
        try:
            ok = interrupts.run_interruptible(lambda: 42, check=lambda: None, poll_s=0.05) == 42
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_calls_in_turn_run_on_the_callers_thread_in_order_with_errors_where_collected():
    import threading

    from teammed.programs.parallel import Background, calls_in_turn, in_turn, parallel_map

    me = threading.get_ident()
    seen: list[int] = []

    def where(x: int) -> int:
        seen.append(x)
        return threading.get_ident()

    with calls_in_turn():
        assert in_turn()
        assert parallel_map(where, [1, 2, 3]) == [me, me, me] and seen == [1, 2, 3]
        with Background() as bg:
            started = bg.start(where, 4)
            failing = bg.start(lambda: 1 / 0)
            assert bg.result(started) == me
            with pytest.raises(ZeroDivisionError):
                bg.result(failing)
    assert not in_turn()
    assert set(parallel_map(where, [5, 6, 7])) != {me}  # outside the block: on the shared workers


def test_calls_in_turn_run_every_item_before_raising_the_first_error_as_on_the_workers():
    from teammed.programs.parallel import calls_in_turn, parallel_map

    ran: list[int] = []

    def call(x: int) -> int:
        ran.append(x)
        if x in (2, 3):
            raise ValueError(f"item {x}")
        return x

    for in_turn in (False, True):
        ran.clear()
        with calls_in_turn(in_turn), pytest.raises(ValueError, match="item 2" if in_turn else "item"):
            parallel_map(call, [1, 2, 3, 4])
        assert sorted(ran) == [1, 2, 3, 4]  # a failed agent's teammates are still asked, in turn or not


def test_a_runs_questions_fan_their_calls_out_on_the_workers(tmp_path, fake_server, monkeypatch):
    """4 questions at --concurrency 8 on 8 slots: each question's side-by-side calls go to the workers."""
    from teammed import interrupts

    handed: list[str] = []
    submit = interrupts.Workers.submit

    def counting(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        handed.append("x")
        return submit(self, fn, *args, **kwargs)

    monkeypatch.setattr(interrupts.Workers, "submit", counting)
    server, _ = fake_server(0.02)
    with server:
        assert main(["run", "--dataset", "demo", "--n", "4", "--preset", "base", "--n-agents", "3",
                     "--model", "openai/fake", "--api-base", server.api_base, "--no-cache", "--retry-attempts", "1",
                     "--concurrency", "8", "--parallel-requests", "8", "--out", str(tmp_path / "small")]) == 0
    assert len(handed) >= 4 * 3  # at least each question's three agents; in turn would hand nothing


def test_concurrent_acalls_share_the_slots_and_warm_connections(fake_server):
    """40 concurrent ``acall``s on 2 request slots: never more than 2 requests at the server, on at
    most 2 connections (one-connection clients, reused), and the 38 waiting calls cost next to no CPU."""
    import asyncio
    import time

    from teammed.backends.litellm_backend import LiteLLMBackend

    server, log = fake_server(0.2)
    with server:
        lm = LiteLLMBackend("openai/fake", api_base=server.api_base, api_key="x", max_parallel_requests=2)

        async def go() -> float:
            cpu = time.process_time()
            replies = await asyncio.gather(*(lm.acall(messages=[{"role": "user", "content": f"hi {i}"}])
                                             for i in range(40)))
            assert all(replies)
            return time.process_time() - cpu

        spent = asyncio.run(go())
        lm.close()
    requests = _requests(log)
    assert len(requests) == 40
    assert max_in_flight(requests) == 2
    assert len({r["peer"] for r in requests}) <= 2
    assert spent < 1.0, spent  # 4 s of waiting
