"""Figures that never depend on the order rows arrive in: a streamed run sees its rows in completion
order, a report in file order (the hostile review of the streaming change found a tie that did)."""

from __future__ import annotations

import itertools

from teammed import answer_stats
from teammed.records import ResultRow


def _rows(pairs: list[tuple[str, str]]) -> list[ResultRow]:
    return [ResultRow(id=f"q{i}", gold=gold, prediction=pred, correct=gold == pred)
            for i, (gold, pred) in enumerate(pairs)]


def test_a_tied_majority_letter_and_answer_spread_do_not_depend_on_row_order() -> None:
    rows = _rows([("B", "C"), ("A", "A"), ("B", "A"), ("A", "C")])  # golds A/B tie, predictions A/C tie
    seen = {(answer_stats.majority_baseline(order).letter, answer_stats.answer_spread(order).top)
            for order in itertools.permutations(rows)}
    assert seen == {("A", "A")}  # the earliest letter, whatever came first
