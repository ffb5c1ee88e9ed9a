"""Where a study lives: a SQLite file by default, a journal file, or a database URL (docs/scaling.md).

``journal:x.log`` is relative, ``journal:/x.log`` and ``journal:///x.log`` absolute, and ``journal://x.log``
(which would read as ``/x.log``) is refused; ``postgresql://`` takes the installed psycopg or psycopg2
driver. MySQL is not supported (no driver is declared, and nothing here tests it). Database storages send
heartbeats; `worker_gone` tells, on every storage, whether a RUNNING trial's worker is gone.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import socket
import sqlite3
import time
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import optuna
from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock
from optuna.trial import TrialState
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, ProgrammingError

from teammed.errors import ConfigError, DataError

__all__ = ["open_storage", "masked", "worker_gone", "fail_gone", "WORKER", "UNCLAIMED_S", "STORAGE_FORMS"]

STORAGE_FORMS = ("journal:/abs/path/study.log (or any path ending .log or .journal: a journal file, for "
                 "several processes on one machine)", "sqlite:////abs/path/study.db (one worker at a time)",
                 "postgresql://user:password@host:5432/db (workers on several machines)")
_URL_SCHEMES = ("sqlite", "postgresql")

logger = logging.getLogger(__name__)

HEARTBEAT_S = 60
GRACE_S = 180
# A live worker records itself on a trial a moment after taking it; a RUNNING trial still without a
# worker this long after it started belongs to a worker killed in between.
UNCLAIMED_S = 60.0
WORKER = f"{socket.gethostname()}:{os.getpid()}"  # this process, as recorded in a trial's "worker" attribute


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def worker_gone(trial: optuna.trial.FrozenTrial, *, stale_s: float | None = None,
                unclaimed_s: float = UNCLAIMED_S, now: float | None = None) -> bool:
    """Whether the worker of a RUNNING trial is gone: the recorded ``"host:pid"`` is a dead process on this host,
    or no worker is recorded ``unclaimed_s`` after the start (killed between taking the trial and recording
    itself), or, with ``stale_s``, the trial started (``started``, else the storage's time) longer ago."""
    now = time.time() if now is None else now
    worker = str(trial.user_attrs.get("worker") or "")
    started: float | None
    try:
        started = float(trial.user_attrs["started"])
    except (KeyError, TypeError, ValueError):
        started = trial.datetime_start.timestamp() if trial.datetime_start is not None else None
    age = None if started is None else now - started
    if not worker:
        return age is not None and age > unclaimed_s
    host, _, pid = worker.rpartition(":")
    if host == socket.gethostname() and pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
        return True
    return stale_s is not None and age is not None and age > stale_s


def fail_gone(study: optuna.Study, trials: Iterable[optuna.trial.FrozenTrial], what: str, **gone: Any) -> None:
    """Fail each of the RUNNING ``trials`` whose worker is gone (`worker_gone` with ``gone``), so its work is
    done again; ``what`` is the log's reason."""
    for trial in trials:
        if worker_gone(trial, **gone):
            logger.warning("trial %d (worker %s) %s", trial.number, trial.user_attrs.get("worker") or "never recorded",
                           what)
            with contextlib.suppress(RuntimeError, ValueError):  # finished meanwhile
                study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)


def masked(url: str) -> str:
    """The URL with any password replaced by ``***``: what results may record."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL (a journal path): nothing to hide
        return url


def _with_driver(url: str) -> str:
    """``postgresql://`` with the driver that is installed (SQLAlchemy 2.1 assumes psycopg 3)."""
    parsed = make_url(url)
    if parsed.drivername != "postgresql":
        return url
    for module in ("psycopg", "psycopg2"):
        if importlib.util.find_spec(module) is not None:
            return parsed.set(drivername=f"postgresql+{module}").render_as_string(hide_password=False)
    raise ConfigError(f"{masked(url)} needs a PostgreSQL driver; install the postgres extra: "
                      f"pip install -e '.[postgres]'")


def open_storage(storage: str | None, out_dir: Path) -> tuple[optuna.storages.BaseStorage, str]:
    """The storage object and the reference results record (password masked). A damaged SQLite file
    or journal is refused naming the file, the cause and the fix (a journal's torn last entry, left
    by a writer killed mid-write, is cut first)."""
    journal = _journal_path(storage) if storage is not None else None
    if storage is None:
        out_dir.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{(out_dir / 'study.db').resolve()}"
    elif journal is not None:
        path = journal.expanduser().resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        _check_journal(path)
        return optuna.storages.JournalStorage(JournalFileBackend(str(path))), str(path)
    else:
        url = _checked_url(storage)
    _check_sqlite(url)
    return _rdb(_with_driver(url)), masked(url)


