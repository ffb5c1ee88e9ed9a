"""Checking what a user typed, before anything runs or is written.

Each ``argparse`` ``type=`` function here turns a bad value into one line that names the
value and the fix (argparse reports it with exit code 2); the file readers turn unreadable,
binary, non-JSON or mis-shaped files into a `ConfigError` naming the path and the field.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from teammed import inputs
from teammed.errors import ConfigError
from teammed.inputs import check_writable_dir, parse_options  # noqa: F401  (the layer's checks; the CLI's names)
from teammed.messages import describe_os_error, one_line, printable  # noqa: F401  (the CLI's names)

__all__ = [
    "OneLineParser",
    "positive_int",
    "non_negative_int",
    "positive_float",
    "non_negative_float",
    "seed_list",
    "preset_list",
    "system_name",
    "model_spec",
    "parse_options",
    "one_line",
    "printable",
    "describe_os_error",
]


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line: what was wrong and where to read more."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see `{self.prog} --help`)\n")


def _bounded(kind: Callable[[str], Any], name: str, ok: Callable[[Any], bool], must: str) -> Callable[[str], Any]:
    """An argparse ``type=`` reading ``kind`` and refusing a value ``ok`` rejects with ``must``, its ``{got}``
    the value (an int) or the text given (a float)."""

    def parse(raw: str) -> Any:
        try:
            value = kind(raw)
        except ValueError:
            noun = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {noun}, got {raw!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(must.format(got=value if kind is int else raw))
        return value

    parse.__name__ = name
    return parse


_INF = float("inf")
positive_int = _bounded(int, "positive_int", lambda v: v >= 1, "must be at least 1 (got {got})")
non_negative_int = _bounded(int, "non_negative_int", lambda v: v >= 0, "must be 0 or more (got {got})")
positive_float = _bounded(float, "positive_float", lambda v: 0 < v < _INF,
                          "must be a positive number of seconds (got {got})")
non_negative_float = _bounded(float, "non_negative_float", lambda v: 0 <= v < _INF, "must be 0 or more (got {got})")
# A level strictly between 0 and 1 (e.g. a significance level ``--alpha``).
probability = _bounded(float, "probability", lambda v: 0 < v < 1,
                       "must be between 0 and 1, exclusive (got {got}); e.g. 0.05")


def _items(raw: str, what: str, example: str) -> list[str]:
    parts = [p.strip() for p in raw.split(",")]
    if not raw.strip() or any(not p for p in parts):
        raise argparse.ArgumentTypeError(f"{raw!r} has an empty {what}; give a comma-separated list like {example}")
    if len(set(parts)) != len(parts):
        twice = sorted({p for p in parts if parts.count(p) > 1})
        raise argparse.ArgumentTypeError(f"{raw!r} names {', '.join(twice)} twice; list each {what} once")
    return parts


def seed_list(raw: str) -> list[int]:
    """``111,222,333`` -> [111, 222, 333]."""
    parts = _items(raw, "seed", "111,222,333")
    try:
        return [int(p) for p in parts]
    except ValueError:
        bad = next(p for p in parts if not p.lstrip("-").isdigit())
        raise argparse.ArgumentTypeError(f"seed {bad!r} in {raw!r} is not a whole number; "
                                         f"give a list like 111,222,333") from None


def report_error(message: str) -> None:
    print(f"teammed: error: {printable(one_line(message))}", file=sys.stderr)


def _arg(check: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse ``type=`` from a check of `teammed.inputs` (the specs run the same check): its
    `ConfigError` becomes argparse's one-line usage error."""

    def parse(raw: str) -> Any:
        try:
            return check(raw)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = check.__name__
    return parse


shard_spec = _arg(inputs.shard)
system_name = _arg(inputs.system_name)
model_spec = _arg(inputs.model_string)
api_base = _arg(inputs.api_base)
storage_url = _arg(inputs.storage_url)


def preset_list(raw: str) -> list[str]:
    """``base,trust`` -> ['base', 'trust'], each a known preset (hyphens allowed)."""
    return [_arg(inputs.preset_name)(name) for name in _items(raw, "preset", "base,trust")]
