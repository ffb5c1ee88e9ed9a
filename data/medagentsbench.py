"""MedAgentsBench's data folder: one layout and one schema for the benchmarks most papers report.

The folder is ``data/`` of the MedAgentsBench repository (gersteinlab/medagents-benchmark), given
as ``--data-dir DIR`` (or ``$TEAMMED_DATA_DIR``)::

    DIR/medqa/test.jsonl            DIR/pubmedqa/test.jsonl      DIR/mmlu-pro/test.jsonl
    DIR/medqa/test_hard.jsonl       DIR/pubmedqa/train.jsonl     DIR/medbullets/test.jsonl
    DIR/medqa/sampled_50.jsonl      DIR/medmcqa/test.jsonl       DIR/afrimedqa/test.jsonl ...

Each ``<split>.jsonl`` holds one JSON object a line: ``question``, ``options``
({"A": text, ...}; options equal to ``"N/A"`` are padding and dropped), ``answer_idx`` (the gold
letter), ``answer`` (its text), ``realidx`` (the id) and, depending on the benchmark,
``meta_info``, ``category``, ``src``, ``reason`` or ``answer_rationale`` (kept in ``meta``).
The split is the file's stem (``test``, ``test_hard``, ``sampled_50``, ``sampled_50_hard``,
``train``, ...); the default is ``test``. Only ``.jsonl`` files are read (the folder also holds
a ``test_hard.json`` copy for MedQA).

The registry name -> folder map is :data:`FOLDERS`. PubMedQA's rows already hold the abstract and
the question in ``question`` and yes/no/maybe as options A-C; MedMCQA's ``test`` is the original
dev set; ``mmlu-pro`` is MMLU-Pro's health category; ``mmlu`` is MMLU's medical subjects;
``medbullets`` is the five-option MedBullets set.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from teammed.data._fields import lettered, normalize_letter, parse_structured, text
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
_REQUIRED = ("question", "options", "answer_idx", "realidx")
_META_FIELDS = {"meta_info": "meta_info", "category": "category", "src": "src", "reason": "explanation",
                "answer_rationale": "explanation"}


class Layout:
    """One benchmark's folder in MedAgentsBench's layout: its split files by stem."""

    def __init__(self, folder: Path, splits: Mapping[str, Path]) -> None:
        self.folder = folder
        self.splits = dict(splits)

    @property
    def default_split(self) -> str | None:
        return DEFAULT_SPLIT if DEFAULT_SPLIT in self.splits else None

    def file(self, split: str) -> Path | None:
        return self.splits.get(split)


def find_layout(data_dir: Path | None, name: str) -> Layout | None:
    """The MedAgentsBench folder of registry name ``name`` under ``data_dir``, or None.

    A folder counts only when its first non-empty row has MedAgentsBench's fields (question,
    options, answer_idx, realidx): a ``medqa/test.jsonl`` in another schema is left to its own loader.
    """
    folder_name = FOLDERS.get(name)
    if data_dir is None or folder_name is None:
        return None
    folder = data_dir / folder_name
    if not folder.is_dir():
        return None
    splits = {path.stem: path for path in sorted(folder.glob("*.jsonl")) if path.is_file()}
    if not splits or not _has_schema(splits.get(DEFAULT_SPLIT) or next(iter(splits.values()))):
        return None
    return Layout(folder, splits)


def _has_schema(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    return isinstance(row, dict) and all(k in row for k in _REQUIRED)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return False


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
    realidx = text(row["realidx"])
    if not realidx:
        raise ValueError("realidx (the question's id) is empty")
    return Question(
        id=realidx,
        question=text(row["question"]),
        options=options,
        answer_idx=None if gold is None else list(options)[letters.index(gold)],
        meta=meta,
    )


def medagentsbench_questions(rows: Iterable[Row | Mapping[str, Any]], *, dataset: str) -> list[Question]:
    """MedAgentsBench rows as questions of ``dataset`` (the registry name they are reported under)."""
    return map_rows(rows, lambda row, index: medagentsbench_question(row, index, dataset=dataset))


def build(rows: list[Row], origin: Origin) -> list[Question]:
    """The registry's builder for rows read from a MedAgentsBench folder."""
    return medagentsbench_questions(rows, dataset=origin.dataset or "medagentsbench")


def _spec(name: str, summary: str) -> DatasetSpec:
    folder = FOLDERS[name]
    return DatasetSpec(
        name=name,
        summary=f"{summary} (MedAgentsBench data/{folder}/)",
        schema='question, options {"A": ...}, answer_idx (letter), answer, realidx',
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
