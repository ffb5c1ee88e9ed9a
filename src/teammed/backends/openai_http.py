"""A direct HTTP client for OpenAI-compatible servers (``openai/<alias> --api-base URL``, the embedded model).

litellm is the way to every provider, but for a server that already speaks OpenAI's
chat-completions protocol it adds ~3 s of import and several milliseconds of CPU per call
(request transformation, logging objects, cost lookup) to a request it sends unchanged. This
client sends the same body (model alias, messages, ``response_format``, sampling parameters)
over one keep-alive ``http.client`` connection per request thread and returns a small typed
response.

Errors keep litellm's semantics for `teammed.backends.faults.classify`: an HTTP error carries
``status_code``, the response ``headers`` (``Retry-After``) and the server's body in its
message; timeouts, refused and dropped connections are the socket's own exceptions (``TimeoutError``,
``ConnectionRefusedError``, ``http.client.RemoteDisconnected``, ...); a 200 whose
body is not a chat completion is `GarbageResponse` (retried as transient).
"""

from __future__ import annotations

import base64
import http.client
import json
import select
import ssl
import threading
import urllib.parse
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from teammed import __version__

__all__ = ["ChatResponse", "OpenAICompatibleClient", "HTTPStatusError", "GarbageResponse", "ProtocolError"]

# Request fields a chat-completions server takes; everything else DSPy or teammed passes is dropped.
_BODY_FIELDS = ("temperature", "max_tokens", "max_completion_tokens", "top_p", "stop", "seed", "n",
                "response_format", "presence_penalty", "frequency_penalty", "logit_bias", "user")


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Message(_Loose):
    role: str = "assistant"
    content: str | None = None


class Choice(_Loose):
    index: int = 0
    message: Message = Field(default_factory=Message)
    finish_reason: str | None = None


class Usage(_Loose):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


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


# http.client sends none; some gateways refuse requests without one (httpx sent python-httpx/<version>)
_USER_AGENT = f"teammed/{__version__}"


class _Reply:
    """A response read whole: status, headers (``.items()``), body bytes."""

    __slots__ = ("status_code", "headers", "content")

    def __init__(self, status_code: int, headers: Any, content: bytes) -> None:
        self.status_code, self.headers, self.content = status_code, headers, content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")


class ProtocolError(Exception):
    """The server broke HTTP/1.1 in a way that leaves the connection unusable (an informational 1xx
    status where the answer should be); the connection is dropped and the call retried."""


def _stale(sock: Any) -> bool:
    """An idle keep-alive socket that is readable has been closed by the server (or holds junk)."""
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


def _tls_context() -> ssl.SSLContext:
    """The CA bundle httpx and requests trust (certifi), unless the environment names its own."""
    import os

    if os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context()
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


class OpenAICompatibleClient:
    """``client.complete(model=..., messages=..., **params) -> ChatResponse`` against ``api_base``.

    Requests go over the standard library's ``http.client``, with keep-alive connections kept in a
    last-in-first-out stack of idle ones (at most ``max_connections``, the deployment's request
    slots). httpx cost about 0.3 ms of CPU per request (URL merging, cookies, auth and redirect
    handling, h11's state machine), over 40% of a call's framework CPU, and its pool scanned every
    connection on every request. A connection the server closed while idle is detected before
    reuse and replaced, as httpcore does; one in an unknown state (an error, an informational
    status) is never reused. `close` closes the idle connections; those in use are closed when
    their request ends, so closing never waits on a request.
    """

    def __init__(self, api_base: str, *, api_key: str | None, timeout_s: float, max_connections: int | None):
        parts = urllib.parse.urlsplit(api_base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"--api-base {api_base!r} is not an http(s) URL")
        self._scheme, self._host = parts.scheme, parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        path = urllib.parse.quote(parts.path.rstrip("/") + "/chat/completions", safe="/%:@!$&'()*+,;=~")
        self._path = path + (f"?{parts.query}" if parts.query else "")
        basic = (f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
                 if parts.username else None)
        self._basic = "Basic " + base64.b64encode(basic.encode()).decode() if basic else None
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_connections = max_connections or 100
        self._idle: list[http.client.HTTPConnection] = []
        self._closed = False
        self._tls: ssl.SSLContext | None = None
        self._lock = threading.Lock()

    def _checkout(self) -> http.client.HTTPConnection:
        """The most recently used idle connection (its socket is warm), else a new one."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
            if conn is None and self._scheme == "https" and self._tls is None:
                self._tls = _tls_context()  # built once: loading the CA bundle costs ~10 ms
        if conn is None:
            if self._scheme == "https":
                return http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout_s, context=self._tls)
            return http.client.HTTPConnection(self._host, self._port, timeout=self.timeout_s)
        if conn.sock is not None and _stale(conn.sock):
            conn.close()  # reconnects on the next request
        return conn

    def _checkin(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self.max_connections:
                self._idle.append(conn)
                return
        conn.close()

    def _post(self, body: bytes, headers: dict[str, str]) -> _Reply:
        conn = self._checkout()
        try:
            conn.request("POST", self._path, body=body, headers=headers)
            response = conn.getresponse()
            if response.status < 200:  # http.client skips only 100; the real answer would follow later
                raise ProtocolError(f"the server sent an informational HTTP {response.status} in place of "
                                    f"its answer")
            content = response.read()
        except BaseException:
            conn.close()  # never reuse a connection in an unknown state
            raise
        if response.will_close:
            conn.close()
        self._checkin(conn)
        return _Reply(response.status, response.headers, content)

    def complete(self, *, model: str, messages: list[dict[str, Any]], api_key: str | None = None,
                 **params: Any) -> ChatResponse:
        body: dict[str, Any] = {"model": model.split("/", 1)[1] if "/" in model else model, "messages": messages}
        body.update({k: v for k, v in params.items() if k in _BODY_FIELDS and v is not None})
        key = api_key or self.api_key
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": _USER_AGENT}
        if self._basic:  # credentials in the URL win, as with httpx and requests
            headers["Authorization"] = self._basic
        elif key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
        response = self._post(data, headers)
        if response.status_code >= 400:
            raise HTTPStatusError(response.status_code, response.text, response.headers)
        try:
            return ChatResponse.model_validate_json(response.content)
        except ValueError as exc:
            raise GarbageResponse(f"the server's answer is not a chat completion: {response.text[:300]!r}") \
                from exc

    def close(self) -> None:
        """Close the idle connections; those in use close when their request ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
