"""PathVQA yes/no questions (hub ``flaviagiammarino/path-vqa``).

Fields: ``image``, ``question``, ``answer``. Only rows answered "yes" or "no" are kept, as
options A=yes, B=no. ``Question.image`` is always a file path: a path string is kept
(resolved against the data file's folder when it exists there); image bytes (``{"bytes",
"path"}`` as stored in parquet) or a PIL image (as the hub returns it) are saved once, named by
a hash of their content, under ``image_dir`` — by default ``<data dir>/pathvqa/images``, or
``<temp dir>/teammed/pathvqa-images`` when there is no data directory.

Local files in the data directory, first match wins (``.*`` = .jsonl/.json/.csv/.parquet):
``pathvqa/{split}.*``, ``pathvqa_{split}.*``, ``pathvqa/{split}-*.parquet`` (the hub's
parquet shards, e.g. ``test-00000-of-00003.parquet``) and ``pathvqa.*`` for the default
split ``test``.
"""

from __future__ import annotations

import hashlib
import io
import tempfile
from collections.abc import Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from teammed.data._fields import stable_id, text
from teammed.data._hub import HubRef
from teammed.data._rows import Row, map_rows
from teammed.data._spec import DatasetSpec, Origin, standard_files
from teammed.types import Question

__all__ = ["pathvqa_question", "pathvqa_questions", "image_file", "SPEC"]

YES_NO = {"yes": "A", "no": "B"}
_MAGIC = {b"\x89PNG": ".png", b"\xff\xd8": ".jpg", b"GIF8": ".gif", b"BM": ".bmp"}


def pathvqa_question(
    row: Mapping[str, Any], index: int = 0, *, image_dir: Path, base_dir: Path | None = None
) -> Question | None:
    """One PathVQA row as a yes/no Question, or None for an open-ended answer."""
    gold = YES_NO.get(text(row["answer"]).lower())
    if gold is None:
        return None
    question = text(row["question"])
    image = image_file(row["image"], image_dir=image_dir, base_dir=base_dir)
    return Question(
        id=stable_id("pathvqa", image, question),
        question=question,
        options={"A": "yes", "B": "no"},
        answer_idx=gold,
        image=image,
        meta={"dataset": "pathvqa", "answer_type": "yes/no"},
    )


def pathvqa_questions(
    rows: Iterable[Row | Mapping[str, Any]], *, image_dir: str | Path, base_dir: Path | None = None
) -> list[Question]:
    """The yes/no rows of PathVQA as questions; embedded images are saved under ``image_dir``."""
    return map_rows(rows, partial(pathvqa_question, image_dir=Path(image_dir), base_dir=base_dir))


def image_file(value: Any, *, image_dir: Path, base_dir: Path | None = None) -> str:
    """A path for an image given as a path, {"bytes", "path"} or a PIL image (saved when needed)."""
    if isinstance(value, str | Path):
        return _resolve(str(value), base_dir)
    if isinstance(value, Mapping):
        if value.get("bytes"):
            return str(_save(bytes(value["bytes"]), image_dir))
        if text(value.get("path")):
            return _resolve(text(value["path"]), base_dir)
        raise ValueError("image has neither bytes nor a path")
    if hasattr(value, "save"):  # a PIL image, as datasets decodes it
        buffer = io.BytesIO()
        value.save(buffer, format="PNG")
        return str(_save(buffer.getvalue(), image_dir))
    raise ValueError(f"image must be a path, {{bytes, path}} or a PIL image (got {type(value).__name__})")


def _resolve(path: str, base_dir: Path | None) -> str:
    if not path:
        raise ValueError("image path is empty")
    if base_dir is not None and not Path(path).is_absolute() and (base_dir / path).exists():
        return str(base_dir / path)
    return path


def _save(data: bytes, image_dir: Path) -> Path:
    suffix = next((s for magic, s in _MAGIC.items() if data.startswith(magic)), ".img")
    path = image_dir / f"{hashlib.sha1(data).hexdigest()[:16]}{suffix}"
    if not path.exists():
        image_dir.mkdir(parents=True, exist_ok=True)
        partial_path = path.with_name(path.name + ".part")
        partial_path.write_bytes(data)
        partial_path.replace(path)
    return path


def _build(rows: list[Row], origin: Origin, *, image_dir: str | Path | None = None) -> list[Question]:
    if image_dir is not None:
        folder = Path(image_dir).expanduser()
    elif origin.data_dir is not None:
        folder = origin.data_dir / "pathvqa" / "images"
    else:  # no data directory: a folder in the temp dir
        folder = Path(tempfile.gettempdir()) / "teammed" / "pathvqa-images"
    return pathvqa_questions(rows, image_dir=folder, base_dir=origin.directory)


SPEC = DatasetSpec(
    name="pathvqa",
    summary="PathVQA pathology images, yes/no questions only (flaviagiammarino/path-vqa)",
    schema="image (path, or {bytes, path} in parquet), question, answer",
    build=_build,
    files=standard_files("pathvqa"),
    splits=("train", "validation", "test"),
    hub=HubRef("flaviagiammarino/path-vqa"),
    aliases=("path-vqa", "path_vqa", "flaviagiammarino/path-vqa"),
)
