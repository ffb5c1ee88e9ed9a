"""What a backend failure means: retry it, degrade the response format, or stop with a fix.

litellm wraps provider errors in many ways (a missing OpenAI/Azure key arrives as a
500 ``APIError``; llama.cpp refuses ``json_schema`` with a 500; DSPy may wrap litellm's
exception again). `classify` walks the exception chain and decides by class, status and
message, in that order of trust.
"""

from __future__ import annotations

import email.utils
import re
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from teammed.backends.dialects import is_format_rejection
from teammed.errors import FatalBackendError
from teammed.redact import redact

__all__ = ["Fault", "classify", "retry_after_seconds", "status_of", "fatal_error", "proxy_for"]

TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})

_KEY_MISSING = re.compile(r"api[_ ]?key|no api key|missing credentials|authentication|unauthori[sz]ed|"
                          r"incorrect api key|invalid.api.key|OPENAI_API_KEY|AZURE_API_KEY", re.I)
_REFUSED = re.compile(r"connection refused|errno 111|no route to host", re.I)
_UNRESOLVED = re.compile(r"name or service not known|nodename nor servname|failed to resolve|getaddrinfo failed|"
                         r"temporary failure in name resolution|errno -[235]\b|no address associated", re.I)
_TLS_VERIFY = re.compile(r"certificate[_ ]verify[_ ]failed|self[- ]signed certificate|unable to get local issuer|"
                         r"certificate has expired|hostname mismatch|doesn't match|IP address mismatch", re.I)
_WRONG_SCHEME = re.compile(r"wrong[_ ]version[_ ]number|record[_ ]layer[_ ]failure|packet length too long|"
                           r"unknown protocol|http request\b.*\bhttps|plain http request was sent to https", re.I)


@dataclass(frozen=True)
class Fault:
    """``action`` is ``retry``, ``degrade`` or ``fatal``; ``kind`` names the fatal kind: ``authentication``,
    ``permission``, ``not_found``, ``bad_request``, ``connection`` (refused), ``dns`` (the host does not
    resolve), ``tls`` (the certificate is not trusted) or ``scheme`` (``https://`` to a plain-HTTP port)."""

    action: str
    kind: str | None
    status: int | None
    message: str
    retry_after: float | None = None


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    node: BaseException | None = exc
    while node is not None and node not in seen and len(seen) < 8:
        seen.append(node)
        node = node.__cause__ or node.__context__
    return seen


def _no_response(exc: BaseException) -> bool:
    """The call never got an HTTP answer: a socket/TLS error or a client's connect error in the chain."""
    return any(isinstance(node, OSError) or type(node).__name__ in ("ConnectError", "APIConnectionError")
               for node in _chain(exc)[1:])


def status_of(exc: BaseException) -> int | None:
    """The HTTP status anywhere in the chain (the outermost that has one)."""
    for node in _chain(exc):
        for value in (getattr(node, "status_code", None), getattr(node, "status", None),
                      getattr(getattr(node, "response", None), "status_code", None)):
            if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
                return value
    return None


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    items = headers.items() if hasattr(headers, "items") else headers
    return next((str(value) for key, value in items if str(key).lower() == name), None)


def _parse_retry_after(value: Any) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        try:
            when = email.utils.parsedate_to_datetime(str(value))
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, seconds) if seconds == seconds and seconds != float("inf") else None


def retry_after_seconds(exc: BaseException) -> float | None:
    """The server's ``Retry-After``: litellm puts the headers on ``litellm_response_headers``."""
    for node in _chain(exc):
        for headers in (getattr(node, "litellm_response_headers", None),
                        getattr(getattr(node, "response", None), "headers", None),
                        getattr(node, "headers", None)):
            for name in ("retry-after", "x-retry-after", "retry-after-ms"):
                seconds = _parse_retry_after(_header(headers, name))
                if seconds is not None:
                    return seconds / 1000.0 if name == "retry-after-ms" else seconds
        value = getattr(node, "retry_after", None)  # DSPy's lm15 errors carry it parsed
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return float(value)
    return None


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for node in _chain(exc) for cls in type(node).__mro__}


# a refusal the server answered with: its kind, by status or by the exception's class names
_REFUSALS: tuple[tuple[str, frozenset[int], frozenset[str]], ...] = (
    ("authentication", frozenset({401}), frozenset({"AuthenticationError", "AuthError"})),
    ("permission", frozenset({403}), frozenset({"PermissionDeniedError"})),
    ("not_found", frozenset({404}), frozenset({"NotFoundError", "UnsupportedModelError"})),
    ("bad_request", frozenset({400, 413, 422}), frozenset({"BadRequestError", "UnprocessableEntityError",
                                                           "InvalidRequestError", "ContextWindowExceededError",
                                                           "ContextLengthError"})),
)

