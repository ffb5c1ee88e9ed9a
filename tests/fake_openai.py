"""A scriptable OpenAI-compatible server on loopback, for backend tests without a network."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, dict[str, str], dict[str, Any]]


def completion(content: str, *, prompt_tokens: int = 11, completion_tokens: int = 7) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # the default backlog of 5 drops connections that arrive together (a 1 s stall)


class FakeOpenAI:
    """``with FakeOpenAI(handler) as server:`` — ``handler(n, request_json)`` returns (status, headers, body)."""

    def __init__(self, handler: Callable[[int, dict[str, Any]], Any], *, tls: tuple[str, str] | None = None,
                 keep_alive: bool = False, idle_close_s: float | None = None):
        """``tls=(certfile, keyfile)`` serves https. A reply's payload may be bytes: sent as they are
        (with the reply's headers, e.g. ``Content-Encoding: gzip``). ``keep_alive`` speaks HTTP/1.1
        and keeps connections open between requests (else each answer closes its connection);
        ``idle_close_s`` closes a kept-alive connection idle that long (a short server keep-alive)."""
        self.handler = handler
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []  # each request's headers, lower-case names
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"
            timeout = idle_close_s  # an idle read that long ends the connection

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                with outer._lock:
                    outer.requests.append(body)
                    outer.paths.append(self.path)
                    outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                    n = len(outer.requests)
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                self._counted = True
                try:
                    self._answer(n, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test): nothing to answer
                finally:
                    self._leave()

            def _leave(self) -> None:
                """No longer in flight: called before the answer goes out (once it is out, the client
                may send its next request, which must not find this one still counted)."""
                if self._counted:
                    self._counted = False
                    with outer._lock:
                        outer.in_flight -= 1

            def _answer(self, n: int, body: dict[str, Any]) -> None:
                reply = outer.handler(n, body)
                if reply == "drop":  # close the connection without an answer
                    self._leave()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if isinstance(reply, bytes):  # raw bytes after a 200 status line (garbage)
                    self._leave()
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)
                    return
                if isinstance(reply, int | float):  # a delay: hang, then answer
                    time.sleep(float(reply))
                    reply = (200, {}, completion("{}"))
                self._leave()
                status, headers, payload = reply
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            self.scheme = "https"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
