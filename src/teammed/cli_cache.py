"""``teammed cache info|clear``: the response cache's location, size and contents."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["add_cache_command", "cmd_cache"]


def add_cache_command(sub: Any) -> None:
    cache = sub.add_parser("cache", help="show or clear the response cache")
    cache.add_argument("action", choices=["info", "clear"], help="info: location, entries and size; clear: empty it")
    cache.add_argument("--cache-dir", type=Path, help="response cache directory (default ~/.cache/teammed/responses)")
    cache.set_defaults(func=cmd_cache)


def cmd_cache(args: argparse.Namespace) -> int:
    from teammed.experiments.cache import cache

    print(cache(args.action, args.cache_dir))
    return 0
