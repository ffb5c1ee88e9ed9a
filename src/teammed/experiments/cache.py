"""``cache`` as a library call: `cache(action, cache_dir) -> str`, what it found or did."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

from teammed.errors import TeammedError

__all__ = ["cache"]


def cache(action: Literal["info", "clear"], cache_dir: Path | None = None) -> str:
    """``info``: the response cache's location, entries and size; ``clear``: empty it (a damaged cache's
    files are removed and it starts afresh). Returns what the CLI prints."""
    from teammed.backends.cache import ResponseCache

    if cache_dir is not None and cache_dir.exists() and not cache_dir.is_dir():
        raise TeammedError(f"--cache-dir {cache_dir} is a file, not a directory; pass the cache's directory")
    logging.getLogger("teammed.backends.cache").setLevel(logging.ERROR)  # its "running uncached" is for runs
    responses = ResponseCache(cache_dir)
    info = responses.info()
    try:
        if not info["usable"] and info.get("damaged") and action == "clear":
            responses.clear()  # removes diskcache's files and starts the cache afresh
            return (f"the response cache at {info['directory']} was damaged ({info['error']}); removed its files "
                    f"and started it afresh")
        if not info["usable"]:
            if info.get("damaged"):
                raise TeammedError(f"the response cache at {info['directory']} is damaged ({info['error']}); "
                                   f"`teammed cache clear --cache-dir {info['directory']}` empties it, or pass "
                                   f"another --cache-dir")
            raise TeammedError(f"the response cache at {info['directory']} cannot be opened ({info['error']}); "
                               f"check its permissions or pass --cache-dir")
        if action == "clear":
            return f"removed {responses.clear()} cached responses from {info['directory']}"
        return (f"directory   {info['directory']}\nentries     {info['entries']}\n"
                f"size        {info['bytes'] / 1e6:.1f} MB of {info['size_limit'] / 1e6:.0f} MB")
    finally:
        responses.close()
