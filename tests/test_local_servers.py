"""Local servers work with the defaults: a llama.cpp server is sized by its slots; Ollama needs no variable."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from teammed.backends.resolve import DEFAULT_TIMEOUT_S, LOCAL_TIMEOUT_S, BackendOptions, open_deployments
from tests.fake_openai import FakeOpenAI, completion


class _LlamaCpp:
    """A fake llama.cpp server: /props with total_slots, /slots, and chat completions."""

    def __init__(self, slots: int, *, props: bool = True):
        outer = self
        self.requests: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                outer.requests.append(self.path)
                if self.path == "/props" and props:
                    self._send(200, {"total_slots": slots, "default_generation_settings": {}})
                elif self.path == "/slots":
                    self._send(200, [{"id": i} for i in range(slots)])
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                self._send(200, completion('{"answer": "A", "confidence": "High"}'))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def _opened(api_base, **flags):
    options = BackendOptions(api_base=api_base, **flags)
    with open_deployments(["openai/any"], options=options) as deployments:
        lm = deployments[0].lm
        return lm.max_parallel_requests, lm.timeout_s


@pytest.mark.parametrize("props", [True, False])
def test_a_llamacpp_server_is_sized_by_its_slots_and_gets_the_local_timeout(props):
    with _LlamaCpp(3, props=props) as server:
        assert _opened(server.api_base) == (3, LOCAL_TIMEOUT_S)
        assert "/props" in server.requests  # asked at the server's root, not under /v1


def test_flags_win_over_what_the_server_says():
    with _LlamaCpp(3) as server:
        assert _opened(server.api_base, max_parallel_requests=1, timeout_s=30.0) == (1, 30.0)
        assert _opened(server.api_base, timeout_s=30.0) == (3, 30.0)


def test_the_command_line_sizes_a_llamacpp_server_by_its_slots_unless_told():
    """The same through `teammed run`'s flags. Without --max-parallel-requests the CLI used to pass its
    default (4 x --concurrency) as if it were the flag, so a 3-slot server got 16 requests in flight."""
    from teammed.cli import build_parser, spec_of
    from teammed.experiments._backend import open_backends

    def opened(api_base: str, *flags: str) -> tuple[int, float]:
        args = build_parser().parse_args(["run", "--dataset", "demo", "--model", "openai/any", "--api-base",
                                          api_base, "--no-cache", *flags])
        with open_backends(spec_of(args).backend, command="run") as deployments:
            return deployments[0].lm.max_parallel_requests, deployments[0].lm.timeout_s

    with _LlamaCpp(3) as server:
        assert opened(server.api_base) == (3, LOCAL_TIMEOUT_S)
        assert opened(server.api_base, "--max-parallel-requests", "2", "--timeout", "30") == (2, 30.0)
    with FakeOpenAI(lambda n, body: completion("{}")) as server:  # not llama.cpp: 4 x --concurrency
        assert opened(server.api_base) == (16, DEFAULT_TIMEOUT_S)
        assert opened(server.api_base, "--concurrency", "2") == (8, DEFAULT_TIMEOUT_S)


def test_another_server_keeps_the_remote_defaults():
    with FakeOpenAI(lambda n, body: completion("{}")) as server:
        assert _opened(server.api_base) == (4, DEFAULT_TIMEOUT_S)


def test_a_dead_port_is_not_a_llamacpp_server_and_costs_no_wait():
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.perf_counter()
    assert _opened(f"http://127.0.0.1:{port}/v1") == (4, DEFAULT_TIMEOUT_S)
    assert time.perf_counter() - started < 2.5


def test_ollama_on_its_default_port_needs_no_variable(monkeypatch):
    monkeypatch.delenv("OLLAMA_API_BASE", raising=False)
    with open_deployments(["ollama/llama3"], options=BackendOptions()) as deployments:
        assert deployments[0].lm.model == "ollama/llama3"  # opened: no "set OLLAMA_API_BASE" refusal
