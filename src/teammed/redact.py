"""Credentials never leave the process: passwords and keys inside URLs and messages are masked."""

from __future__ import annotations

import logging
import re

__all__ = ["redact", "RedactingFilter", "install_log_redaction"]

# scheme://user:password@host  ->  scheme://user:***@host ; scheme://token@host -> scheme://***@host
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^/\s:@]*)(?::(?P<pw>[^/\s@]*))?@")
_QUERY_SECRET = re.compile(r"(?P<k>[?&](?:api[_-]?key|key|token|access_token|password|secret|sig)=)[^&\s#]+", re.I)
_BEARER = re.compile(r"(?P<k>\bBearer\s+)[A-Za-z0-9._~+/=-]{8,}", re.I)
_SK = re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}\b")


def _userinfo(match: re.Match[str]) -> str:
    if match.group("pw") is not None:
        return f"{match.group('scheme')}{match.group('user')}:***@"
    return f"{match.group('scheme')}***@"


def redact(text: object) -> str:
    """``text`` with URL credentials, key query parameters, bearer tokens and sk- keys masked."""
    value = str(text)
    value = _USERINFO.sub(_userinfo, value)
    value = _QUERY_SECRET.sub(lambda m: f"{m.group('k')}***", value)
    value = _BEARER.sub(lambda m: f"{m.group('k')}***", value)
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
