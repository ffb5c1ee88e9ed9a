"""MMLU-Pro, medical part (hub ``TIGER-Lab/MMLU-Pro``, rows with ``category == "health"``).

Fields: ``question_id``, ``question``, ``options`` (a list of up to 10 texts), ``answer``
(letter), ``answer_index`` (0-based), ``category``, ``src``. ``"N/A"`` padding options are
dropped and the gold letter follows its option. ``category`` (default "health") selects rows;
``category=None`` keeps every category.

Local files in the data directory, first match wins (``.*`` = .jsonl/.json/.csv/.parquet):
``mmlu_pro/{split}.*``, ``mmlu_pro_{split}.*``, ``mmlu_pro/{split}-*.parquet``, ``mmlu_pro.*``
for the default split ``test``; the same with ``mmlu_pro_health`` in place of ``mmlu_pro``.
The files may hold every category (they are filtered). In CSV, ``options`` is a list cell.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from teammed.data._fields import content_id, lettered, normalize_letter, parsed_list, text
from teammed.data._hub import HubRef
from teammed.data._rows import Row, map_rows
from teammed.data._spec import DatasetSpec, standard_files, without_origin
from teammed.types import LETTERS, Question

__all__ = ["mmlu_pro_question", "mmlu_pro_questions", "SPEC"]

PADDING = "N/A"


def mmlu_pro_question(
    row: Mapping[str, Any], index: int = 0, *, category: str | None = "health"
) -> Question | None:
    """One MMLU-Pro row as a Question, or None when it is not in ``category``."""
    if category is not None and text(row.get("category")).lower() != category.lower():
        return None
    texts = [text(option) for option in parsed_list(row["options"], "options")]
    gold = _gold_position(row, len(texts))
    if gold is not None and texts[gold] == PADDING:
        raise ValueError(f"the gold option {LETTERS[gold]} is the {PADDING!r} padding")
    kept = [i for i, option in enumerate(texts) if option != PADDING]
    meta = {"dataset": "mmlu_pro", "category": text(row.get("category")), "src": text(row.get("src"))}
    return Question(
        id=text(row.get("question_id")) or content_id(text(row["question"]), lettered([texts[i] for i in kept])),
        question=text(row["question"]),
        options=lettered([texts[i] for i in kept]),
        answer_idx=None if gold is None else LETTERS[kept.index(gold)],
        meta={k: v for k, v in meta.items() if v},
    )


def mmlu_pro_questions(
    rows: Iterable[Row | Mapping[str, Any]], *, category: str | None = "health"
) -> list[Question]:
    """MMLU-Pro rows of ``category`` (all rows when None) as questions."""
    return map_rows(rows, partial(mmlu_pro_question, category=category))


def _gold_position(row: Mapping[str, Any], n: int) -> int | None:
    index_text = text(row.get("answer_index"))
    if index_text:
        position = int(float(index_text))
    else:
        letter = normalize_letter(row.get("answer"))
        if letter is None:
            return None
        position = LETTERS.index(letter)
    if not 0 <= position < n:
        raise ValueError(f"answer position {position} is out of range for {n} options")
    return position


SPEC = DatasetSpec(
    name="mmlu_pro_health",
    summary="MMLU-Pro health category, up to 10 options (TIGER-Lab/MMLU-Pro)",
    schema="question_id, question, options (list), answer (letter), answer_index, category, src",
    build=without_origin(mmlu_pro_questions),
    files=standard_files("mmlu_pro") + standard_files("mmlu_pro_health"),
    splits=("validation", "test"),
    hub=HubRef("TIGER-Lab/MMLU-Pro"),
    aliases=("mmlu_pro", "mmlu-pro", "mmlupro", "tiger-lab/mmlu-pro"),
)