_DAMAGED_FIX = "move it away (or delete it) to start the study afresh, or restore a copy"


def _journal_path(storage: str) -> Path | None:
    """The journal file ``storage`` names (``journal:PATH``, ``journal://PATH``, or a path ending .log or
    .journal), else None."""
    if storage.startswith("journal:"):
        rest = storage.removeprefix("journal:")
        if rest.startswith("//") and not rest.startswith("///"):
            raise ConfigError(f"--storage {storage!r} is ambiguous (it would name {rest[1:]!r} at the file system's "
                              f"root); give journal:{rest[2:]} for a path relative to here, or journal:/abs/path.log")
        rest = rest.removeprefix("//") if rest.startswith("///") else rest
        if not rest.strip():
            raise ConfigError(f"--storage {storage!r} names no journal file; accepted forms: "
                              + "; ".join(STORAGE_FORMS))
        return Path(rest)
    if "://" not in storage and storage.endswith((".log", ".journal")):
        return Path(storage)
    return None


def _checked_url(storage: str) -> str:
    """``storage`` if it is a database URL Optuna can open, else `ConfigError` listing the accepted forms."""
    try:
        scheme = make_url(storage).get_backend_name() if "://" in storage else None
    except Exception:
        scheme = None
    if scheme not in _URL_SCHEMES:
        raise ConfigError(f"--storage {masked(storage)!r} is not a storage teammed can open; accepted forms: "
                          + "; ".join(STORAGE_FORMS))
    return storage


def _check_sqlite(url: str) -> None:
    """A SQLite study file that is not a database, or whose pages are damaged, refused before Optuna
    reads it (Optuna's own error names neither the file nor the fix)."""
    try:
        parsed = make_url(url)
    except Exception:  # not a URL: SQLAlchemy's own error names it
        return
    if not parsed.drivername.startswith("sqlite") or not parsed.database or parsed.database == ":memory:":
        return
    path = Path(parsed.database)
    if not path.is_file() or path.stat().st_size == 0:
        return
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)) as db:
            problems = [str(row[0]) for row in db.execute("PRAGMA quick_check").fetchall()]
    except sqlite3.OperationalError as exc:  # locked for too long, unreadable: Optuna's errors say so
        if "locked" in str(exc) or "unable to open" in str(exc):
            return
        problems = [str(exc)]
    except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
        problems = [str(exc)]
    if problems != ["ok"]:
        raise DataError(f"the study database {path} is damaged ({problems[0][:200]}); {_DAMAGED_FIX}")


def _check_journal(path: Path) -> None:
    """Cut a torn last entry (no newline: its writer was killed mid-write; Optuna would append the next
    entry onto it and then fail to read either), then refuse an entry that is not JSON, naming its line."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    lock = JournalFileSymlinkLock(str(path))  # Optuna's own writer lock: no entry is being written meanwhile
    lock.acquire()
    try:
        data = path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            with path.open("r+b") as handle:
                handle.truncate(end)
                handle.flush()
                os.fsync(handle.fileno())
            logger.warning("cut a torn last entry (%d bytes) from the study journal %s (a worker was killed "
                           "while writing it)", len(data) - end, path)
        for number, line in enumerate(data[:end].splitlines(), start=1):
            try:
                json.loads(line)
            except ValueError as exc:
                cause = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
                raise DataError(f"the study journal {path} is damaged: line {number} is not a journal entry "
                                f"({cause}); {_DAMAGED_FIX}") from None
    finally:
        lock.release()


def _rdb(url: str, attempts: int = 4) -> optuna.storages.RDBStorage:
    """An RDB storage with heartbeats. Workers starting together on an empty database race to create
    Optuna's tables; the loser's integrity error is retried once the winner has created them."""
    engine_kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {"pool_pre_ping": True}
    for attempt in range(attempts):
        try:
            # heartbeats are marked experimental in Optuna 5
            with warnings.catch_warnings(action="ignore", category=optuna.exceptions.ExperimentalWarning):
                return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs,
                                                  heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S)
        except (IntegrityError, ProgrammingError) as exc:
            if attempt + 1 == attempts:
                raise
            logger.info("another worker is creating the study tables (%s); retrying", type(exc).__name__)
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")
