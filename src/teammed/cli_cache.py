"""``teammed cache info|clear``: the response cache's location, size and contents."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

__all__ = ["add_cache_command", "cmd_cache"]


def add_cache_command(sub: Any) -> None:
    cache = sub.add_parser("cache", help="show or clear the response cache")
    cache.add_argument("action", choices=["info", "clear"], help="info: location, entries and size; clear: empty it")
    cache.add_argument("--cache-dir", type=Path, help="response cache directory (default ~/.cache/teammed/responses)")
    cache.set_defaults(func=cmd_cache)


def cmd_cache(args: argparse.Namespace) -> int:
    from teammed.backends.cache import ResponseCache
    from teammed.errors import TeammedError

    if args.cache_dir is not None and args.cache_dir.exists() and not args.cache_dir.is_dir():
        raise TeammedError(f"--cache-dir {args.cache_dir} is a file, not a directory; pass the cache's directory")
    logging.getLogger("teammed.backends.cache").setLevel(logging.ERROR)  # its "running uncached" is for runs
    cache = ResponseCache(args.cache_dir)
    info = cache.info()
    if not info["usable"] and info.get("damaged") and args.action == "clear":
        cache.clear()  # removes diskcache's files and starts the cache afresh
        print(f"the response cache at {info['directory']} was damaged ({info['error']}); removed its files and "
              f"started it afresh")
        cache.close()
        return 0
    if not info["usable"]:
        if info.get("damaged"):
            raise TeammedError(f"the response cache at {info['directory']} is damaged ({info['error']}); "
                               f"`teammed cache clear --cache-dir {info['directory']}` empties it, or pass "
                               f"another --cache-dir")
        raise TeammedError(f"the response cache at {info['directory']} cannot be opened ({info['error']}); check "
                           f"its permissions or pass --cache-dir")
    if args.action == "clear":
        removed = cache.clear()
        print(f"removed {removed} cached responses from {info['directory']}")
    else:
        print(f"directory   {info['directory']}\nentries     {info['entries']}\n"
              f"size        {info['bytes'] / 1e6:.1f} MB of {info['size_limit'] / 1e6:.0f} MB")
    cache.close()
    return 0
