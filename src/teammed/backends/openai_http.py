"""A direct client for OpenAI-compatible servers (``openai/<alias> --api-base URL``, the embedded model).

It sends the body litellm would send (`request_body`) over httpx, used as shipped (``trust_env``:
proxies, ``SSL_CERT_FILE``/``SSL_CERT_DIR``, redirects, keep-alive), without litellm's import and
per-call CPU, and returns a small typed response. A deployment's stack of one-connection
`httpx.Client`s and which requests run on their caller's thread: docs/backends.md; the measured reasons
for each choice: docs/architecture.md ("Framework CPU per call"). Errors keep litellm's semantics for
`teammed.backends.faults.classify`: `HTTPStatusError` carries ``status_code`` and ``headers``; a
200 that is not a chat completion is `GarbageResponse`.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import json
import logging
import os
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from teammed import __version__

__all__ = ["ChatResponse", "OpenAICompatibleClient", "HTTPStatusError", "GarbageResponse", "request_body",
           "NOT_SENT"]

# What litellm consumes itself and never puts in the body of an OpenAI-compatible request.
NOT_SENT = frozenset({
    "api_key", "api_base", "base_url", "api_version", "organization", "timeout", "num_retries", "max_retries",
    "metadata", "caching", "cache", "rollout_id", "mock_response", "custom_llm_provider", "drop_params",
    "extra_headers", "extra_body", "headers", "litellm_logging_obj", "model_list", "input_cost_per_token",
    "output_cost_per_token", "max_parallel_requests", "rpm", "tpm", "api_key_env", "structured_output",
    "stream_options_default", "client",
    # litellm sends ``user`` only for the names of OpenAI's own catalog (an OpenAI-compatible server
    # may refuse it); a server behind --api-base serves its own model names, so it is not sent
    "user",
})


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Message(_Loose):
    role: str = "assistant"
    content: str | None = None


class Choice(_Loose):
    index: int = 0
    message: Message = Field(default_factory=Message)
    finish_reason: str | None = None


class PromptTokensDetails(_Loose):
    cached_tokens: int | None = None


class Usage(_Loose):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    prompt_tokens_details: PromptTokensDetails | None = None


class ChatResponse(_Loose):
    """The part of a chat completion teammed reads (``dict(response.usage)`` works as with litellm's)."""

    id: str = ""
    model: str = ""
    choices: list[Choice]
    usage: Usage = Field(default_factory=Usage)


class HTTPStatusError(Exception):
    """The server answered with an error status; ``str()`` carries its body for `classify`."""

    def __init__(self, status_code: int, body: str, headers: Any):
        super().__init__(f"HTTP {status_code}: {body[:2000]}")
        self.status_code = status_code
        self.headers = headers


class GarbageResponse(Exception):
    """A 200 whose body is not a chat completion."""


_USER_AGENT = f"teammed/{__version__}"


def request_body(model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> tuple[dict[str, Any],
                                                                                              dict[str, str]]:
    """The JSON body and the extra headers litellm sends an OpenAI-compatible server for these parameters.

    Every parameter reaches the server (``seed``, ``top_p``, ``logprobs``, ``reasoning_effort``,
    a server's own such as vLLM's ``top_k``, ...), except what litellm consumes itself
    (`NOT_SENT`) and ``None`` values; ``extra_body`` is merged into the body and
    ``extra_headers`` become headers, as litellm does. ``tests/test_transport_parity.py``
    compares the result with litellm's own request over a table of parameters.
    """
    body: dict[str, Any] = {"model": model.split("/", 1)[1] if "/" in model else model, "messages": messages}
    for key, value in params.items():
        if key not in NOT_SENT and value is not None:
            body[key] = value
    extra = params.get("extra_body")
    if isinstance(extra, dict):
        body.update(extra)
    headers = {str(k): str(v) for k, v in (params.get("extra_headers") or {}).items()}
    return body, headers


@functools.lru_cache(maxsize=8)
def tls_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """One TLS context per CA configuration for the whole process: loading a CA bundle costs ~30 ms
    of CPU, and every request thread of every deployment needs one. The arguments are the values of
    ``SSL_CERT_FILE``/``SSL_CERT_DIR`` (the cache key); httpx reads them from the environment."""
    return httpx.create_ssl_context(trust_env=True)


def _split_userinfo(api_base: str) -> tuple[str, httpx.BasicAuth | None]:
    """``api_base`` without ``user:password@`` and the Basic auth it stood for (credentials in the URL
    win over the key, as with httpx and requests)."""
    parts = urllib.parse.urlsplit(api_base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--api-base {api_base!r} is not an http(s) URL")
    if not parts.username:
        return api_base, None
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    auth = httpx.BasicAuth(urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or ""))
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)), auth


_READ = httpx.ByteStream(b"")  # the stream of a response whose body has been read

