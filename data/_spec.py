"""What the registry knows about one data set: its local file names, hub source and builder.

File patterns are relative to the data directory. ``{split}`` is replaced by the split's file
spellings (e.g. ``validation`` and ``dev``); a pattern ending in ``.*`` means any of .jsonl,
.json, .csv, .parquet; ``*`` elsewhere globs (parquet shards are read in name order). A
pattern without ``{split}`` holds the default split and is used only for that split.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teammed.data._hub import HubRef
from teammed.data._rows import EXTENSIONS, Row
from teammed.types import Question

__all__ = ["DatasetSpec", "Origin", "Builder", "standard_files", "option_defaults",
           "without_origin"]

Builder = Callable[..., list[Question]]


@dataclass(frozen=True)
class Origin:
    """Where rows came from: what a builder needs to find side files and image folders."""

    split: str
    directory: Path | None = None  # folder of the local file; None for hub rows
    data_dir: Path | None = None
    dataset: str | None = None  # registry name; None for a file read in the unified schema
    from_hub: bool = False


@dataclass(frozen=True)
class DatasetSpec:
    """One registry entry. ``build(rows, origin, **options)`` maps source rows to questions."""

    name: str
    summary: str
    schema: str  # the fields a local file needs, shown when the data set is missing
    build: Builder
    files: tuple[str, ...] = ()
    default_split: str = "test"
    splits: tuple[str, ...] | None = None  # known splits; None accepts any name
    split_files: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    hub: HubRef | None = None
    local_only: str | None = None  # why there is no hub download
    bundled: str | None = None  # a file shipped inside teammed.data
    aliases: tuple[str, ...] = ()

    def patterns(self, split: str) -> list[str]:
        """File patterns to try for ``split``, in order."""
        spellings = self.split_files.get(split, (split,))
        found: list[str] = []
        for pattern in self.files:
            if "{split}" in pattern:
                found.extend(pattern.format(split=s) for s in spellings)
            elif split == self.default_split:
                found.append(pattern)
        return list(dict.fromkeys(found))

    def find_local(self, data_dir: Path, split: str) -> list[Path]:
        """The first pattern's matching files under ``data_dir`` (several for parquet shards)."""
        for pattern in self.patterns(split):
            for concrete in [pattern[:-2] + ext for ext in EXTENSIONS] if pattern.endswith(".*") else [pattern]:
                matches = _matches(data_dir, concrete)
                if matches:
                    return matches
        return []


def standard_files(stem: str, *extra: str) -> tuple[str, ...]:
    """The file names every data set accepts, plus its originals' names (``extra``)."""
    return (f"{stem}/{{split}}.*", f"{stem}_{{split}}.*", f"{stem}/{{split}}-*.parquet", *extra, f"{stem}.*")


def _matches(data_dir: Path, pattern: str) -> list[Path]:
    if any(c in pattern for c in "*?["):
        return sorted(p for p in data_dir.glob(pattern) if p.is_file())
    path = data_dir / pattern
    return [path] if path.is_file() else []


def without_origin(questions: Callable[..., list[Question]]) -> Builder:
    """The builder of a data set whose rows need no `Origin`: ``questions(rows, **options)``, its
    options (`option_defaults`) those of ``questions``."""

    @functools.wraps(questions)
    def build(rows: list[Row], origin: Origin, **options: Any) -> list[Question]:
        return questions(rows, **options)

    return build


def option_defaults(build: Builder) -> dict[str, Any]:
    """The keyword-only options a builder accepts, with their defaults."""
    params = inspect.signature(build).parameters.values()
    return {p.name: p.default for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}
