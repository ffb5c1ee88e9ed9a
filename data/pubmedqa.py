"""PubMedQA, expert-labeled part (hub ``qiaojin/PubMedQA`` config ``pqa_labeled``).

Two shapes, detected per row:

* hub: ``pubid``, ``question``, ``context`` ({"contexts": [...], "labels": [...],
  "meshes": [...]}), ``long_answer``, ``final_decision`` (yes/no/maybe);
* the original ``ori_pqal.json``: an object keyed by PMID whose values hold ``QUESTION``,
  ``CONTEXTS``, ``LABELS``, ``MESHES``, ``YEAR``, ``LONG_ANSWER``, ``final_decision``.

Options are always A=yes, B=no, C=maybe. With ``with_context=True`` (the default) the abstract
sections, each prefixed by its label (BACKGROUND, METHODS, ...), become ``Question.context``.

Local files in the data directory, first match wins (``.*`` = .jsonl/.json/.csv/.parquet):
``pubmedqa/{split}.*``, ``pubmedqa_{split}.*``, ``pubmedqa/{split}-*.parquet``, and for the
default split ``train`` (the only split of pqa_labeled) also ``ori_pqal.json``,
``pubmedqa/ori_pqal.json`` and ``pubmedqa.*``. In CSV, ``context`` is a JSON cell.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from teammed.data._fields import YES_NO_MAYBE, parse_structured, text
from teammed.data._hub import HubRef
from teammed.data._rows import Row, map_rows
from teammed.data._spec import DatasetSpec, standard_files, without_origin
from teammed.types import Question

__all__ = ["pubmedqa_question", "pubmedqa_questions", "SPEC"]

_GOLD = {v: k for k, v in YES_NO_MAYBE.items()}


def pubmedqa_question(row: Mapping[str, Any], index: int = 0, *, with_context: bool = True) -> Question:
    """One PubMedQA row (hub or ori_pqal.json shape) as a Question."""
    fields = _original(row) if "QUESTION" in row else _hub(row)
    meta: dict[str, Any] = {"dataset": "pubmedqa", "answer_type": "yes/no/maybe"}
    meta.update({k: v for k, v in fields["meta"].items() if v})
    return Question(
        id=fields["pubid"],
        question=fields["question"],
        options=dict(YES_NO_MAYBE),
        answer_idx=_gold(row.get("final_decision")),
        context=_join(fields["contexts"], fields["labels"]) if with_context else None,
        meta=meta,
    )


def pubmedqa_questions(
    rows: Iterable[Row | Mapping[str, Any]], *, with_context: bool = True
) -> list[Question]:
    """PubMedQA rows as yes/no/maybe questions."""
    return map_rows(rows, partial(pubmedqa_question, with_context=with_context))


def _hub(row: Mapping[str, Any]) -> dict[str, Any]:
    context = parse_structured(row.get("context")) or {}
    if not isinstance(context, Mapping):
        raise ValueError(f"context must be an object with 'contexts' (got {type(context).__name__})")
    return {
        "pubid": text(row["pubid"]),
        "question": text(row["question"]),
        "contexts": list(context.get("contexts") or []),
        "labels": list(context.get("labels") or []),
        "meta": {"long_answer": text(row.get("long_answer")), "meshes": list(context.get("meshes") or [])},
    }


def _original(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "pubid": text(row.get("pubid")) or text(row["_key"]),
        "question": text(row["QUESTION"]),
        "contexts": list(row.get("CONTEXTS") or []),
        "labels": list(row.get("LABELS") or []),
        "meta": {
            "long_answer": text(row.get("LONG_ANSWER")),
            "meshes": list(row.get("MESHES") or []),
            "year": text(row.get("YEAR")),
        },
    }


def _gold(decision: Any) -> str | None:
    value = text(decision).lower()
    if not value:
        return None
    if value not in _GOLD:
        raise ValueError(f"final_decision must be yes, no or maybe (got {value!r})")
    return _GOLD[value]


def _join(contexts: list[Any], labels: list[Any]) -> str | None:
    if len(labels) != len(contexts):
        labels = [""] * len(contexts)
    pairs = zip(labels, contexts, strict=True)
    parts = [f"{text(label)}: {text(body)}" if text(label) else text(body) for label, body in pairs]
    return "\n\n".join(parts) or None


SPEC = DatasetSpec(
    name="pubmedqa",
    summary="PubMedQA expert-labeled, yes/no/maybe with abstract context (qiaojin/PubMedQA pqa_labeled)",
    schema="pubid, question, context {contexts, labels, meshes}, long_answer, final_decision; "
    "or the original ori_pqal.json (object keyed by PMID with QUESTION, CONTEXTS, final_decision)",
    build=without_origin(pubmedqa_questions),
    files=standard_files("pubmedqa", "ori_pqal.json", "pubmedqa/ori_pqal.json"),
    default_split="train",
    hub=HubRef("qiaojin/PubMedQA", "pqa_labeled"),
    aliases=("qiaojin/pubmedqa", "pubmedqa_labeled", "pqa_labeled"),
)
