"""PMC-VQA multiple-choice questions on figures from PubMed Central (local CSV files).

Columns: ``Figure_path``, ``Question``, ``Answer``, ``Choice A``..``Choice D`` (values may carry
their letter, e.g. ``"A:CT scan"`` or ``" B: MRI"``; the prefix is stripped), ``Answer_label``
(the gold letter; when absent the letter is taken from ``Answer``). ``Question.image`` is
``Figure_path`` joined to ``images_dir`` — by default the ``images`` (else ``figures``)
folder next to the CSV; the images are not opened, so a missing folder is only logged.

Local files in the data directory, first match wins: ``pmc_vqa/{split}.*``,
``pmc_vqa_{split}.*``, ``pmc_vqa/{split}-*.parquet``, ``pmc_vqa/{split}_2.csv`` and
``pmc_vqa/{split}_clean.csv`` (the release's names), ``pmc_vqa.*`` for the default split
``test``; images in ``pmc_vqa/images/``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from teammed.data._fields import gold_letter, lettered, stable_id, text
from teammed.data._rows import Row, map_rows
from teammed.data._spec import DatasetSpec, Origin, standard_files
from teammed.types import Question

__all__ = ["pmc_vqa_question", "pmc_vqa_questions", "strip_choice_prefix", "SPEC"]

logger = logging.getLogger(__name__)

CHOICE_FIELDS = ("Choice A", "Choice B", "Choice C", "Choice D")
_PREFIX = re.compile(r"^\s*\(?([A-D])\s*[:.)]\s*")


def strip_choice_prefix(value: Any) -> str:
    """'A:CT scan', ' B: MRI' and '(C) PET' lose their letter prefix."""
    return _PREFIX.sub("", text(value), count=1).strip()


def pmc_vqa_question(row: Mapping[str, Any], index: int = 0, *, images_dir: Path | None = None) -> Question:
    """One PMC-VQA row as a Question; the image path is joined to ``images_dir`` when given."""
    question = text(row["Question"])
    options = lettered([strip_choice_prefix(row[name]) for name in CHOICE_FIELDS])
    figure = text(row["Figure_path"])
    return Question(
        id=stable_id("pmc_vqa", figure, question),
        question=question,
        options=options,
        answer_idx=_gold(row, options),
        image=str(images_dir / figure) if images_dir is not None else figure,
        meta={"dataset": "pmc_vqa", "figure_path": figure},
    )


def pmc_vqa_questions(
    rows: Iterable[Row | Mapping[str, Any]], *, images_dir: str | Path | None = None
) -> list[Question]:
    """PMC-VQA rows as questions."""
    folder = Path(images_dir) if images_dir is not None else None
    return map_rows(rows, partial(pmc_vqa_question, images_dir=folder))


def _gold(row: Mapping[str, Any], options: Mapping[str, str]) -> str | None:
    if text(row.get("Answer_label")):
        return gold_letter(options, letter=row["Answer_label"])
    answer = text(row.get("Answer"))
    match = _PREFIX.match(answer)
    if match:
        return gold_letter(options, letter=match.group(1))
    return gold_letter(options, answer_text=answer)


def _images_dir(given: str | Path | None, origin: Origin) -> Path | None:
    if given is not None:
        folder = Path(given).expanduser()
    else:
        base = origin.directory or origin.data_dir
        if base is None:
            return None
        candidates = [base / "images", base / "figures"]
        folder = next((c for c in candidates if c.is_dir()), candidates[0])
    if not folder.is_dir():
        logger.warning("PMC-VQA images folder %s does not exist; image paths point into it anyway", folder)
    return folder


def _build(rows: list[Row], origin: Origin, *, images_dir: str | Path | None = None) -> list[Question]:
    return pmc_vqa_questions(rows, images_dir=_images_dir(images_dir, origin))


SPEC = DatasetSpec(
    name="pmc_vqa",
    summary="PMC-VQA figure questions, 4 options (release CSVs and images folder)",
    schema="Figure_path, Question, Answer, Choice A, Choice B, Choice C, Choice D, Answer_label; "
    "images in an images/ folder next to the CSV (or pass images_dir=...)",
    build=_build,
    files=standard_files("pmc_vqa", "pmc_vqa/{split}_2.csv", "pmc_vqa/{split}_clean.csv"),
    splits=("train", "test"),
    local_only="PMC-VQA's CSVs and image archive are downloaded from its release (xmcmic/PMC-VQA) by hand; "
    "teammed does not fetch the multi-gigabyte image archive",
    aliases=("pmc-vqa", "pmcvqa", "xmcmic/pmc-vqa"),
)
