"""MedQA (USMLE), in both public shapes; the shape is detected per row.

* ``medqa``: hub ``GBaker/MedQA-USMLE-4-options``. Fields ``question``, ``options``
  ({"A": ..., "D": ...}), ``answer_idx`` (letter), ``answer`` (text), ``meta_info``
  ("step1" or "step2&3"). The original MedQA US JSONL has the same shape with options A-E.
* ``medqa_5options``: hub ``bigbio/med_qa`` config ``med_qa_en_source``. Same fields, but
  ``options`` is a list of {"key": "A", "value": ...} with five options.

Local files in the data directory, first match wins (``.*`` = .jsonl/.json/.csv/.parquet):
``medqa/{split}.*``, ``medqa_{split}.*``, ``medqa/{split}-*.parquet``,
``phrases_no_exclude_{split}.jsonl`` (GBaker's file names) and ``medqa.*`` for the default
split ``test``; for the five-option variant the same with ``medqa_5options`` in place of
``medqa`` (and ``medqa/US/{split}.jsonl``). In CSV, ``options`` is a JSON cell.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from teammed.data._fields import content_id, gold_letter, options_from, text
from teammed.data._hub import HubRef
from teammed.data._rows import Row, map_rows
from teammed.data._spec import DatasetSpec, standard_files, without_origin
from teammed.types import Question

__all__ = ["medqa_question", "medqa_questions", "SPEC", "SPEC_5OPTIONS"]

SCHEMA = (
    'question, options ({"A": ..., "D": ...} or a list of {"key", "value"}), answer_idx (letter), '
    "answer (text), meta_info"
)


def medqa_question(row: Mapping[str, Any], index: int = 0) -> Question:
    """One MedQA row (either shape) as a Question."""
    question = text(row["question"])
    options = options_from(row["options"])
    meta: dict[str, Any] = {"dataset": "medqa"}
    if text(row.get("meta_info")):
        meta["meta_info"] = text(row["meta_info"])
    return Question(
        id=text(row.get("id")) or text(row.get("realidx")) or content_id(question, options),
        question=question,
        options=options,
        answer_idx=gold_letter(options, letter=row.get("answer_idx"), answer_text=row.get("answer")),
        meta=meta,
    )


def medqa_questions(rows: Iterable[Row | Mapping[str, Any]]) -> list[Question]:
    """MedQA rows (GBaker 4-option or bigbio 5-option shape) as questions."""
    return map_rows(rows, medqa_question)


SPEC = DatasetSpec(
    name="medqa",
    summary="MedQA-USMLE, 4 options (GBaker/MedQA-USMLE-4-options)",
    schema=SCHEMA,
    build=without_origin(medqa_questions),
    files=standard_files("medqa", "phrases_no_exclude_{split}.jsonl"),
    splits=("train", "test"),
    hub=HubRef("GBaker/MedQA-USMLE-4-options"),
    aliases=("medqa_4options", "medqa-usmle", "gbaker/medqa-usmle-4-options"),
)

SPEC_5OPTIONS = DatasetSpec(
    name="medqa_5options",
    summary="MedQA-USMLE, 5 options (bigbio/med_qa, med_qa_en_source)",
    schema=SCHEMA,
    build=without_origin(medqa_questions),
    files=standard_files("medqa_5options", "medqa/US/{split}.jsonl"),
    splits=("train", "validation", "test"),
    split_files={"validation": ("validation", "dev")},
    hub=HubRef("bigbio/med_qa", "med_qa_en_source"),
    aliases=("bigbio/med_qa",),
)
