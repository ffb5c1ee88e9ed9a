"""Credentials never leave the process: passwords and keys inside URLs and messages are masked."""

from __future__ import annotations

import base64
import logging
import re
import threading
import urllib.parse

__all__ = ["redact", "register_secret", "register_url_credentials", "RedactingFilter", "install_log_redaction"]

# scheme://user:password@host  ->  scheme://user:***@host ; scheme://token@host -> scheme://***@host
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^/\s:@]*)(?::(?P<pw>[^/\s@]*))?@")
# user:password@host where the scheme is mistyped or missing (``postgresql:/u:PW@h``, ``u:PW@h``, ``http//u:PW@h``)
_LOOSE_USERINFO = re.compile(r"(?P<pre>^|[\s/'\"(=])(?P<user>[^/\s:@'\"()=]+):(?P<pw>[^/\s@'\"]+)@(?=[^\s@])")
_QUERY_SECRET = re.compile(r"(?P<k>[?&](?:api[_-]?key|key|token|access_token|password|secret|sig)=)[^&\s#]+", re.I)
_BEARER = re.compile(r"(?P<k>\bBearer\s+)[A-Za-z0-9._~+/=-]{8,}", re.I)
_SK = re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}\b")
_BASIC = re.compile(r"(?P<k>\bBasic\s+)[A-Za-z0-9+/=_-]{4,}", re.I)

# Credentials this process knows (keys read from the environment, passwords inside --api-base), in
# every encoding a server might echo them back in: plain, URL-encoded, and the base64 of a Basic
# header. A server that repeats the Authorization header in an error body cannot leak them.
_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()
_SECRET_PATTERN: re.Pattern[str] | None = None
_MIN_SECRET = 4  # shorter values would mask ordinary words


def register_secret(value: str | None, *, min_length: int = _MIN_SECRET) -> None:
    """Mask ``value`` (and its URL-encoded forms) in everything `redact` returns from now on; values
    shorter than ``min_length`` are not masked (they would mask ordinary words)."""
    if not value or len(value) < max(min_length, _MIN_SECRET):
        return
    forms = {value, urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value)}
    global _SECRET_PATTERN
    with _SECRETS_LOCK:
        if forms <= _SECRETS:
            return
        _SECRETS.update(f for f in forms if len(f) >= _MIN_SECRET)
        alternatives = sorted(_SECRETS, key=len, reverse=True)  # the longest form first
        _SECRET_PATTERN = re.compile("|".join(re.escape(f) for f in alternatives))


def register_url_credentials(url: str | None) -> None:
    """Mask the user:password of ``url`` in every encoding: the password, and the base64 of the
    ``user:password`` pair that a Basic Authorization header carries."""
    if not url:
        return
    parts = urllib.parse.urlsplit(url)
    if parts.password is None and not parts.username:
        return
    user = urllib.parse.unquote(parts.username or "")
    password = urllib.parse.unquote(parts.password or "")
    register_secret(password)
    if parts.password is None:
        register_secret(user)  # scheme://token@host: the user part is the secret
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    register_secret(basic)
    register_secret(basic.rstrip("="))


def _userinfo(match: re.Match[str]) -> str:
    if match.group("pw") is not None:
        return f"{match.group('scheme')}{match.group('user')}:***@"
    return f"{match.group('scheme')}***@"


def redact(text: object) -> str:
    """``text`` with URL credentials, key query parameters, bearer and Basic tokens, sk- keys and every
    registered secret (`register_secret`) masked."""
    value = str(text)
    value = _USERINFO.sub(_userinfo, value)
    value = _LOOSE_USERINFO.sub(lambda m: f"{m.group('pre')}{m.group('user')}:***@", value)
    value = _QUERY_SECRET.sub(lambda m: f"{m.group('k')}***", value)
    value = _BEARER.sub(lambda m: f"{m.group('k')}***", value)
    value = _BASIC.sub(lambda m: f"{m.group('k')}***", value)
    pattern = _SECRET_PATTERN
    if pattern is not None:
        value = pattern.sub("***", value)
    return _SK.sub("sk-***", value)


class RedactingFilter(logging.Filter):
    """A logging filter that masks credentials in every record's final message."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: leave it to logging's own error path
            return True
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def install_log_redaction() -> None:
    """Mask credentials in everything the root logger's handlers print."""
    root = logging.getLogger()
    for handler in root.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
