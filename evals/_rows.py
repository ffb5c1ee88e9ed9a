"""Tolerant accessors over result rows: missing keys and nulls read as "no data"."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Row = Mapping[str, Any]


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
    roles: dict[str, str] = {}
    for agent in items(record(row), "agents"):
        if isinstance(agent, Mapping) and agent.get("id"):
            roles[str(agent["id"])] = str(agent.get("role") or "unknown")
    return roles


def row_roles(row: Row) -> list[str]:
    """The roles a row's team recruited: the row's ``roles``, else the record's agents."""
    roles = [str(r) for r in items(row, "roles") if r]
    return roles or list(agent_roles(row).values())
