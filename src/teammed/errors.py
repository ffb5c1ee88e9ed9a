"""The exceptions teammed raises: one base class, a few specific kinds."""

from __future__ import annotations

from typing import TypeVar

__all__ = [
    "TeammedError",
    "ConfigError",
    "BackendError",
    "FatalBackendError",
    "TransientBackendError",
    "DataError",
    "ProgramMismatchError",
    "NoAnswerError",
    "WorkFailed",
    "cause_of",
]

E = TypeVar("E", bound=BaseException)


class TeammedError(Exception):
    """Base class of every error teammed raises on purpose."""


class ConfigError(TeammedError, ValueError):
    """A configuration breaks a rule; the message names the rule, the value and the fix."""


class WorkFailed(TeammedError):
    """The work ran and failed (a run whose questions kept failing, a tune or search that cannot
    succeed): what was finished is saved; the command exits 1, not 2 (careless input)."""


class BackendError(TeammedError):
    """A language-model backend failed in a way retrying cannot fix."""


class FatalBackendError(BackendError):
    """A backend error no retry can fix: bad credentials, unknown model, refused request, dead server.

    ``kind`` is one of ``authentication``, ``permission``, ``not_found``, ``bad_request``,
    ``connection``, ``dns``, ``tls``, ``scheme``, ``response_format``, ``proxy`` (the proxy of the
    environment is unreachable) or ``unavailable`` (calls kept failing after every retry:
    `teammed.backends.retry.RetryPolicy.give_up_after`); ``fix`` is one sentence naming what to change.
    """

    def __init__(self, message: str, *, kind: str, fix: str = ""):
        super().__init__(f"{message} {fix}".strip())
        self.kind = kind
        self.fix = fix


class TransientBackendError(BackendError):
    """A backend error that retrying may fix (rate limit, overload, timeout) after retries ran out."""


class NoAnswerError(TeammedError):
    """A system produced no parseable final answer (every final ranking fell back to a default)."""


class DataError(TeammedError):
    """A data set cannot be found, read or mapped to questions."""


class ProgramMismatchError(TeammedError):
    """A compiled program was loaded into a different configuration than it was compiled for."""


def cause_of(exc: BaseException | None, kind: type[E]) -> E | None:
    """The first exception of type ``kind`` along ``exc``'s cause/context chain (``exc`` included),
    at most 20 links deep; None when there is none."""
    for _ in range(20):
        if exc is None or isinstance(exc, kind):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None
