"""Local data in Hugging Face layouts, read through ``datasets``.

* a ``save_to_disk`` directory of a ``Dataset`` (``state.json``, ``dataset_info.json``,
  ``data-*.arrow``) or of a ``DatasetDict`` (``dataset_dict.json`` and one folder per split);
* a single ``.arrow`` file (as ``datasets`` writes them, e.g. ``data-00000-of-00001.arrow``);
* a copy of a hub repository (``data/test-00000-of-00001.parquet``, ``test.jsonl``, one folder
  per config...), read by ``datasets.load_dataset(directory)`` with the hub's split rules.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from teammed.data._hub import _short
from teammed.data._rows import Row
from teammed.errors import DataError

__all__ = ["is_saved", "is_hf_directory", "hf_directory_rows", "folder_split_files", "arrow_rows", "table_rows",
           "HF_DATA_SUFFIXES"]

logger = logging.getLogger(__name__)

HF_DATA_SUFFIXES = (".parquet", ".arrow", ".jsonl", ".json", ".csv")
_SAVED_MARKERS = ("dataset_dict.json", "state.json")
_METADATA_FILES = {*_SAVED_MARKERS, "dataset_info.json", "dataset_infos.json"}
_SHARD_SUFFIX = re.compile(r"-\d+-of-\d+$")  # test-00000-of-00001.parquet is a shard of "test"
# the split names datasets reads as themselves; each may appear once per folder
_DATASETS_SPLITS = {"train": "train", "test": "test", "validation": "validation", "valid": "validation",
                    "val": "validation", "dev": "validation"}


def is_saved(path: Path) -> bool:
    """A ``save_to_disk`` directory (of a ``Dataset`` or a ``DatasetDict``)."""
    return any((path / marker).is_file() for marker in _SAVED_MARKERS)


def is_hf_directory(path: Path) -> bool:
    """A ``save_to_disk`` directory, or a directory of data files ``datasets`` can read."""
    return path.is_dir() and (is_saved(path) or any(
        p.is_file() and p.suffix.lower() in HF_DATA_SUFFIXES for p in path.rglob("*")))


def table_rows(table: Any, where: str) -> list[Row]:
    """Rows of a ``datasets.Dataset``, each naming where it came from."""
    return [Row(f"{where}, row {i + 1}", item) for i, item in enumerate(table)]


def _split_files(path: Path) -> dict[str, list[Path]]:
    """The data files of a plain folder (directly in it or in its ``data/``), by split: each file's stem
    without its shard suffix. Empty for a ``save_to_disk`` folder, whose splits ``datasets`` records."""
    if is_saved(path):
        return {}
    groups: dict[str, list[Path]] = {}
    for folder in (path, path / "data"):
        if not folder.is_dir():
            continue
        for file in sorted(folder.iterdir()):
            if (file.is_file() and file.suffix.lower() in HF_DATA_SUFFIXES and file.name not in _METADATA_FILES
                    and not file.name.startswith(".")):
                groups.setdefault(_SHARD_SUFFIX.sub("", file.stem), []).append(file)
    return groups


def folder_split_files(path: Path, split: str | None) -> list[Path] | None:
    """The files of ``split`` in a folder whose files hold several splits, never several merged.

    None when ``datasets`` reads the folder as it is: one split, or only its standard split names
    (``train``, ``test``, ``validation``, each once), which it keeps apart. Otherwise (e.g.
    MedAgentsBench's ``medqa/`` with ``test.jsonl`` and ``test_hard.jsonl``, where ``datasets`` would
    merge both into ``test``) the split is a file stem: ``split`` picks one, and a DataError names
    the splits found when ``split`` is None or names none of them.
    """
    groups = _split_files(path)
    standard = [_DATASETS_SPLITS.get(name) for name in groups]
    if len(groups) <= 1 or (None not in standard and len(set(standard)) == len(standard)):
        return None
    names = ", ".join(sorted(groups))
    if split is None:
        raise DataError(f"{path} holds several splits, one per file name: {names}; they are never merged: "
                        f"choose one with --split (e.g. --split {min(groups)}; split= in Python), or give its "
                        f"file as --dataset")
    if split in groups:
        return groups[split]
    wanted = _DATASETS_SPLITS.get(split.lower())
    same = [name for name in groups if wanted is not None and _DATASETS_SPLITS.get(name) == wanted]
    if len(same) == 1:
        return groups[same[0]]
    raise DataError(f"{path} has no split {split!r} (splits, one per file name: {names}); pass --split with one "
                    f"of them")


def _pick_split(tables: Any, split: str, where: str) -> Any:
    names = list(tables)
    if split in tables:
        return tables[split]
    for alias in (name for name, standard in _DATASETS_SPLITS.items() if standard == split):
        if alias in tables:
            return tables[alias]
    if len(names) == 1 and split == "test":
        logger.warning("%s has only the split %r; reading it as the test split", where, names[0])
        return tables[names[0]]
    raise DataError(f"{where} has no split {split!r} (splits: {', '.join(names)}); pass --split with one of them")


@contextlib.contextmanager
def _quiet_datasets() -> Iterator[None]:
    """datasets logs its own ERROR line before raising; the DataError we raise says it once."""
    log = logging.getLogger("datasets")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


def hf_directory_rows(path: Path, split: str) -> list[Row]:
    """The rows of ``split`` in a local Hugging Face directory (saved with save_to_disk, or a hub copy)."""
    import datasets

    try:
        with _quiet_datasets():
            if is_saved(path):
                loaded = datasets.load_from_disk(str(path))
            else:
                loaded = datasets.load_dataset(str(path))
    except Exception as exc:  # datasets raises many unrelated types for a bad directory
        raise DataError(f"{path}: datasets cannot read this directory ({_short(exc)}); give a "
                        f"save_to_disk directory, a copy of a hub repository or a data file") from exc
    if isinstance(loaded, datasets.DatasetDict | datasets.IterableDatasetDict):
        table = _pick_split(loaded, split, str(path))
        where = f"{path} [{split}]"
    else:
        table, where = loaded, str(path)
    return table_rows(table, where)


def arrow_rows(path: Path) -> list[Row]:
    """The rows of one ``.arrow`` file as ``datasets`` writes them."""
    import datasets

    try:
        table = datasets.Dataset.from_file(str(path))
    except Exception as exc:  # pyarrow/datasets raise several types for a bad file
        raise DataError(f"{path}: cannot read this .arrow file ({type(exc).__name__}: {exc})") from exc
    return table_rows(table, str(path))
