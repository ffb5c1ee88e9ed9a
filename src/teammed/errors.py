"""The exceptions teammed raises: one base class, a few specific kinds."""

from __future__ import annotations

__all__ = ["TeammedError", "ConfigError", "BackendError", "DataError", "ProgramMismatchError"]


class TeammedError(Exception):
    """Base class of every error teammed raises on purpose."""


class ConfigError(TeammedError, ValueError):
    """A configuration breaks a rule; the message names the rule, the value and the fix."""


class BackendError(TeammedError):
    """A language-model backend failed in a way retrying cannot fix."""


class DataError(TeammedError):
    """A data set cannot be found, read or mapped to questions."""


class ProgramMismatchError(TeammedError):
    """A compiled program was loaded into a different configuration than it was compiled for."""
