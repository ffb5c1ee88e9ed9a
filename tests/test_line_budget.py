"""Issue 34, item 5: the transport and concurrency modules, and all of backends/ with them, stay
within their line budgets (counted as ``wc -l`` does, docstrings included)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _budget_script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("line_budget", ROOT / "scripts" / "line_budget.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_transport_and_backends_stay_within_their_line_budgets() -> None:
    budget = _budget_script()
    found = budget.counts()
    assert found["transport"] <= budget.TRANSPORT_BUDGET, found
    assert found["all"] <= budget.ALL_BUDGET, found


def test_every_counted_module_exists() -> None:
    """A renamed module must be renamed in the budget too, not silently dropped from the count."""
    budget = _budget_script()
    assert all((ROOT / path).is_file() for path in budget.TRANSPORT)
