"""Benchmark names -> loaders, and :func:`load_dataset`, the one entry point.

``load_dataset(name_or_path)`` reads an existing file path in the unified schema (or the
schema named by ``source=``). A registry name is looked up locally first — in ``data_dir``,
else ``$TEAMMED_DATA_DIR``, under the file names each loader's docstring lists — then on the
Hugging Face hub unless ``TEAMMED_OFFLINE``/``HF_HUB_OFFLINE`` is set. When neither works the
DataError says which files to provide and how.
"""

from __future__ import annotations

import difflib
import importlib.resources
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from teammed.data import (
    clinical_notes,
    ddxplus,
    medagentsbench,
    medbullets,
    medmcqa,
    medqa,
    mmlu_pro,
    pathvqa,
    pmc_vqa,
    pubmedqa,
    unified,
)
from teammed.data._hf import arrow_rows, folder_split_files, hf_directory_rows, is_hf_directory, is_saved
from teammed.data._hub import HubUnavailable, fetch_hub_rows
from teammed.data._rows import EXTENSIONS, Row, read_rows
from teammed.data._spec import Builder, DatasetSpec, Origin, option_defaults
from teammed.errors import DataError
from teammed.types import Question

__all__ = ["load_dataset", "available_datasets", "known_splits", "DATA_DIR_VARIABLE"]

logger = logging.getLogger(__name__)

DATA_DIR_VARIABLE = "TEAMMED_DATA_DIR"

_SPECS: tuple[DatasetSpec, ...] = (
    unified.DEMO,
    medqa.SPEC,
    medqa.SPEC_5OPTIONS,
    medmcqa.SPEC,
    pubmedqa.SPEC,
    mmlu_pro.SPEC,
    medbullets.SPEC_OP4,
    medbullets.SPEC_OP5,
    ddxplus.SPEC,
    pathvqa.SPEC,
    pmc_vqa.SPEC,
    clinical_notes.SPEC,
    *medagentsbench.EXTRA_SPECS,
)
_SCHEMAS: dict[str, DatasetSpec] = {spec.name: spec for spec in (*_SPECS, unified.SPEC)}


def _key(name: str) -> str:
    """Names match case-insensitively, with - and _ alike (hub ids keep their spelling)."""
    name = name.strip().lower()
    return name if "/" in name else name.replace("-", "_")


_ALIASES: dict[str, str] = {_key(alias): spec.name for spec in _SPECS for alias in (spec.name, *spec.aliases)}
_SPLIT_ALIASES = {"val": "validation", "valid": "validation", "dev": "validation", "validate": "validation"}


def available_datasets() -> list[str]:
    """The registry names ``load_dataset`` accepts, in a stable order."""
    return [spec.name for spec in _SPECS]


def load_dataset(
    name_or_path: str | Path,
    *,
    data_dir: str | Path | None = None,
    split: str | None = None,
    revision: str | None = None,
    **options: Any,
) -> list[Question]:
    """Questions of a registry name (see :func:`available_datasets`) or of local data.

    Local data is a file (.jsonl, .json, .csv, .parquet, .arrow, single-file .zip) or a
    Hugging Face directory: a ``save_to_disk`` folder (Dataset or DatasetDict) or a copy of a
    hub repository (``data/test-*.parquet``). ``options`` go to the data set's loader (e.g.
    ``with_context=False`` for PubMedQA, ``cop_base=1`` for MedMCQA, ``seed=`` for DDXPlus); for
    local data, ``source="medqa"`` (any registry name) reads it in that data set's schema instead
    of the unified one. ``revision`` pins a hub download (a tag, branch or commit).
    """
    path = Path(name_or_path).expanduser()
    bare_name = _key(str(name_or_path)) in _ALIASES and os.sep not in str(name_or_path)
    if path.is_file() or (not bare_name and is_hf_directory(path)):  # ./medqa/ is the registry's medqa
        if revision is not None:
            raise DataError(f"revision= pins a download from the Hugging Face hub, but {path} is local data; "
                            f"drop --revision")
        source = options.pop("source", "unified")
        return _load_file(path, data_dir=_data_dir(data_dir), split=split, source=source, options=options)
    name = str(name_or_path)
    key = _key(name)
    if key not in _ALIASES:
        raise DataError(_unknown_name(name, path))
    if "source" in options:
        raise DataError(f"source= names the schema of a data file; {name!r} is a registry name, not a file.")
    spec = _SCHEMAS[_ALIASES[key]]
    folder = _data_dir(data_dir)
    layout = medagentsbench.find_layout(folder, spec.name)
    if layout is not None:
        return _load_layout(spec, layout, folder, split=split, options=options, revision=revision)
    return _load_named(spec, data_dir=folder, split=_split(spec, split), options=options, revision=revision)


