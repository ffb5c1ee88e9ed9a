"""One response cache (a size-bounded diskcache store) keyed by the backend as well as the request.

DSPy's own cache key ignores ``api_base``; this one keys on the model, the backend's identity (its
``api_base``, or the embedded model's GGUF path), the full request and DSPy's ``rollout_id``.
Entries keep the original call's usage and cost, so a cached run reports the same billable tokens.
A corrupt entry is a miss; an unusable store warns once, naming the fix, and the run goes on
uncached. Safe for concurrent threads and processes (SQLite underneath).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

__all__ = ["ResponseCache", "cache_key", "default_cache_dir", "DEFAULT_SIZE_LIMIT"]

logger = logging.getLogger(__name__)

DEFAULT_SIZE_LIMIT = 1 << 30  # 1 GiB; diskcache evicts least-recently-stored entries beyond it
_ENTRY_VERSION = 2


def default_cache_dir() -> Path:
    """``$TEAMMED_CACHE_DIR``, else ``$XDG_CACHE_HOME/teammed/responses``, else ``~/.cache/teammed/responses``."""
    if os.environ.get("TEAMMED_CACHE_DIR"):
        return Path(os.environ["TEAMMED_CACHE_DIR"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg).expanduser() if os.path.isabs(os.path.expanduser(xdg)) else Path.home() / ".cache"  # per the spec
    return base / "teammed" / "responses"


def cache_key(*, model: str, api_base: str | None, messages: list[dict[str, Any]], params: dict[str, Any],
              rollout_id: Any = None) -> str:
    """A stable hash of everything that determines an answer, the backend's address and rollout included."""
    material = json.dumps({"model": model, "api_base": api_base or "", "messages": messages, "params": params,
                           "rollout_id": rollout_id}, sort_keys=True, default=str)
    return hashlib.sha256(material.encode()).hexdigest()


def _valid(entry: Any) -> bool:
    if not (isinstance(entry, dict) and entry.get("v") == _ENTRY_VERSION and isinstance(entry.get("usage"), dict)):
        return False
    response = entry.get("response")
    return isinstance(response, dict) and isinstance(response.get("choices"), list) and bool(response["choices"])


class ResponseCache:
    """``get(key)`` -> entry or None; ``put(key, entry)``; never raises on a broken store."""

    def __init__(self, directory: Path | str | None = None, *, size_limit: int = DEFAULT_SIZE_LIMIT):
        self.directory = Path(directory) if directory else default_cache_dir()
        self.size_limit = size_limit
        self._store: Any = None
        self._broken = False
        self.error: BaseException | None = None  # why the store could not be opened or written
        self._lock = threading.Lock()

    def _open(self) -> Any:
        if self._store is None and not self._broken:
            with self._lock:
                if self._store is None and not self._broken:
                    try:
                        import diskcache

                        self.directory.mkdir(parents=True, exist_ok=True)
                        self._store = diskcache.Cache(str(self.directory), size_limit=self.size_limit,
                                                      eviction_policy="least-recently-stored")
                    except Exception as exc:  # unwritable directory, read-only disk, corrupt database
                        self._disable(exc)
        return self._store

    @property
    def damaged(self) -> bool:
        """The store's database is damaged (not a database, malformed pages), not merely unwritable."""
        return isinstance(self.error, sqlite3.DatabaseError) and not isinstance(self.error, sqlite3.OperationalError)

    def _disable(self, exc: BaseException) -> None:
        if not self._broken:
            self._broken, self.error = True, exc
            fix = (f"`teammed cache clear --cache-dir {self.directory}` empties it" if self.damaged
                   else "check its permissions or pass --cache-dir")
            logger.warning("the response cache at %s is unusable (%s: %s); running uncached (%s)", self.directory,
                           type(exc).__name__, exc, fix)

    def get(self, key: str) -> dict[str, Any] | None:
        store = self._open()
        if store is None:
            return None
        try:
            entry = store.get(key)
        except Exception:  # a corrupt entry (unpicklable, truncated) is a miss
            return None
        return entry if _valid(entry) else None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        store = self._open()
        if store is None:
            return
        try:
            store.set(key, {**entry, "v": _ENTRY_VERSION})
        except Exception as exc:
            self._disable(exc)

    def info(self) -> dict[str, Any]:
        store = self._open()
        if store is not None:
            try:
                return {"directory": str(self.directory), "usable": True, "entries": len(store),
                        "bytes": int(store.volume()), "size_limit": self.size_limit}
            except Exception as exc:  # a damaged page met while counting
                self._disable(exc)
        return {"directory": str(self.directory), "usable": False, "damaged": self.damaged,
                "error": f"{type(self.error).__name__}: {self.error}" if self.error is not None else None}

    def clear(self) -> int:
        """Remove every entry; returns how many. A damaged store (whose database cannot be read) is
        removed file by file (only diskcache's own files) and started afresh: returns 0 then."""
        store = self._open()
        if store is not None:
            try:
                return int(store.clear())
            except Exception as exc:  # a damaged page met while clearing
                self._disable(exc)
        if not self.damaged:
            return 0
        self.close()
        _remove_store_files(self.directory)
        self._store, self._broken, self.error = None, False, None
        if self._open() is None:  # still unusable: say why
            raise OSError(f"{self.directory} cannot be started afresh: {self.error}")
        return 0

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


def _remove_store_files(directory: Path) -> None:
    """diskcache's files in ``directory``: its SQLite database (and journal/WAL) and the value files
    in its two-hex-digit subfolders; nothing else there is touched."""
    for name in ("cache.db", "cache.db-wal", "cache.db-shm", "cache.db-journal"):
        (directory / name).unlink(missing_ok=True)
    hex_digits = set("0123456789abcdef")
    for sub in directory.iterdir():
        if sub.is_dir() and len(sub.name) == 2 and set(sub.name) <= hex_digits:
            for value in sorted(sub.rglob("*.val"), reverse=True):
                value.unlink()
            for folder in sorted((d for d in sub.rglob("*") if d.is_dir()), reverse=True):
                with contextlib.suppress(OSError):  # not empty: something else lives there
                    folder.rmdir()
            with contextlib.suppress(OSError):
                sub.rmdir()
