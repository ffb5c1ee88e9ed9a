"""How a refusal or a failure reads: one printable line naming the cause and the fix.

The CLI prints these; they are plain functions of the exception so a notebook or another front
end can show the same words.
"""

from __future__ import annotations

import errno
import re

__all__ = ["printable", "one_line", "describe_os_error", "value_message", "storage_message"]


# Control characters (C0 but newline and tab, DEL, C1) and bidirectional overrides: from a question, an
# option or a model's answer they would move the cursor, recolour or retitle the terminal, or reorder text.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: each control character shown as its escape (``\\x1b``)."""
    return _UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], text)


def one_line(text: object) -> str:
    """Any message as one line (pydantic and JSON errors span several)."""
    return " ".join(str(text).split())


def describe_os_error(exc: OSError, *, where: object = None) -> tuple[str, int]:
    """A one-line message naming the path and the fix, and the exit code (2: the user's path; 1: the machine).

    ``where`` names what was being written when the error carries no file name (e.g. ``--out``).
    """
    path = exc.filename if exc.filename is not None else (where or "the output files")
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"no space left on the device writing {path}; free space or choose another --out", 1
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"cannot write {path} ({reason}); choose a writable --out directory", 2
    if exc.errno == errno.ENOTDIR:
        return f"{path} is under a file, not a directory ({reason}); choose another --out", 2
    if exc.errno == errno.EISDIR:
        return f"{path} is a directory where a file was expected; give a file path", 2
    if exc.errno == errno.ENOENT:
        return f"{path} does not exist; check the path", 2
    if isinstance(exc, FileExistsError):
        return one_line(exc), 2
    return f"{one_line(exc)}", 1


def value_message(exc: ValueError) -> str:
    """A value from user input that a library refused, in one line."""
    from pydantic import ValidationError

    from teammed.inputs import validation_message

    if isinstance(exc, ValidationError):  # a value a user supplied broke a model's rule
        return validation_message(exc)
    return f"{one_line(exc)}"


def storage_message(exc: Exception, storage: str | None = None) -> str | None:
    """What a failure of the study database (--storage) says, or None for any other exception."""
    if type(exc).__module__.startswith("sqlalchemy"):  # the study database (--storage)
        first = one_line(str(exc).split("\n")[0].split("(Background on this error")[0])
        if any(sign in first.lower() for sign in ("disk is full", "database or disk is full", "no space left")):
            return (f"the --storage database cannot grow: the disk is full ({first}); free space on that disk "
                    f"(`df -h`), or give --storage on another, then run the command again (it resumes)")
        return (f"cannot use the --storage database: {first}; check the URL, that the server runs "
                f"and the credentials")
    if type(exc).__name__ == "StorageInternalError":  # the study storage, mid-command
        cause = one_line(str(exc.__cause__ or exc).split("\n")[0].split("(Background on this error")[0])
        storage = storage or "the study database (in --out)"
        return (f"the Optuna study storage {storage} failed ({cause}); if its file is damaged, move it "
                f"away (or delete it) to start the study afresh, or restore a copy")
    return None