def known_splits(name: str, data_dir: str | Path | None = None) -> tuple[str, tuple[str, ...] | None] | None:
    """(default split, known splits or None for any) of a registry name; None for anything else.

    With a MedAgentsBench folder for ``name`` under ``data_dir`` (or ``$TEAMMED_DATA_DIR``), the
    splits are that folder's file stems and the default is ``test``.
    """
    spec_name = _ALIASES.get(_key(name))
    if spec_name is None or Path(name).expanduser().is_file():
        return None
    spec = _SCHEMAS[spec_name]
    layout = medagentsbench.find_layout(_data_dir(data_dir), spec.name)
    if layout is not None:
        return medagentsbench.DEFAULT_SPLIT, tuple(layout.splits)
    return spec.default_split, spec.splits


def _load_layout(spec: DatasetSpec, layout: medagentsbench.Layout, data_dir: Path | None, *, split: str | None,
                 options: dict[str, Any], revision: str | None) -> list[Question]:
    """A registry name read from its MedAgentsBench folder (see `teammed.data.medagentsbench`)."""
    where = str(layout.folder)
    _no_revision(revision, spec.name, where)
    if options:
        raise DataError(f"{', '.join(options)}: options of {spec.name}'s original files; {where} is MedAgentsBench's "
                        f"layout, which takes none (its rows are already in one schema)")
    names = ", ".join(layout.splits)
    chosen = split if split is not None else layout.default_split
    if chosen is None:
        raise DataError(f"{where} has no test.jsonl; choose a split with --split (split= in Python): {names}")
    path = layout.splits.get(chosen)
    if path is None:
        hint = _did_you_mean(chosen, list(layout.splits))
        raise DataError(f"{where} has no split {chosen!r}.{hint} Splits (file stems): {names}")
    origin = Origin(split=chosen, directory=layout.folder, data_dir=data_dir, dataset=spec.name)
    return _build(spec, read_rows(path), origin, {}, str(path), medagentsbench.build)


def _load_file(
    path: Path, *, data_dir: Path | None, split: str | None, source: str, options: dict[str, Any]
) -> list[Question]:
    spec = _SCHEMAS.get(_ALIASES.get(_key(source), _key(source)))
    if spec is None:
        hint = _did_you_mean(_key(source), list(_SCHEMAS))
        raise DataError(f"Unknown source= {source!r} for {path}.{hint} Available: {', '.join(_SCHEMAS)}.")
    _check_options(spec, options)
    if split == "all" and path.is_file():
        split = None
    if split is not None and path.is_file() and _SPLIT_ALIASES.get(split.lower(), split) != spec.default_split:
        # one file holds one split: any other name would silently read the whole file
        raise DataError(f"Unknown split {split!r} for {path}: a single file holds one split. Splits: "
                        f"{spec.default_split} or all (the whole file); with --split also tune or eval (its parts "
                        f"of the tune/eval partition).")
    files = folder_split_files(path, split) if path.is_dir() else None  # several splits: one, never merged
    split = split or spec.default_split
    folder = path if path.is_dir() else path.parent
    origin = Origin(
        split=split,
        directory=folder,
        data_dir=data_dir or folder,
        dataset=None if spec is unified.SPEC else spec.name,
    )
    if files is not None:
        rows = [row for file in files for row in _read_local(file, split)]
        return _build(spec, rows, origin, options, f"{path} [{split}]")
    return _build(spec, _read_local(path, split), origin, options, str(path))


def _read_local(path: Path, split: str) -> list[Row]:
    """Rows of a data file, an .arrow file or a Hugging Face directory."""
    if path.is_dir():
        return hf_directory_rows(path, split)
    if path.suffix.lower() == ".arrow":
        return arrow_rows(path)
    return read_rows(path)


def _hf_copies(spec: DatasetSpec, data_dir: Path) -> list[Path]:
    """Folders under ``data_dir`` holding ``spec`` in a Hugging Face layout (save_to_disk or a hub copy)."""
    names = [spec.name, *(a for a in spec.aliases if "/" not in a)]
    if spec.hub is not None:
        names.append(spec.hub.repo)
    return [folder for name in dict.fromkeys(names)
            if (folder := data_dir / name).is_dir() and ((folder / "data").is_dir() or is_saved(folder))]