# why no server answered: a certificate refused, the wrong scheme, or a name that did not resolve (in that order)
_UNREACHED: tuple[tuple[re.Pattern[str], str], ...] = ((_TLS_VERIFY, "tls"), (_WRONG_SCHEME, "scheme"),
                                                       (_UNRESOLVED, "dns"))


def classify(exc: BaseException) -> Fault:
    """Decide what to do about one failed backend call."""
    status = status_of(exc)
    text = " ".join(" ".join(str(node) for node in _chain(exc)).split())  # what to decide on
    message = redact(" ".join(str(exc).split()))  # what to show
    names = _names(exc)
    if is_format_rejection(text, status) and not ({"Timeout", "TimeoutError", "APIConnectionError"} & names):
        return Fault("degrade", "response_format", status, message)
    refused = next((kind for kind, statuses, classes in _REFUSALS if status in statuses or classes & names), None)
    if refused is not None:
        return Fault("fatal", refused, status, message)
    # a missing OpenAI/Azure key arrives as 500/APIError: only the message says so
    if _KEY_MISSING.search(text) and (status in (None, 500) or "APIError" in names):
        return Fault("fatal", "authentication", status, message)
    # No answer came back (litellm still labels a failed connection "500"): the cause decides.
    unanswered = status is None or _no_response(exc)
    unreached = next((kind for pattern, kind in _UNREACHED if pattern.search(text)), None) if unanswered else None
    if unreached is not None:
        return Fault("fatal", unreached, None, message)
    if _REFUSED.search(text):
        return Fault("fatal", "connection", status, message)
    if status is not None and status not in TRANSIENT_STATUS and status < 500:
        return Fault("fatal", "bad_request", status, message)
    return Fault("retry", None, status, message, retry_after_seconds(exc))  # timeouts, dropped connections, garbage


def proxy_for(url: str) -> str | None:
    """The proxy the environment (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``, any case)
    sends a request to ``url`` through, as httpx's ``trust_env`` does; None for a direct request."""
    parts = urllib.parse.urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return proxy


def fatal_error(fault: Fault, *, head: str, api_base: str | None, key_env: str | None) -> FatalBackendError:
    """The error that stops a run for ``fault`` (a fatal one), said after ``head`` (the model and where
    it is), with its fix; a refused connection to the environment's proxy names the proxy."""
    env = key_env or "the provider's API key variable"
    status = f" (HTTP {fault.status})" if fault.status else ""
    said, kind = fault.message[:300], fault.kind
    base = redact(api_base) if api_base else "the provider's URL"
    proxy = proxy_for(api_base or "https://api.openai.com") if kind == "connection" else None
    if proxy is not None:
        scheme = "HTTPS" if (api_base or "https:").startswith("https") else "HTTP"
        return FatalBackendError(f"{head}: the proxy {redact(proxy)} (from the environment's {scheme}_PROXY) is "
                                 f"unreachable: {said}.", kind="proxy", fix="Start the proxy, correct HTTP_PROXY/"
                                 "HTTPS_PROXY, or add the server's host to NO_PROXY.")
    host = urllib.parse.urlsplit(api_base).hostname if api_base else None
    said_fix = {
        "authentication": (f" refused the credentials{status}: {said}.", f"Set {env} in the environment to a "
                           "valid key."),
        "permission": (f" denied access{status}: {said}.", f"Use a key ({env}) with access to this model."),
        "not_found": (f" does not know this model{status}: {said}.", "Check the model string (provider/model) "
                      "and, for a server, --api-base and its model alias."),
        "connection": (f" is unreachable: {said}.", "Start the server or correct --api-base."),
        "tls": (f": the server's TLS certificate is not trusted: {said}.", "Point SSL_CERT_FILE (a PEM bundle) or "
                "SSL_CERT_DIR at the CA that signed it, e.g. SSL_CERT_FILE=/path/to/ca.pem teammed ... (a "
                "proxy's CA too, behind a corporate proxy)."),
        "scheme": (f": the server does not speak TLS on that port: {said}.", "Use http:// instead of https:// in "
                   f"--api-base ({base}), or the server's TLS port."),
        "dns": (f": the host {host + ' ' if host else ''}cannot be resolved: {said}.", "Check the host name in "
                "--api-base (or the provider's URL) and the DNS/proxy settings (HTTPS_PROXY, NO_PROXY)."),
    }
    text, fix = said_fix.get(kind or "", (f" rejected the request{status}: {said}.",
                                          "Check --max-tokens against the model's context and the server's log."))
    return FatalBackendError(head + text, kind=kind if kind in said_fix else "bad_request", fix=fix)
