from __future__ import annotations

import pytest

from teammed.programs.aggregation import borda_scores, hierarchical_weights, rule_tie_break, winners

LETTERS = ["A", "B", "C", "D"]


def test_standard_borda_by_hand():
    rankings = {"a1": ["A", "B", "C", "D"], "a2": ["B", "A", "D", "C"], "a3": ["B", "C", "A", "D"]}
    # A: 3+2+1 = 6, B: 2+3+3 = 8, C: 1+0+2 = 3, D: 0+1+0 = 1
    assert borda_scores(rankings, LETTERS) == {"A": 6, "B": 8, "C": 3, "D": 1}
    assert winners(borda_scores(rankings, LETTERS)) == ["B"]


def test_trust_weighted_borda_by_hand():
    rankings = {"a1": ["A", "B", "C", "D"], "a2": ["B", "A", "C", "D"]}
    scores = borda_scores(rankings, LETTERS, {"a1": 1.0, "a2": 0.4})
    # A: 1.0*3 + 0.4*2 = 3.8 ; B: 1.0*2 + 0.4*3 = 3.2 ; C: 1+0.4 = 1.4 ; D: 0
    assert scores == pytest.approx({"A": 3.8, "B": 3.2, "C": 1.4, "D": 0.0})


def test_hierarchical_borda_by_hand():
    w = dict(zip(["a1", "a2", "a3"], hierarchical_weights(3), strict=True))
    rankings = {"a1": ["C", "A", "B"], "a2": ["A", "B", "C"], "a3": ["A", "C", "B"]}
    scores = borda_scores(rankings, ["A", "B", "C"], w)
    # A: .5*1 + .3*2 + .2*2 = 1.5 ; B: 0 + .3*1 + 0 = 0.3 ; C: .5*2 + 0 + .2*1 = 1.2
    assert scores == pytest.approx({"A": 1.5, "B": 0.3, "C": 1.2})


@pytest.mark.parametrize("n,expected", [(2, (0.6, 0.4)), (3, (0.5, 0.3, 0.2)), (4, (0.4, 0.3, 0.2, 0.1))])
def test_hierarchical_weights(n, expected):
    assert hierarchical_weights(n) == expected
    assert sum(hierarchical_weights(n)) == pytest.approx(1.0)


def test_tie_detection_tolerates_float_noise():
    assert winners({"A": 0.1 + 0.2, "B": 0.3, "C": 0.0}) == ["A", "B"]


def test_rule_tie_break_first_place_votes():
    final = {"a1": ["A", "B", "C"], "a2": ["B", "A", "C"], "a3": ["B", "C", "A"], "a4": ["A", "C", "B"]}
    # two first places each; A and B tied on Borda too -> round-2 Borda decides
    initial = {"a1": ["B", "A", "C"], "a2": ["B", "A", "C"]}
    assert rule_tie_break(["A", "B"], final, initial, ["A", "B", "C"]) == "B"


def test_rule_tie_break_prefers_more_first_places():
    final = {"a1": ["C", "A", "B"], "a2": ["C", "B", "A"], "a3": ["A", "B", "C"]}
    assert rule_tie_break(["A", "C"], final, {}, ["A", "B", "C"]) == "C"


def test_rule_tie_break_falls_back_to_letter_order():
    final = {"a1": ["B", "A"], "a2": ["A", "B"]}
    assert rule_tie_break(["A", "B"], final, {"a1": ["A", "B"], "a2": ["B", "A"]}, ["A", "B"]) == "A"
