"""MedMCQA (hub ``openlifescienceai/medmcqa``, or the original release's JSON lines).

Fields: ``id``, ``question``, ``opa``..``opd``, ``cop`` (correct option), ``subject_name``,
``topic_name``, ``choice_type`` ("single"/"multi"), ``exp``. ``subject_name`` goes to
``meta["subject_name"]`` for stratified sampling.

The ``cop`` rule: the hub numbers options 0-3, the original JSON 1-4. ``cop_base=0`` or
``cop_base=1`` says which; left as None it is detected over the whole file: a 0 means 0-based,
a 4 means 1-based, both is an error, and neither (only 1-3 seen) is an error asking for
``cop_base``. Rows from the hub are always 0-based. A negative or empty ``cop`` (the unlabeled
test split) gives ``answer_idx=None``.

Local files in the data directory, first match wins (``.*`` = .jsonl/.json/.csv/.parquet):
``medmcqa/{split}.*``, ``medmcqa_{split}.*``, ``medmcqa/{split}-*.parquet``, ``medmcqa.*`` for
the default split ``validation``; the validation split may also be spelled ``dev`` (the
original ``dev.json``). Default split is validation because the test split has no answers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from teammed.data._fields import content_id, lettered, text
from teammed.data._hub import HubRef
from teammed.data._rows import Row, map_rows
from teammed.data._spec import DatasetSpec, Origin, standard_files
from teammed.errors import DataError
from teammed.types import Question

__all__ = ["medmcqa_question", "medmcqa_questions", "detect_cop_base", "SPEC"]

OPTION_FIELDS = ("opa", "opb", "opc", "opd")


def medmcqa_question(row: Mapping[str, Any], index: int = 0, *, cop_base: int = 0) -> Question:
    """One MedMCQA row as a Question; ``cop_base`` is 0 (hub) or 1 (original JSON)."""
    question = text(row["question"])
    options = lettered([text(row[name]) for name in OPTION_FIELDS])
    meta = {"dataset": "medmcqa"}
    for source, target in (("subject_name", "subject_name"), ("topic_name", "topic_name"),
                           ("choice_type", "choice_type"), ("exp", "explanation")):
        if text(row.get(source)):
            meta[target] = text(row[source])
    return Question(
        id=text(row.get("id")) or content_id(question, options),
        question=question,
        options=options,
        answer_idx=_gold(row.get("cop"), cop_base, options),
        meta=meta,
    )


def medmcqa_questions(
    rows: Iterable[Row | Mapping[str, Any]], *, cop_base: int | None = None
) -> list[Question]:
    """MedMCQA rows as questions; ``cop_base`` None detects it (see the module docstring)."""
    rows = list(rows)
    base = detect_cop_base(rows) if cop_base is None else cop_base
    if base not in (0, 1):
        raise DataError(f"cop_base must be 0 (hub, cop 0-3) or 1 (original JSON, cop 1-4); got {base!r}")
    return map_rows(rows, partial(medmcqa_question, cop_base=base))


def detect_cop_base(rows: Iterable[Row | Mapping[str, Any]]) -> int:
    """0 if some ``cop`` is 0, 1 if some is 4; DataError when it cannot tell."""
    seen = set()
    for row in rows:
        data = row.data if isinstance(row, Row) else row
        try:
            cop = _cop(data.get("cop"))
        except ValueError:
            continue  # reported with its row when mapped
        if cop is not None:
            seen.add(cop)
    if 0 in seen and 4 in seen:
        raise DataError("MedMCQA cop values include both 0 and 4: the file mixes 0-based and 1-based answers")
    if 0 in seen or not seen:
        return 0
    if 4 in seen:
        return 1
    raise DataError(
        "Cannot tell whether MedMCQA cop is 0-based or 1-based: every cop is in 1-3. Pass cop_base=0 for "
        "Hugging Face rows (openlifescienceai/medmcqa) or cop_base=1 for the original MedMCQA JSON."
    )


def _cop(value: Any) -> int | None:
    raw = text(value)
    if not raw:
        return None
    cop = int(float(raw))
    return None if cop < 0 else cop


def _gold(value: Any, base: int, options: Mapping[str, str]) -> str | None:
    cop = _cop(value)
    if cop is None:
        return None
    position = cop - base
    if not 0 <= position < len(options):
        raise ValueError(f"cop {cop} is out of range for {base}-based answers with {len(options)} options")
    return list(options)[position]


def _build(rows: list[Row], origin: Origin, *, cop_base: int | None = None) -> list[Question]:
    return medmcqa_questions(rows, cop_base=0 if cop_base is None and origin.from_hub else cop_base)  # hub: 0-3


SPEC = DatasetSpec(
    name="medmcqa",
    summary="MedMCQA, 4 options, with subject_name for stratification (openlifescienceai/medmcqa)",
    schema="id, question, opa, opb, opc, opd, cop (0-3 hub / 1-4 original), subject_name, topic_name, "
    "choice_type, exp",
    build=_build,
    files=standard_files("medmcqa"),
    default_split="validation",
    splits=("train", "validation", "test"),
    split_files={"validation": ("validation", "dev")},
    hub=HubRef("openlifescienceai/medmcqa"),
    aliases=("openlifescienceai/medmcqa",),
)