logger = logging.getLogger(__name__)

KEEPALIVE_S = 5.0  # an idle connection is closed after this long (httpx's default)

# httpcore's trace events that hand over a new connection's stream (direct, through a proxy, TLS)
_CONNECTED = ("connect_tcp.complete", "connect_unix_socket.complete", "start_tls.complete")


class _Deadlines:
    """One daemon thread that calls each registered function when its time (`time.monotonic`) comes,
    unless cancelled first: the whole-request deadlines of every synchronous request, with no
    thread started per request. A cancelled function is dropped at once (the heap keeps only its
    number), so nothing a request made outlives it here."""

    def __init__(self) -> None:
        self._reset()
        if hasattr(os, "register_at_fork"):  # a forked child has no thread: it starts its own on first use
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._heap: list[tuple[float, int]] = []
        self._due: dict[int, Callable[[], None]] = {}
        self._cond = threading.Condition()
        self._count = 0
        self._thread: threading.Thread | None = None

    def add(self, when: float, fn: Callable[[], None]) -> int:
        with self._cond:
            self._count += 1
            self._due[self._count] = fn
            heapq.heappush(self._heap, (when, self._count))
            if self._thread is None or not self._thread.is_alive():
                thread = threading.Thread(target=self._loop, name="teammed-deadlines", daemon=True)
                thread.start()
                self._thread = thread
            self._cond.notify()
            return self._count

    def cancel(self, number: int) -> None:
        with self._cond:
            self._due.pop(number, None)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][1] not in self._due:  # cancelled ones go at once
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                _, number = heapq.heappop(self._heap)
                fn = self._due.pop(number, None)
            if fn is not None:
                try:
                    fn()
                except Exception:  # noqa: BLE001 - one deadline's failure must not stop the others'
                    logger.exception("a request's deadline could not cut it off")
                fn = None  # holds the request's lane: let it go now, not at the next deadline


_DEADLINES = _Deadlines()


class RequestDeadlineExceeded(httpx.TimeoutException):
    """The server did not send its whole answer within the request's deadline (``--timeout``), which
    bounds the complete request, not each read. Transient: retried, then a failed question like a 500."""

    @classmethod
    def after(cls, timeout_s: float) -> RequestDeadlineExceeded:
        return cls(f"no complete answer within the request's deadline ({timeout_s:g} s, --timeout: it bounds "
                   f"the whole request, not each read)")


class _Lane:
    """One one-connection `httpx.Client` and the socket of its connection, so that `abort` can cut
    a request in flight off from another thread (closing a socket does not wake a thread blocked
    reading it; shutting it down does)."""

    __slots__ = ("client", "owner", "stream", "idle_since", "expired", "request", "lock")

    def __init__(self, client: httpx.Client, owner: OpenAICompatibleClient) -> None:
        self.client, self.owner = client, owner
        self.stream: Any = None
        self.idle_since = 0.0  # when its last request ended
        self.expired = False  # the request in flight passed its deadline
        self.request = 0  # which request of this lane is in flight (a late deadline of an earlier one is ignored)
        self.lock = threading.Lock()  # a deadline's check and cut, and the request's end, one at a time

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's ``trace`` extension: keeps the stream of each connection this client makes."""
        if event.endswith(_CONNECTED):
            self.stream = info.get("return_value")
            if self.owner._closed or self.expired:  # closed, or past its deadline, while connecting
                self.abort()

    def expire(self, request: int) -> None:
        """Request ``request``'s deadline passed: cut it off (now, or as soon as its connection is made)
        if it is still the one in flight."""
        with self.lock:
            if request == self.request:
                self.expired = True
                self.abort()

    def warm(self) -> bool:
        """Whether this client's connection is open and idle, so a request on it needs no connect.
        httpcore reconnects, on the calling thread, when the connection was idle past its keep-alive
        expiry or the server closed it (an idle socket that reads as readable: httpcore's own test)."""
        if self.stream is None or time.monotonic() - self.idle_since > KEEPALIVE_S - 0.5:
            return False
        try:
            return not self.stream.get_extra_info("is_readable")
        except Exception:  # noqa: BLE001 - a stream that cannot tell: treat it as needing a connect
            return False

    def abort(self) -> None:
        sock = self.stream.get_extra_info("socket") if self.stream is not None else None
        # the plain socket's shutdown (a TLS socket's would also drop its TLS state under the reader)
        if sock is not None:
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)


