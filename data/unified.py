"""The unified schema: what a file path is read as unless ``source=`` names another schema.

One row per question::

    {"question": "...", "options": {"A": "...", "B": "..."}, "answer_idx": "B",
     "id": "q1", "meta_info": "step1", "context": "...", "image": "figs/1.png"}

``question`` and ``options`` are required; ``options`` may also be a list of texts (lettered
A, B, ... in order), and a CSV may hold it as a JSON cell or as columns ``A``, ``B``, ....
``answer_idx`` is the gold letter (or give ``answer`` with the option's text); leave both out
for unlabeled data. The id is the source's own (``id``, ``realidx``, ``question_id``, ``pubid``), else
a hash of the question and options that every loader of the same source computes alike.
``meta_info`` (text or object) and ``meta`` (object) become ``Question.meta``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from teammed.data._fields import content_id, gold_letter, options_from, parse_structured, text
from teammed.data._rows import Row, map_rows
from teammed.data._spec import DatasetSpec, Origin
from teammed.types import LETTERS, Question

__all__ = ["unified_question", "unified_questions", "SPEC", "DEMO", "SOURCE_ID_FIELDS"]

# The fields a source's own question id is read from, first present wins (MedMCQA ``id``,
# MedQA-derived ``realidx``, MMLU-Pro ``question_id``, PubMedQA ``pubid``).
SOURCE_ID_FIELDS = ("id", "realidx", "question_id", "pubid")


def unified_question(row: Mapping[str, Any], index: int = 0) -> Question:
    """One unified-schema row as a Question."""
    question = text(row["question"])
    options = options_from(row["options"] if "options" in row else _option_columns(row))
    gold = gold_letter(options, letter=row.get("answer_idx"), answer_text=row.get("answer"))
    qid = next((text(row.get(k)) for k in SOURCE_ID_FIELDS if text(row.get(k))), "") or content_id(question, options)
    return Question(
        id=qid,
        question=question,
        options=options,
        answer_idx=gold,
        context=text(row.get("context")) or None,
        image=text(row.get("image")) or None,
        meta=_meta(row),
    )


def unified_questions(
    rows: Iterable[Row | Mapping[str, Any]], *, dataset: str | None = None
) -> list[Question]:
    """Unified-schema rows as questions; ``dataset`` is recorded in each question's meta."""
    questions = map_rows(rows, unified_question)
    if dataset is None:
        return questions
    return [q.model_copy(update={"meta": {"dataset": dataset, **q.meta}}) for q in questions]


def _option_columns(row: Mapping[str, Any]) -> dict[str, Any]:
    columns = {letter: row[letter] for letter in LETTERS if text(row.get(letter))}
    if not columns:
        raise KeyError("options")
    return columns


def _meta(row: Mapping[str, Any]) -> dict[str, Any]:
    meta = dict(parse_structured(row.get("meta")) or {})
    info = row.get("meta_info")
    if isinstance(info, Mapping):
        meta.update(info)
    elif text(info):
        meta["meta_info"] = text(info)
    return meta


def _build(rows: list[Row], origin: Origin) -> list[Question]:
    return unified_questions(rows, dataset=origin.dataset)


SPEC = DatasetSpec(
    name="unified",
    summary="teammed's unified schema (any file path is read this way by default)",
    schema='one row per question: "question", "options" {"A": ..., "B": ...}, "answer_idx" (gold letter); '
    'optional "id"/"realidx", "context", "image", "meta_info"',
    build=_build,
    files=(),
    local_only="it is the format of your own files; pass a file path instead of a name",
)

DEMO = DatasetSpec(
    name="demo",
    summary="20 original USMLE-style vignettes shipped with teammed (no download)",
    schema="unified",
    build=_build,
    splits=("test",),
    bundled="demo.jsonl",
)
