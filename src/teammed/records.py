"""Helpers around a run's records: tuning records, digests, the atomic writer.

The results contract itself (`RunIdentity`, `ResultRow`, the typed records, `load_row`, `iter_rows`)
lives in `teammed.results`; its names are re-exported here for the modules that import them from
``teammed.records``.

This module is pure data plus small file helpers (`write_atomic`, `dataset_digest`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from teammed.errors import DataError
from teammed.results import (
    SCHEMA_VERSION,
    EventPayload,
    PeerAgent,
    PeerRecord,
    PeerVote,
    ResultRow,
    RunIdentity,
    TranscriptEvent,
    identity_differences,
    iter_rows,
    load_row,
    read_record,
)
from teammed.types import Question

__all__ = [
    "SCHEMA_VERSION",
    "RunIdentity",
    "ResultRow",
    "PeerAgent",
    "PeerVote",
    "PeerRecord",
    "EventPayload",
    "TranscriptEvent",
    "read_record",
    "load_row",
    "iter_rows",
    "identity_differences",
    "dataset_digest",
    "file_digest",
    "prompt_digest",
    "write_atomic",
    "redacted_argv",
    "read_tuning_records",
    "question_fingerprint",
]


def question_fingerprint(question: Question) -> str:
    """A question's content, independent of its id, loader and option order: sha256 of the stem, the
    context and the sorted option texts (16 hex digits). The same MedQA question read from two files
    has one fingerprint; two questions that merely share an id do not."""
    parts = [question.question.strip(), (question.context or "").strip(),
             *sorted(text.strip() for text in question.options.values())]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]


def read_tuning_records(document: Any, *, where: str) -> list[dict[str, Any]]:
    """Every tuning record a Special Set or program document (or its meta) keeps, normalised to
    ``{dataset, dataset_sha256, question_ids, question_sha256}`` (None where the file has no such
    field: the legacy ``tuning_ids`` list has ids only). A record present but unreadable is refused."""
    if not isinstance(document, dict):
        return []
    records = []
    for key in _TUNING_KEYS:
        value = document.get(key)
        if value is None:
            continue
        record = value if isinstance(value, dict) else {"question_ids": value}
        ids, prints = record.get("question_ids"), record.get("question_sha256")
        if not isinstance(ids, list) or not (prints is None or isinstance(prints, list)):
            raise DataError(f"{where}: its {key!r} record of tuning questions is not readable (expected "
                            f"question_ids as a list); fix the file or re-create it with this teammed")
        records.append({"dataset": record.get("dataset"), "dataset_sha256": record.get("dataset_sha256"),
                        "question_ids": [str(i) for i in ids],
                        "question_sha256": [str(p) for p in prints] if prints is not None else None})
    return records


# Where tuning records have been written: the shared record first, then the legacy bare id lists
# (``tuning_ids``, written by `tune` before the shared record existed).
_TUNING_KEYS = ("tuning", "tuned_on", "tuning_ids")


def redacted_argv(argv: Sequence[str]) -> list[str]:
    """The command line with credentials masked (URL passwords, key parameters, sk- keys)."""
    from teammed.redact import redact

    return [redact(a) for a in argv]


def dataset_digest(questions: Sequence[Question]) -> str:
    """sha256 of the questions' content (canonical JSON, in order): a data set's identity."""
    digest = hashlib.sha256()
    for q in questions:
        digest.update(json.dumps(q.model_dump(mode="json"), sort_keys=True, default=str).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def prompt_digest(program: Any) -> str:
    """sha256 of a DSPy program's prompts: every predictor's signature (instructions, fields and their
    descriptions) and demos, as ``program.dump_state()`` holds them (canonical JSON)."""
    state = program.dump_state() if hasattr(program, "dump_state") else {}
    return hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()


def file_digest(path: Path | str) -> str:
    """sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: Path | str, text: str | Iterable[str]) -> Path:
    """Write ``text`` (a string, or chunks written as they come) so that ``path`` holds either the
    old or the new content, never a mix: a temporary file in the same directory, fsync'd, then
    ``os.replace``; removed on failure.

    The file gets the mode any new file gets (0644 under the usual umask), so colleagues in a
    shared project folder can read results; nothing teammed writes holds a credential (see
    `teammed.redact`). This is the one writer of teammed's JSON, Markdown and program files.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            if isinstance(text, str):
                handle.write(text)
            else:
                handle.writelines(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return path
