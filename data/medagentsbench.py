"""MedAgentsBench's data folder (``data/`` of gersteinlab/medagents-benchmark) as ``--data-dir DIR``.

``DIR/<folder>/<split>.jsonl``, one JSON object a line (``question``, ``options``, ``answer_idx``,
``answer``, usually ``realidx``). docs/data.md ("MedAgentsBench's data folder") states the rules this
module implements: the split is the file stem; ``"N/A"`` options are padding and dropped; the id is
``realidx``, else :func:`teammed.data._fields.content_id`, and a repeated id gets ``-2``, ``-3``, ...
with a warning; which folders count as this layout (:data:`EXTRA_SPECS` are the benchmarks only
MedAgentsBench ships). Besides: ``meta_info``, ``category``, ``src``, ``reason`` and
``answer_rationale`` are kept in ``meta``; only ``.jsonl`` files are read (the folder also holds a
``test_hard.json`` copy for MedQA); the registry name -> folder map is :data:`FOLDERS`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from teammed.data._fields import content_id, lettered, normalize_letter, parse_structured, text
from teammed.data._rows import Row, map_rows
from teammed.data._spec import DatasetSpec, Origin, standard_files
from teammed.types import Question

__all__ = ["FOLDERS", "PADDING", "Layout", "find_layout", "medagentsbench_question", "medagentsbench_questions",
           "EXTRA_SPECS"]

PADDING = "N/A"
DEFAULT_SPLIT = "test"

# registry name -> the folder MedAgentsBench keeps it in
FOLDERS: dict[str, str] = {
    "medqa": "medqa",
    "medqa_5options": "medqa_5options",
    "pubmedqa": "pubmedqa",
    "medmcqa": "medmcqa",
    "mmlu_pro_health": "mmlu-pro",
    "medbullets_op5": "medbullets",
    "mmlu": "mmlu",
    "afrimedqa": "afrimedqa",
    "medexqa": "medexqa",
    "medxpertqa_r": "medxpertqa-r",
    "medxpertqa_u": "medxpertqa-u",
}
_ROW_FIELDS = ("question", "options", "answer_idx")  # every MedAgentsBench row; most add realidx
_ID_FIELD = "realidx"
# stems another loader also reads: without realidx, such a file alone does not make the folder MedAgentsBench's
_PLAIN_SPLITS = frozenset({"train", "test", "validation", "dev", "val", "valid"})
_META_FIELDS = {"meta_info": "meta_info", "category": "category", "src": "src", "reason": "explanation",
                "answer_rationale": "explanation"}


@dataclass(frozen=True)
class Layout:
    """One benchmark's folder in MedAgentsBench's layout: its split files by stem."""

    folder: Path
    splits: dict[str, Path]

    @property
    def default_split(self) -> str | None:
        return DEFAULT_SPLIT if DEFAULT_SPLIT in self.splits else None


def find_layout(data_dir: Path | None, name: str) -> Layout | None:
    """The MedAgentsBench folder of registry name ``name`` under ``data_dir``, or None.

    A folder counts when one of its ``.jsonl`` files starts with a MedAgentsBench row: one with
    ``question``, ``options`` ({letter: text}), ``answer_idx`` and ``realidx``; without
    ``realidx`` only in a file no other loader reads (a stem other than a plain split name, such
    as ``test_hard``), or for a benchmark only MedAgentsBench ships. A ``medqa/test.jsonl`` in
    another schema (the hub's, without ``realidx``) is left to its own loader. When the folder
    counts, every ``.jsonl`` file in it is a split.
    """
    folder_name = FOLDERS.get(name)
    if data_dir is None or folder_name is None:
        return None
    folder = data_dir / folder_name
    if not folder.is_dir():
        return None
    splits = {path.stem: path for path in sorted(folder.glob("*.jsonl")) if path.is_file()}
    only_here = name in _ONLY_HERE
    for stem, path in splits.items():
        row = _first_row(path)
        if row is None or not all(k in row for k in _ROW_FIELDS) or not isinstance(row["options"], dict | str):
            continue
        if _ID_FIELD in row or only_here or stem not in _PLAIN_SPLITS:
            return Layout(folder, splits)
    return None


def _first_row(path: Path) -> Mapping[str, Any] | None:
    """The first non-empty line of a .jsonl file as an object, or None (unreadable, empty, not an object)."""
    try:
        with path.open(encoding="utf-8") as f:
            row = json.loads(next((line for line in f if line.strip()), "null"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return row if isinstance(row, dict) else None


def medagentsbench_question(row: Mapping[str, Any], index: int = 0, *, dataset: str = "medagentsbench") -> Question:
    """One MedAgentsBench row as a Question; ``"N/A"`` padding options are dropped, letters re-run A, B, ..."""
    raw = parse_structured(row["options"])
    if not isinstance(raw, Mapping):
        raise ValueError(f"options must be a {{letter: text}} object (got {type(raw).__name__})")
    pairs = sorted(((normalize_letter(k), text(v)) for k, v in raw.items()), key=lambda p: p[0] or "")
    kept = [(letter, option) for letter, option in pairs if option and option != PADDING]
    gold = normalize_letter(row.get("answer_idx"))
    letters = [letter for letter, _ in kept]
    if gold is not None and gold not in letters:
        padded = gold in {letter for letter, _ in pairs}
        raise ValueError(f"answer_idx {gold!r} is {'a padding option' if padded else 'not one of the options'} "
                         f"({', '.join(map(str, letters))})")
    options = lettered([option for _, option in kept])
    if len(options) < 2:
        raise ValueError(f"fewer than two options ({len(options)}) after dropping {PADDING!r} padding")
    meta: dict[str, Any] = {"dataset": dataset, "source_layout": "medagentsbench"}
    for field, key in _META_FIELDS.items():
        if text(row.get(field)):
            meta.setdefault(key, text(row[field]))
    if dataset == "pubmedqa":
        meta["answer_type"] = "yes/no/maybe"
    if _ID_FIELD in row:
        qid = text(row[_ID_FIELD])
        if not qid:
            raise ValueError("realidx (the question's id) is empty")
    else:  # files such as medqa_5options/test_hard.jsonl have no realidx: the id every loader derives
        qid = content_id(text(row["question"]), options)
    return Question(
        id=qid,
        question=text(row["question"]),
        options=options,
        answer_idx=None if gold is None else list(options)[letters.index(gold)],
        meta=meta,
    )


def medagentsbench_questions(rows: Iterable[Row | Mapping[str, Any]], *, dataset: str) -> list[Question]:
    """MedAgentsBench rows as questions of ``dataset`` (the registry name they are reported under).
    A repeated id (a ``realidx`` twice, or two identical rows without one) gets ``-2``, ``-3``, ...
    (`teammed.data._rows.map_rows`)."""
    return map_rows(rows, partial(medagentsbench_question, dataset=dataset),
                    note=" (ids without realidx are hashes of the question and options: identical rows hash alike)")


def build(rows: list[Row], origin: Origin) -> list[Question]:
    """The registry's builder for rows read from a MedAgentsBench folder."""
    return medagentsbench_questions(rows, dataset=origin.dataset or "medagentsbench")


def _spec(name: str, summary: str) -> DatasetSpec:
    folder = FOLDERS[name]
    return DatasetSpec(
        name=name,
        summary=f"{summary} (MedAgentsBench data/{folder}/)",
        schema='question, options {"A": ...}, answer_idx (letter), answer, realidx (optional)',
        build=build,
        files=standard_files(folder) if folder == name else standard_files(folder) + standard_files(name),
        splits=None,
        local_only=f"it ships in MedAgentsBench's data folder (github.com/gersteinlab/medagents-benchmark, "
        f"data/{folder}/test.jsonl); pass that folder as --data-dir",
        aliases=(folder,) if folder != name else (),
    )


# benchmarks teammed reads only from MedAgentsBench's folder (the others have loaders of their own too)
EXTRA_SPECS: tuple[DatasetSpec, ...] = (
    _spec("mmlu", "MMLU medical subjects (anatomy, clinical knowledge, college biology and medicine, medical "
          "genetics, professional medicine), 4 options"),
    _spec("afrimedqa", "AfriMed-QA single-answer MCQs, up to 10 options"),
    _spec("medexqa", "MedExQA, five medical specialties, 4 options"),
    _spec("medxpertqa_r", "MedXpertQA reasoning questions"),
    _spec("medxpertqa_u", "MedXpertQA understanding questions"),
)
_ONLY_HERE = frozenset(spec.name for spec in EXTRA_SPECS)
