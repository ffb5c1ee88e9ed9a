from __future__ import annotations

import pytest

from teammed.programs.ranking import first_choice_agreement, repair_ranking
from teammed.programs.smm import SharedMentalModel, intersect_facts
from teammed.programs.trust import (
    apply_quality,
    automated_quality,
    clamp_trust,
    ema_update,
    initial_trust,
    verdict_update,
)


def test_initial_and_clamp():
    assert initial_trust(["a", "b"]) == {"a": 0.8, "b": 0.8}
    assert clamp_trust(1.3) == 1.0 and clamp_trust(0.1) == 0.4 and clamp_trust(0.55) == 0.55


def test_ema_by_hand():
    assert ema_update(0.8, 1.0) == pytest.approx(0.86)  # .7*.8 + .3*1
    assert ema_update(0.8, 0.0) == pytest.approx(0.56)
    assert ema_update(0.45, 0.0) == pytest.approx(0.4)  # .315 clamped up
    assert apply_quality({"a": 0.8, "b": 0.8}, {"a": 0.5}) == pytest.approx({"a": 0.71, "b": 0.8})


@pytest.mark.parametrize("start,verdict,end", [
    (0.8, "strong", 0.85), (0.8, "weak", 0.75), (0.8, "disputed", 0.78),
    (0.98, "strong", 1.0), (0.42, "weak", 0.4), (0.41, "disputed", 0.4),
])
def test_verdict_updates_clamped(start, verdict, end):
    assert verdict_update(start, verdict) == pytest.approx(end)


def test_verdict_must_be_known():
    with pytest.raises(ValueError, match="verdict"):
        verdict_update(0.8, "excellent")


def test_automated_quality_checks():
    good = automated_quality(ranking_repaired=False, n_facts=3, justification="x" * 50, confidence="High")
    bad = automated_quality(ranking_repaired=True, n_facts=0, justification="short", confidence="Low")
    half = automated_quality(ranking_repaired=False, n_facts=6, justification="x" * 50, confidence="Low")
    assert (good, bad, half) == (1.0, 0.0, 0.5)


@pytest.mark.parametrize("raw,expected,changed", [
    (["B", "A", "D", "C"], ["B", "A", "D", "C"], False),
    (["b)", "(a)", "Z", "B"], ["B", "A", "C", "D"], True),
    ([], ["A", "B", "C", "D"], True),
    (None, ["A", "B", "C", "D"], True),
    (["C"], ["C", "A", "B", "D"], True),
])
def test_repair_ranking(raw, expected, changed):
    assert repair_ranking(raw, ["A", "B", "C", "D"]) == (expected, changed)


def test_first_choice_agreement():
    assert first_choice_agreement(["A", "B", "A"]) == ("A", pytest.approx(2 / 3))
    assert first_choice_agreement(["B", "A"]) == ("A", 0.5)
    assert first_choice_agreement([]) == (None, 0.0)


def test_intersect_facts_needs_two_agents():
    facts = [
        ["ST elevation in leads II, III and aVF", "Troponin is raised"],
        ["Troponin is markedly raised", "Pain radiates to the jaw"],
        ["ST elevation in the inferior leads II III aVF"],
    ]
    kept = intersect_facts(facts)
    assert "Troponin is raised" in kept
    assert any("ST elevation" in f for f in kept)
    assert not any("jaw" in f for f in kept)
    assert len(kept) == 2


def test_smm_context_text():
    smm = SharedMentalModel()
    assert smm.context() == ""
    smm.question_analysis = "Watch the EXCEPT."
    smm.verified_facts = ["fact one"]
    smm.debated_points.append({"turn": 1, "agent": "agent_2", "concern": "why?", "outcome": "weak"})
    text = smm.context()
    assert "EXCEPT" in text and "- fact one" in text and "agent_2: why? -> weak" in text