def _load_named(
    spec: DatasetSpec, *, data_dir: Path | None, split: str, options: dict[str, Any], revision: str | None = None
) -> list[Question]:
    _check_options(spec, options)
    if spec.bundled is not None:
        if revision is not None:
            raise DataError(f"{spec.name} ships with teammed (teammed.data/{spec.bundled}); it has no hub revision, "
                            f"drop --revision")
        with importlib.resources.as_file(importlib.resources.files("teammed.data") / spec.bundled) as path:
            rows = read_rows(path)
        return _build(spec, rows, Origin(split=split, dataset=spec.name), options, f"teammed.data/{spec.bundled}")
    paths = spec.find_local(data_dir, split) if data_dir is not None else []
    if paths:
        _no_revision(revision, spec.name, ", ".join(map(str, paths)))
        rows = [row for path in paths for row in _read_local(path, split)]
        origin = Origin(split=split, directory=paths[0].parent, data_dir=data_dir, dataset=spec.name)
        return _build(spec, rows, origin, options, ", ".join(map(str, paths)))
    copies = _hf_copies(spec, data_dir) if data_dir is not None else []
    if copies:
        _no_revision(revision, spec.name, str(copies[0]))
        origin = Origin(split=split, directory=copies[0], data_dir=data_dir, dataset=spec.name)
        return _build(spec, hf_directory_rows(copies[0], split), origin, options, f"{copies[0]} [{split}]")
    if spec.hub is None:
        raise DataError(_missing(spec, split, data_dir, f"it is never downloaded: {spec.local_only}"))
    try:
        rows = fetch_hub_rows(spec.hub, split, revision=revision)
    except HubUnavailable as exc:
        raise DataError(_missing(spec, split, data_dir, str(exc))) from exc
    origin = Origin(split=split, data_dir=data_dir, dataset=spec.name, from_hub=True)
    return _build(spec, rows, origin, options, f"{spec.hub} [{split}]")


def _no_revision(revision: str | None, name: str, where: str) -> None:
    if revision is not None:
        raise DataError(f"revision {revision!r} pins a download from the Hugging Face hub, but {name} was found "
                        f"locally ({where}); drop --revision, or move the local copy away to download that revision")


def _build(spec: DatasetSpec, rows: list[Row], origin: Origin, options: dict[str, Any], where: str,
           build: Builder | None = None) -> list[Question]:
    """``spec``'s questions of ``rows``, built by its builder (or ``build``); DataError when there are none."""
    questions = (build or spec.build)(rows, origin, **options)
    if not questions:
        raise DataError(f"No usable {spec.name} questions in {where} ({len(rows)} rows read).")
    logger.info("Loaded %d %s questions from %s", len(questions), spec.name, where)
    return questions


def _check_options(spec: DatasetSpec, options: Mapping[str, Any]) -> None:
    accepted = option_defaults(spec.build)
    for name in options:
        if name not in accepted:
            listed = ", ".join(f"{k}={v!r}" for k, v in accepted.items()) or "none"
            raise DataError(
                f"Unknown option {name!r} for data set {spec.name!r}.{_did_you_mean(name, list(accepted))} "
                f"Its options: {listed}."
            )


def _split(spec: DatasetSpec, split: str | None) -> str:
    if split is None:
        return spec.default_split
    wanted = _SPLIT_ALIASES.get(split.lower(), split)
    if spec.splits is not None and wanted not in spec.splits:
        hint = _did_you_mean(split, list(spec.splits))
        raise DataError(f"Unknown split {split!r} for {spec.name!r}.{hint} Splits: {', '.join(spec.splits)}.")
    return wanted


def _data_dir(given: str | Path | None) -> Path | None:
    value = given if given is not None else os.environ.get(DATA_DIR_VARIABLE) or None
    if value is None:
        return None
    path = Path(value).expanduser()
    if not path.is_dir():
        origin = "data_dir" if given is not None else f"${DATA_DIR_VARIABLE}"
        raise DataError(f"{origin} {str(path)!r} is not a directory; point it at the data folder.")
    return path


def _did_you_mean(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.5)
    return f" Did you mean {close[0]!r}?" if close else ""


def _unknown_name(name: str, path: Path) -> str:
    if path.suffix.lower() in EXTENSIONS or os.sep in name or path.is_dir():
        if path.is_dir():
            return (f"{name!r} is a directory without data files datasets can read (no save_to_disk files, no "
                    f"{', '.join(('.parquet', '.arrow', '.jsonl', '.json', '.csv'))}); for a registry data set "
                    f"pass its name with data_dir={name!r}.")
        return (f"No such data file: {path}; check the path, or give a benchmark name ("
                f"{', '.join(available_datasets()[:4])}, ...).")
    names = available_datasets()
    return f"Unknown data set {name!r}.{_did_you_mean(_key(name), names)} Available: {', '.join(names)}."


def _missing(spec: DatasetSpec, split: str, data_dir: Path | None, hub_note: str) -> str:
    where = f"in {data_dir}" if data_dir is not None else "(no data directory was given)"
    names = "\n".join(f"  DIR/{pattern}" for pattern in spec.patterns(split))
    return (
        f"Data set {spec.name!r} (split {split!r}) is not available: no local copy was found {where}, "
        f"and {hub_note}.\n"
        f"To use a local copy, save it as one of these files (.* = {', '.join(EXTENSIONS)}):\n{names}\n"
        f"with the fields: {spec.schema}.\n"
        f"Or save it with datasets (save_to_disk, or a copy of the hub repository) as DIR/{spec.name}/.\n"
        f"Then pass data_dir=DIR (CLI: --data-dir DIR) or set {DATA_DIR_VARIABLE}=DIR."
    )
