"""Rows read from a file, each knowing where it came from, and mapping rows to questions.

Every reader returns :class:`Row` objects whose ``where`` names the file and line (JSONL,
CSV), item (JSON) or row (parquet), so a bad row is reported as ``medqa_test.jsonl, line 12:
missing field 'question'`` rather than a traceback.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic

from teammed.errors import DataError
from teammed.types import Question

__all__ = ["Row", "Mapper", "EXTENSIONS", "read_rows", "map_rows"]

logger = logging.getLogger(__name__)

EXTENSIONS = (".jsonl", ".json", ".csv", ".parquet")

Mapper = Callable[[Mapping[str, Any], int], "Question | None"]


@dataclass(frozen=True)
class Row:
    """One source record and where it was read from (for error messages)."""

    where: str
    data: Mapping[str, Any]


def read_rows(path: Path) -> list[Row]:
    """All rows of a .jsonl, .json, .csv, .parquet or single-file .zip; CSV also without a suffix."""
    if not path.is_file():
        raise DataError(f"No such data file: {path}; check the path")
    suffix = path.suffix.lower()
    try:
        if suffix == ".zip":
            return _read_zip(path)
        if suffix == ".parquet":
            return _read_parquet(path)
        with path.open(encoding="utf-8", newline="") as handle:
            return _read_text(handle, suffix, str(path))
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _read_text(handle: io.TextIOBase, suffix: str, name: str) -> list[Row]:
    if suffix == ".jsonl":
        return list(_jsonl(handle, name))
    if suffix == ".json":
        return _json(handle.read(), name)
    if suffix in (".csv", ""):
        return list(_csv(handle, name))
    raise DataError(f"{name}: unsupported file type {suffix!r}; use one of {', '.join(EXTENSIONS)}")


def _jsonl(lines: Iterable[str], name: str) -> Iterator[Row]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{name}, line {number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from exc
        yield Row(where, data)


def _json(content: str, name: str) -> list[Row]:
    """A JSON list, {"data": [...]}, an object of objects (keyed by id, e.g. ori_pqal.json), or JSON lines."""
    try:
        data = json.loads(content)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":  # JSON lines saved as .json (e.g. MedMCQA's dev.json)
            return list(_jsonl(content.splitlines(), name))
        raise DataError(f"{name}: invalid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from exc
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    if isinstance(data, list):
        return [Row(f"{name}, item {i}", item) for i, item in enumerate(data)]
    if isinstance(data, dict) and data and all(isinstance(v, dict) for v in data.values()):
        return [Row(f"{name}, key {key!r}", {"_key": key, **value}) for key, value in data.items()]
    raise DataError(
        f"{name}: expected a JSON list of rows, {{\"data\": [...]}} or an object of rows keyed by id "
        f"(got a {type(data).__name__})"
    )


def _csv(handle: Iterable[str], name: str) -> Iterator[Row]:
    reader = csv.DictReader(handle)
    start = 2
    for data in reader:
        if None in data:
            raise DataError(f"{name}, line {start}: more cells than header columns")
        yield Row(f"{name}, line {start}", data)
        start = reader.line_num + 1


def _read_parquet(path: Path) -> list[Row]:
    import pyarrow.parquet as pq

    try:
        records = pq.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow raises several unrelated types for a bad file
        raise DataError(f"{path}: cannot read parquet ({exc})") from exc
    return [Row(f"{path}, row {i + 1}", record) for i, record in enumerate(records)]


def _read_zip(path: Path) -> list[Row]:
    with zipfile.ZipFile(path) as archive:
        members = [m for m in archive.namelist() if not m.endswith("/")]
        if len(members) != 1:
            raise DataError(f"{path}: a zipped data file must hold exactly one file (found {len(members)})")
        (member,) = members
        with archive.open(member) as raw:
            handle = io.TextIOWrapper(raw, encoding="utf-8", newline="")
            return _read_text(handle, Path(member).suffix.lower(), f"{path}:{member}")


def map_rows(rows: Iterable[Row | Mapping[str, Any]], mapper: Mapper, *, note: str = "") -> list[Question]:
    """Map each row with ``mapper(data, index)``; None drops a row. Errors name the row. A repeated id
    gets ``-2``, ``-3``, ... appended in row order, with a warning naming the file (and ``note``)."""
    questions: list[Question] = []
    source = "the rows"
    for index, row in enumerate(rows):
        where, data = (row.where, row.data) if isinstance(row, Row) else (f"row {index + 1}", row)
        if index == 0 and isinstance(row, Row):  # a row's where is "<file>, line N"
            source = where.rpartition(", ")[0] or where
        if not isinstance(data, Mapping):
            raise DataError(f"{where}: expected an object with named fields (got {type(data).__name__})")
        question = _map_one(where, data, index, mapper)
        if question is not None:
            questions.append(question)
    return _unique_ids(questions, source, note)


def _map_one(where: str, data: Mapping[str, Any], index: int, mapper: Mapper) -> Question | None:
    try:
        return mapper(data, index)
    except KeyError as exc:
        present = ", ".join(sorted(map(str, data))) or "none"
        raise DataError(f"{where}: missing field {exc.args[0]!r} (fields present: {present})") from exc
    except pydantic.ValidationError as exc:
        problems = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        raise DataError(f"{where}: {problems}") from exc
    except (ValueError, TypeError) as exc:
        raise DataError(f"{where}: {exc}") from exc


def _unique_ids(questions: list[Question], source: str, note: str) -> list[Question]:
    counts = Counter(q.id for q in questions)
    repeated = [qid for qid, count in counts.items() if count > 1]
    if not repeated:
        return questions
    logger.warning("%s: %d rows repeat an earlier row's id (%s%s); the repeats get -2, -3, ... appended%s", source,
                   counts.total() - len(counts), ", ".join(repeated[:5]), ", ..." if len(repeated) > 5 else "", note)
    seen: Counter[str] = Counter()
    unique = []
    for q in questions:  # a renamed id that another row holds stays a clash: the run refuses it, naming the id
        seen[q.id] += 1
        unique.append(q if seen[q.id] == 1 else q.model_copy(update={"id": f"{q.id}-{seen[q.id]}"}))
    return unique