class OpenAICompatibleClient:
    """``client.complete(model=..., messages=..., **params) -> ChatResponse`` against ``api_base``."""

    def __init__(self, api_base: str, *, api_key: str | None, timeout_s: float):
        base, self._auth = _split_userinfo(api_base)
        parts = urllib.parse.urlsplit(base)
        path = parts.path.rstrip("/") + "/chat/completions"
        self.url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))
        self._url = httpx.URL(self.url)  # parsed once: httpx parses a string URL on every request (~7% of its CPU)
        self.api_key = api_key
        self.timeout_s = timeout_s
        self._tls: ssl.SSLContext | None = None
        self._lock = threading.Lock()
        self._idle: list[_Lane] = []  # a stack: the most recently used connection is reused first
        self._clients: set[_Lane] = set()
        self._closed = False

    # ------------------------------------------------------------------ clients
    def _new_client(self) -> httpx.Client:
        """A one-connection client. Its TLS context is the deployment's, from ``SSL_CERT_FILE``/``SSL_CERT_DIR``
        as they are at its first connect, else certifi's (httpx's ``trust_env``), built once per CA
        configuration (`tls_context`: httpx builds a new one per client for ``verify=True``, ~30 ms of CPU)."""
        if self._tls is None:
            self._tls = tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        return httpx.Client(trust_env=True, follow_redirects=True, timeout=httpx.Timeout(self.timeout_s),
                            verify=self._tls, auth=self._auth,
                            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1,
                                                keepalive_expiry=KEEPALIVE_S),
                            headers={"User-Agent": _USER_AGENT, "Accept": "application/json"})

    def _client(self) -> _Lane:
        """An idle one-connection client, or a new one when every client is busy (so there are never
        more connections than requests were in flight at once, which the request slots bound)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the client was closed")
            if self._idle:
                return self._idle.pop()
        lane = _Lane(self._new_client(), self)
        with self._lock:
            self._clients.add(lane)
        return lane

    def _release(self, lane: _Lane) -> None:
        lane.idle_since = time.monotonic()
        with self._lock:
            if not self._closed and not lane.client.is_closed:
                self._idle.append(lane)
                return
            self._clients.discard(lane)
        lane.client.close()

    # ------------------------------------------------------------------ calls
    @staticmethod
    def _read(response: httpx.Response) -> ChatResponse:
        # An httpx response and its stream refer to each other: a cycle that only the garbage collector
        # frees, with the request, its pool entry, an event and its locks hanging off it (48 objects a
        # call, at every call). The body has been read, so the stream is done with: dropping it lets
        # reference counting free them all when the response goes.
        for done in (*response.history, response):
            done.stream = _READ
        if response.status_code >= 400:
            raise HTTPStatusError(response.status_code, response.text, response.headers)
        try:
            return ChatResponse.model_validate_json(response.content)
        except ValueError as exc:
            raise GarbageResponse(f"the server's answer is not a chat completion: {response.text[:300]!r}") \
                from exc

    def complete(self, *, model: str, messages: list[dict[str, Any]], api_key: str | None = None,
                 connect_with: Callable[[Callable[[], httpx.Response]], httpx.Response] | None = None,
                 deadline: float | None = None, **params: Any) -> ChatResponse:
        """``connect_with(post)`` sends a request that must first open its connection (``post`` otherwise
        runs here): `close` cannot cut a connect or a TLS handshake off, so a caller that must be freed at
        once hands those to a thread it can leave (`teammed.interrupts.run_interruptible`).
        The whole request ends by ``deadline`` (`time.monotonic`; default: ``timeout_s`` from now), else
        `RequestDeadlineExceeded`: httpx's timeouts bound each read and write, not the request."""
        body, headers = request_body(model, messages, params)
        headers["Content-Type"] = "application/json"
        key = api_key or self.api_key
        if key and self._auth is None:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
        lane = self._client()
        lane.request += 1
        lane.expired = False
        deadline = time.monotonic() + self.timeout_s if deadline is None else deadline

        def post() -> httpx.Response:
            return lane.client.post(self._url, content=data, headers=headers, extensions={"trace": lane.trace})

        timer = _DEADLINES.add(deadline, functools.partial(lane.expire, lane.request))
        try:
            response = post() if connect_with is None or lane.warm() else connect_with(post)
        except httpx.HTTPError as exc:
            if lane.expired:
                raise RequestDeadlineExceeded.after(self.timeout_s) from exc
            raise
        finally:  # after an error httpcore has dropped the connection: the client stays usable
            _DEADLINES.cancel(timer)
            with lane.lock:
                lane.request += 1  # a deadline firing late finds another request number and leaves it alone
            self._release(lane)
        return self._read(response)

    def close(self) -> None:
        """Refuse further requests, close the connections and cut off the synchronous requests in
        flight (their callers get a connection error at once); closing never waits on a request."""
        with self._lock:
            self._closed = True
            lanes = list(self._clients)
            self._clients = set()
            self._idle.clear()
        for lane in lanes:
            lane.abort()
            with contextlib.suppress(Exception):  # a client in use by a hung request: it closes when that ends
                lane.client.close()
