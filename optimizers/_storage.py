"""Where a study lives: a SQLite file by default, a journal file, or a database URL.

* ``None`` -> ``sqlite:///<out_dir>/study.db``;
* a path ending ``.log`` or ``.journal`` -> `optuna.storages.JournalStorage` on that file
  (safe for several processes on one machine or a shared file system);
* anything else is a SQLAlchemy URL (``postgresql://user:pass@host/db``; the installed
  psycopg or psycopg2 driver is picked) for workers on several machines.

Database storages send heartbeats, so a crashed worker's trial is failed after a grace
period instead of staying RUNNING forever.
"""

from __future__ import annotations

import importlib.util
import logging
import time
import warnings
from pathlib import Path

import optuna
from optuna.storages.journal import JournalFileBackend
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, ProgrammingError

from teammed.errors import ConfigError

__all__ = ["open_storage", "masked"]

logger = logging.getLogger(__name__)

HEARTBEAT_S = 60
GRACE_S = 180


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
    """The storage object and the reference results record (password masked)."""
    if storage is None:
        out_dir.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{(out_dir / 'study.db').resolve()}"
    elif "://" not in storage and storage.endswith((".log", ".journal")):
        path = Path(storage).resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.JournalStorage(JournalFileBackend(str(path))), str(path)
    else:
        url = storage
    return _rdb(_with_driver(url)), masked(url)


def _rdb(url: str, attempts: int = 4) -> optuna.storages.RDBStorage:
    """An RDB storage with heartbeats. Workers starting together on an empty database race to create
    Optuna's tables; the loser's integrity error is retried once the winner has created them."""
    engine_kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {"pool_pre_ping": True}
    for attempt in range(attempts):
        try:
            with warnings.catch_warnings():  # heartbeats are marked experimental in Optuna 5
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs,
                                                  heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S)
        except (IntegrityError, ProgrammingError) as exc:
            if attempt + 1 == attempts:
                raise
            logger.info("another worker is creating the study tables (%s); retrying", type(exc).__name__)
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")
