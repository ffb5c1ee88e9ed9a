"""Accessors over result rows: the typed `ResultRow` and its `Deliberation` where a row has one,
tolerant readers over stored dicts elsewhere (missing keys and nulls read as "no data")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from teammed.records import ResultRow, load_row

if TYPE_CHECKING:
    from teammed.programs.record import Deliberation

Row = Mapping[str, Any]


def typed(row: ResultRow | Row) -> ResultRow:
    """A row as the typed `ResultRow` (a stored dict is validated and upgraded by `load_row`)."""
    return row if isinstance(row, ResultRow) else load_row(dict(row))


def deliberation(row: ResultRow | Row) -> Deliberation | None:
    """The typed record of a teamwork row; None for a failed row, a peer system's record or a
    record of an older shape (its readers then fall back to the stored dict)."""
    from teammed.programs.record import Deliberation

    value = row.record if isinstance(row, ResultRow) else row.get("record")
    if not isinstance(value, Mapping) or "answer" not in value or "agents" not in value:
        return None
    try:
        return Deliberation.model_validate(value)
    except ValidationError:
        return None


def record(row: Row) -> Mapping[str, Any]:
    """The teamwork record of a row, or an empty mapping for systems that keep none."""
    value = row.get("record")
    return value if isinstance(value, Mapping) else {}


def items(mapping: Mapping[str, Any], key: str) -> list[Any]:
    """``mapping[key]`` as a list; missing or null reads as empty."""
    value = mapping.get(key)
    return list(value) if isinstance(value, list | tuple) else []


def is_labeled(row: Row) -> bool:
    """A row with a gold answer. Unlabeled rows (``labeled`` false, or a null ``gold``) are answered
    but left out of accuracy, calibration and paired tests."""
    if "labeled" in row:
        return bool(row["labeled"])
    return not ("gold" in row and row["gold"] is None)


def is_correct(row: Row) -> bool:
    """Correct and not failed: a failed question never counts as correct."""
    return bool(row.get("correct")) and not row.get("failed")


def first_choice(entry: Mapping[str, Any]) -> str | None:
    """An agent's first choice: its ``first`` field, else the head of its ranking."""
    first = entry.get("first")
    if first:
        return str(first)
    ranking = entry.get("ranking") or []
    return str(ranking[0]) if ranking else None


def number(value: Any) -> float | None:
    """A finite int/float (bools excluded), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value else None  # NaN is not data


def mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def agent_roles(row: Row) -> dict[str, str]:
    """Agent id -> role, from the record's agents (the authoritative team list)."""
    typed_record = deliberation(row)
    if typed_record is not None:
        return {agent.id: agent.role or "unknown" for agent in typed_record.agents if agent.id}
    roles: dict[str, str] = {}
    for agent in items(record(row), "agents"):
        if isinstance(agent, Mapping) and agent.get("id"):
            roles[str(agent["id"])] = str(agent.get("role") or "unknown")
    return roles


def row_roles(row: Row) -> list[str]:
    """The roles a row's team recruited: the row's ``roles``, else the record's agents."""
    roles = [str(r) for r in items(row, "roles") if r]
    return roles or list(agent_roles(row).values())
