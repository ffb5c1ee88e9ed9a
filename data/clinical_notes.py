"""Problem-list questions over clinical SOAP notes (seed paper 004; local files only).

The notes come from MIMIC, which is credentialed (PhysioNet data use agreement), so teammed
never downloads them: you build the file yourself. One row per (note, problem) pair with
fields ``subjective``, ``objective``, ``problem``, ``label`` (yes/no; also true/false, 1/0;
empty for unlabeled) and optional ``id``. Each row asks "Based on the Subjective and
Objective sections, does this patient have {problem}?" with the S and O text as context and
options A=Yes, B=No.

Local files in the data directory, first match wins (``.*`` = .jsonl/.json/.csv/.parquet):
``clinical_notes/{split}.*``, ``clinical_notes_{split}.*``, ``clinical_notes/{split}-*.parquet``
and ``clinical_notes.*`` for the default split ``test``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from teammed.data._fields import stable_id, text
from teammed.data._rows import Row, map_rows
from teammed.data._spec import DatasetSpec, standard_files, without_origin
from teammed.types import Question

__all__ = ["clinical_note_question", "clinical_note_questions", "SPEC"]

QUESTION = "Based on the Subjective and Objective sections, does this patient have {problem}?"
_LABELS = {"yes": "A", "true": "A", "1": "A", "y": "A", "no": "B", "false": "B", "0": "B", "n": "B"}


def clinical_note_question(row: Mapping[str, Any], index: int = 0) -> Question:
    """One (note, problem) row as a Yes/No Question."""
    problem = text(row["problem"])
    if not problem:
        raise ValueError("problem is empty")
    context = f"Subjective:\n{text(row['subjective'])}\n\nObjective:\n{text(row['objective'])}"
    return Question(
        id=text(row.get("id")) or stable_id("note", context, problem),
        question=QUESTION.format(problem=problem),
        options={"A": "Yes", "B": "No"},
        answer_idx=_gold(row.get("label")),
        context=context,
        meta={"dataset": "clinical_notes", "problem": problem, "answer_type": "yes/no"},
    )


def clinical_note_questions(rows: Iterable[Row | Mapping[str, Any]]) -> list[Question]:
    """SOAP-note problem rows as Yes/No questions."""
    return map_rows(rows, clinical_note_question)


def _gold(label: Any) -> str | None:
    value = text(label).lower()
    if not value:
        return None
    if value.endswith(".0"):  # 1.0 / 0.0 from a numeric column
        value = value[:-2]
    if value not in _LABELS:
        raise ValueError(f"label must be yes or no (got {text(label)!r})")
    return _LABELS[value]


SPEC = DatasetSpec(
    name="clinical_notes",
    summary="Problem-list Yes/No questions over SOAP notes (your local MIMIC-derived file)",
    schema="subjective, objective, problem, label (yes/no), optional id",
    build=without_origin(clinical_note_questions),
    files=standard_files("clinical_notes"),
    local_only="the notes are derived from MIMIC, which is credentialed (PhysioNet data use agreement), "
    "so teammed never downloads them",
    aliases=("soap_notes", "soap", "clinical_note"),
)
