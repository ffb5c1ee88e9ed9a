"""A direct HTTP client for OpenAI-compatible servers (``openai/<alias> --api-base URL``, the embedded model).

litellm is the way to every provider, but for a server that already speaks OpenAI's
chat-completions protocol it adds ~3 s of import and several milliseconds of CPU per call
(request transformation, logging objects, cost lookup) to a request it sends unchanged. This
client sends the same body (model alias, messages, ``response_format``, sampling parameters)
with one ``httpx.Client`` per request thread and returns a small typed response.

Errors keep litellm's semantics for `teammed.backends.faults.classify`: an HTTP error carries
``status_code``, the response ``headers`` (``Retry-After``) and the server's body in its
message; timeouts, refused and dropped connections are httpx's own exceptions; a 200 whose
body is not a chat completion is `GarbageResponse` (retried as transient).
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ChatResponse", "OpenAICompatibleClient", "HTTPStatusError", "GarbageResponse"]

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


class OpenAICompatibleClient:
    """``client.complete(model=..., messages=..., **params) -> ChatResponse`` against ``api_base``."""

    def __init__(self, api_base: str, *, api_key: str | None, timeout_s: float, max_connections: int | None):
        self.url = api_base.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_connections = max_connections or 100  # enforced by the backend's request slots
        self._local = threading.local()
        self._clients: list[Any] = []
        self._tls: Any = None
        self._lock = threading.Lock()

    def _http(self) -> Any:
        """This thread's ``httpx.Client`` (one keep-alive connection each).

        One client shared by every thread scanned all of its pooled connections on every
        request (httpcore assigns requests to connections in a loop over the pool): at 64
        questions in flight that scan was over half of the framework's CPU. Requests run on a
        fixed set of pooled threads (`teammed.backends.requests_pool`), so connections are
        still reused, one per thread.
        """
        client = getattr(self._local, "client", None)
        if client is None:
            import httpx

            with self._lock:
                if self._tls is None:  # built once: loading the CA bundle per client cost ~10 ms each
                    self._tls = httpx.create_ssl_context() if self.url.startswith("https:") else False
                client = httpx.Client(timeout=httpx.Timeout(self.timeout_s), trust_env=False, verify=self._tls,
                                      limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))
                self._clients.append(client)
            self._local.client = client
        return client

    def complete(self, *, model: str, messages: list[dict[str, Any]], api_key: str | None = None,
                 **params: Any) -> ChatResponse:
        body: dict[str, Any] = {"model": model.split("/", 1)[1] if "/" in model else model, "messages": messages}
        body.update({k: v for k, v in params.items() if k in _BODY_FIELDS and v is not None})
        key = api_key or self.api_key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        response = self._http().post(self.url, json=body, headers=headers)
        if response.status_code >= 400:
            raise HTTPStatusError(response.status_code, response.text, response.headers)
        try:
            return ChatResponse.model_validate_json(response.content)
        except ValueError as exc:
            raise GarbageResponse(f"the server's answer is not a chat completion: {response.text[:300]!r}") \
                from exc

    def close(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, []
        self._local = threading.local()
        for client in clients:
            client.close()
