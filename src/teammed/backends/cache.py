"""A response cache keyed by the backend as well as the request.

DSPy's own cache key ignores ``api_base``, so two servers behind one model string would
share answers. This cache keys on model, api_base and the full request, and stores one
JSON file per entry (atomic rename), safe for concurrent threads and processes.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["ResponseCache", "cache_key", "default_cache_dir"]


def default_cache_dir() -> Path:
    return Path(os.environ.get("TEAMMED_CACHE_DIR") or Path.home() / ".cache" / "teammed" / "responses")


def cache_key(*, model: str, api_base: str | None, messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    """A stable hash of everything that determines an answer, the backend's address included."""
    material = json.dumps({"model": model, "api_base": api_base or "", "messages": messages, "params": params},
                          sort_keys=True, default=str)
    return hashlib.sha256(material.encode()).hexdigest()


class ResponseCache:
    def __init__(self, directory: Path | str | None = None):
        self.directory = Path(directory) if directory else default_cache_dir()

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            return json.loads(self._path(key).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def put(self, key: str, value: dict[str, Any]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as handle:
            json.dump(value, handle)
        os.replace(tmp, path)
