"""MedBullets USMLE Step 2/3 questions, the op4 and op5 CSVs (local files only).

Columns: ``question``, ``opa``..``ope`` (``ope`` empty or absent in op4), ``answer_idx``
(letter), ``answer`` (text), ``explanation`` (and ``link``; both kept in meta). Empty trailing
option columns are dropped.

Local files in the data directory, first match wins: ``medbullets_op4.csv``,
``medbullets/medbullets_op4.csv``, ``medbullets/op4.*`` and ``medbullets_op4.*`` (``.*`` =
.jsonl/.json/.csv/.parquet); op5 likewise. The CSVs are one test split. The name
``medbullets`` means the five-option set (op5), as in MedAgentsBench, whose
``medbullets/<split>.jsonl`` folder is read too (`teammed.data.medagentsbench`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from teammed.data._fields import content_id, gold_letter, lettered, text
from teammed.data._rows import Row, map_rows
from teammed.data._spec import DatasetSpec, without_origin
from teammed.types import Question

__all__ = ["medbullets_question", "medbullets_questions", "SPEC_OP4", "SPEC_OP5"]

OPTION_FIELDS = ("opa", "opb", "opc", "opd", "ope")


def medbullets_question(row: Mapping[str, Any], index: int = 0) -> Question:
    """One MedBullets row as a Question."""
    question = text(row["question"])
    options = lettered(_option_texts(row))
    meta = {"dataset": "medbullets"}
    for field in ("explanation", "link"):
        if text(row.get(field)):
            meta[field] = text(row[field])
    return Question(
        id=text(row.get("id")) or content_id(question, options),
        question=question,
        options=options,
        answer_idx=gold_letter(options, letter=row.get("answer_idx"), answer_text=row.get("answer")),
        meta=meta,
    )


def medbullets_questions(rows: Iterable[Row | Mapping[str, Any]]) -> list[Question]:
    """MedBullets rows (op4 or op5) as questions."""
    return map_rows(rows, medbullets_question)


def _option_texts(row: Mapping[str, Any]) -> list[str]:
    texts = [text(row.get(name)) for name in OPTION_FIELDS]
    while texts and not texts[-1]:
        texts.pop()
    if "" in texts:
        missing = OPTION_FIELDS[texts.index("")]
        raise ValueError(f"option {missing} is empty but a later option is not")
    return texts


def _spec(variant: str, n: int) -> DatasetSpec:
    stem = f"medbullets_{variant}"
    return DatasetSpec(
        name=stem,
        summary=f"MedBullets USMLE Step 2/3, {n} options ({stem}.csv)",
        schema="question, opa, opb, opc, opd, ope, answer_idx (letter), answer, explanation",
        build=without_origin(medbullets_questions),
        files=(f"{stem}.csv", f"medbullets/{stem}.csv", f"medbullets/{variant}.*", f"{stem}.*"),
        splits=("test",),
        local_only="MedBullets ships as CSV files in the GitHub repository HanjieChen/ChallengeClinicalQA "
        f"(medbullets/{stem}.csv), not on the Hugging Face hub",
        # the five-option set is the one MedAgentsBench and the papers call "medbullets"
        aliases=(f"medbullets-{variant}", "medbullets") if variant == "op5" else (f"medbullets-{variant}",),
    )


SPEC_OP4 = _spec("op4", 4)
SPEC_OP5 = _spec("op5", 5)
