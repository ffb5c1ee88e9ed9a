"""Metrics and statistics of teammed.evals, each checked against a hand-computed example.

The metrics read typed rows (`ResultRow`); `rows` types the stored form the examples are written
in. Teamwork-behaviour metrics read a real `Deliberation` (`a_deliberation`); agreement, roles and
decisiveness also read the record keys peer systems share (written here as plain dicts).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import pytest

from teammed.deliberation import TieBreak
from teammed.evals import mcnemar, mean_se, paired_bootstrap, summarize
from teammed.evals.metrics import (
    accuracy,
    accuracy_by_confidence,
    binary_confusion,
    binary_metrics,
    binary_scores,
    brier,
    decisiveness,
    ece,
    efficiency,
    final_convergence,
    leadership_interventions,
    mutual_monitoring_impact,
    peer_structure,
    r2_disagreement_rate,
    roles_recruited,
    rounded,
    smm_facts_per_question,
    trust_by_stage,
    trust_divergence,
)
from teammed.evals.stats import discordant, match_pairs, paired_comparison
from teammed.records import ResultRow
from tests.typed_fixtures import a_challenge, a_deliberation, a_row


def rows(*stored: Mapping[str, Any]) -> list[ResultRow]:
    """Rows written in their stored form (no ``schema_version``: read as a legacy row is), typed."""
    return [a_row(**row) for row in stored]


def _tw(**record: object) -> dict[str, object]:
    """A row whose record holds ``record`` (the keys a peer system's record shares), of a peer system
    whose model declares them all (consultation)."""
    return {"system": "consultation", "record": dict(record)}


def _dl(**kwargs: Any) -> dict[str, object]:
    """A row whose record is a real `Deliberation` built by `a_deliberation`."""
    return {"record": a_deliberation(**kwargs)}


# --- accuracy and agreement -------------------------------------------------------------------


def test_accuracy_counts_failed_questions_as_wrong() -> None:
    table = rows(
        {"correct": True},
        {"correct": True},
        {"correct": False},
        {"correct": True, "failed": True},  # a failed question never counts as correct
    )
    assert accuracy(table) == 0.5
    assert accuracy([]) is None


def test_r2_disagreement_rate() -> None:
    table = rows(
        _tw(r2=[{"agent": "a1", "first": "A"}, {"agent": "a2", "first": "A"}, {"agent": "a3", "first": "A"}]),
        _tw(r2=[{"agent": "a1", "first": "A"}, {"agent": "a2", "first": "B"}, {"agent": "a3", "first": "A"}]),
        _tw(r2=[{"agent": "a1", "first": "A"}]),  # one agent cannot disagree: left out
        _tw(r2=[{"agent": "a1", "ranking": ["C", "A"]}, {"agent": "a2", "ranking": ["D", "C"]}]),
        {"record": None},
    )
    assert r2_disagreement_rate(table) == pytest.approx(2 / 3)
    assert r2_disagreement_rate(rows({"prediction": "A"})) is None
    teamwork = rows(_dl(r2=["A", "A"]), _dl(r2=["A", "B", "B"]), _dl(r2=["C"]))
    assert r2_disagreement_rate(teamwork) == pytest.approx(1 / 2)


def test_final_convergence() -> None:
    table = rows(
        {"prediction": "A", **_tw(final=[{"first": "A"}, {"first": "A"}, {"first": "B"}])},
        {"prediction": "B", **_tw(final=[{"ranking": ["B", "A"]}, {"first": "B"}])},
        {"prediction": "C"},
    )
    out = final_convergence(table)
    assert out is not None
    assert out["agreement_with_team"] == pytest.approx((2 / 3 + 1) / 2)
    assert out["unanimous_rate"] == 0.5
    assert out["n"] == 2
    teamwork = final_convergence(rows({"prediction": "A", **_dl(r2=["B", "B", "A"], final=["A", "A", "B"])}))
    assert teamwork == {"agreement_with_team": pytest.approx(2 / 3), "unanimous_rate": 0.0, "n": 1}


# --- calibration ------------------------------------------------------------------------------

CALIBRATION_ROWS = rows(
    {"confidence": "High", "correct": True},
    {"confidence": "High", "correct": True},
    {"confidence": "High", "correct": False},
    {"confidence": "Medium", "correct": True},
    {"confidence": "Low", "correct": False},
    {"confidence": "Low", "correct": True, "failed": True},
    {"confidence": None, "correct": True},  # no confidence: left out
)


def test_accuracy_by_confidence() -> None:
    out = accuracy_by_confidence(CALIBRATION_ROWS)
    assert list(out) == ["High", "Medium", "Low"]
    assert out["High"] == {"n": 3, "accuracy": pytest.approx(2 / 3)}
    assert out["Medium"] == {"n": 1, "accuracy": 1.0}
    assert out["Low"] == {"n": 2, "accuracy": 0.0}


def test_ece_by_hand() -> None:
    # 3/6·|2/3 − 0.9| + 1/6·|1 − 0.6| + 2/6·|0 − 0.3| = 0.11667 + 0.06667 + 0.1
    assert ece(CALIBRATION_ROWS) == pytest.approx(0.283333, abs=1e-6)
    # with High=1, Medium=0.5, Low=0: 3/6·1/3 + 1/6·0.5 + 0 = 0.25
    strict = {"High": 1.0, "Medium": 0.5, "Low": 0.0}
    assert ece(CALIBRATION_ROWS, confidence_map=strict) == pytest.approx(0.25)
    assert ece(rows({"correct": True})) is None


def test_brier_by_hand() -> None:
    # 2·(0.9−1)² + (0.9−0)² + (0.6−1)² + 2·(0.3−0)² = 0.02 + 0.81 + 0.16 + 0.18 = 1.17, over 6
    assert brier(CALIBRATION_ROWS) == pytest.approx(0.195)
    assert brier([]) is None


# --- teamwork components ----------------------------------------------------------------------


def test_smm_facts_per_question() -> None:
    table = rows(
        _dl(facts=["f1", "f2", "f3"]),
        _dl(facts=["f1"]),
        _dl(),  # an SMM with no facts counts as 0
        _tw(agents=[{"id": "a1", "role": "X"}]),  # no deliberation (a peer system's record): left out
        {"record": None},
    )
    assert smm_facts_per_question(table) == pytest.approx(4 / 3)


def test_trust_divergence_uses_final_trust_or_last_history_stage() -> None:
    table = rows(
        {"trust": {"a1": 0.8, "a2": 0.6}},  # pstdev 0.1
        {"trust": {"a1": 0.5, "a2": 0.5, "a3": 0.5}},  # 0
        _dl(trust_history=[("initial", {"a1": 0.5, "a2": 0.5}), ("mm_turn_1", {"a1": 0.9, "a2": 0.5})]),  # 0.2
        {"trust": {"a1": 0.7}},  # one score: left out
        {"trust": {"a1": None, "a2": 0.4}},  # one usable score: left out
    )
    assert trust_divergence(table) == pytest.approx(0.1)
    assert trust_divergence(rows({"trust": None})) is None


def test_trust_by_stage() -> None:
    table = rows(
        _dl(trust_history=[("initial", {"a1": 0.8, "a2": 0.8}), ("post_r2", {"a1": 0.9, "a2": 0.7})]),
        _dl(trust_history=[("initial", {"a1": 0.6}), ("mm_turn_1", {"a1": 0.5})]),
        _tw(trust_history=[{"stage": "initial", "scores": {"a1": 0.0}}]),  # not a deliberation: left out
    )
    out = trust_by_stage(table)
    assert list(out) == ["initial", "post_r2", "mm_turn_1"]
    assert out == pytest.approx({"initial": 2.2 / 3, "post_r2": 0.8, "mm_turn_1": 0.5})


def test_mutual_monitoring_impact() -> None:
    table = rows(
        {"gold": "A", **_dl(challenges=[
            a_challenge("agent_1", "A", "B", verdict="strong"),  # away from gold
            a_challenge("agent_1", "B", "A", verdict="weak"),  # toward gold
            a_challenge("agent_2", "B", "C", verdict="weak"),  # changed, neither
            a_challenge("agent_2", "A", "A", verdict="disputed"),  # unchanged
            a_challenge("agent_1", "C", "C", verdict=""),  # unchanged, no verdict
        ])},
        {"gold": None, **_dl(challenges=[a_challenge("agent_1", "C", "D")])},  # no gold
        {"gold": "B", **_dl()},  # deliberated, nothing raised
        {"gold": "B", **_tw(challenges=[{"choice_before": "A", "choice_after": "B"}])},  # not a deliberation
    )
    out = mutual_monitoring_impact(table)
    assert out is not None
    assert out["n"] == 3 and out["challenges"] == 6
    assert out["challenges_per_question"] == pytest.approx(2.0)
    assert out["changed"] == 4
    assert out["change_rate"] == pytest.approx(4 / 6)
    assert (out["toward_gold"], out["away_from_gold"]) == (1, 1)
    assert out["toward_gold_rate"] == pytest.approx(1 / 3)
    assert out["away_from_gold_rate"] == pytest.approx(1 / 3)
    assert out["verdicts"] == {"strong": 1, "weak": 3, "disputed": 1}
    assert mutual_monitoring_impact(rows({"record": None})) is None


def test_leadership_interventions() -> None:
    table = rows(
        _dl(tie=TieBreak(tied=["A", "B"], resolved_by="leader", answer="A", reason="")),
        _dl(tie=TieBreak(tied=["A", "C"], resolved_by="rule", answer="A", reason="")),
        _dl(),  # no tie
        _tw(tie={"resolved_by": "leader"}),  # not a deliberation: left out
        {"record": None},
    )
    out = leadership_interventions(table)
    assert out == pytest.approx({"n": 3, "tie_rate": 2 / 3, "leader_rate": 1 / 3})


def test_roles_recruited() -> None:
    table = rows(
        {"roles": ["Cardiologist", "Nephrologist"]},
        _tw(agents=[{"id": "a1", "role": "Cardiologist"}]),
        {"roles": None},
        _dl(r2=["A"], roles=["Nephrologist"]),
    )
    assert roles_recruited(table) == {"Cardiologist": 2, "Nephrologist": 2}


DECISIVENESS_ROWS = rows(
    {  # final B
        "prediction": "B",
        **_tw(
            agents=[{"id": "a1", "role": "Cardiologist"}, {"id": "a2", "role": "Nephrologist"},
                    {"id": "a3", "role": "Pulmonologist"}],
            votes_by_turn={"a1": ["A", "B", "B"], "a2": ["B", "B", "B"], "a3": ["A", "C", "B"]},
        ),
    },
    {  # final A: a1 swings to A twice (counts once); a2 changes away from A; a3 never speaks again
        "prediction": "A",
        **_tw(
            agents=[{"id": "a1", "role": "Cardiologist"}, {"id": "a2", "role": "Nephrologist"},
                    {"id": "a3", "role": "Cardiologist"}],
            votes_by_turn={"a1": ["A", "B", "A", "B", "A"], "a2": ["A", "B"], "a3": ["C"]},
        ),
    },
    {  # no votes_by_turn: not measurable, left out
        "prediction": "C",
        **_tw(agents=[{"id": "a1", "role": "Cardiologist"}]),
    },
    {  # no agent list: roles zipped with the voters in order
        "prediction": "D",
        "roles": ["Internist", "Surgeon"],
        **_tw(votes_by_turn={"x": ["A", "D"], "y": ["D", "D"]}),
    },
)


def test_decisiveness_on_a_hand_made_set() -> None:
    out = decisiveness(DECISIVENESS_ROWS)
    assert out["Cardiologist"] == {"pivotal": 2, "appearances": 3, "score": pytest.approx(2 / 3)}
    assert out["Nephrologist"] == {"pivotal": 0, "appearances": 2, "score": 0.0}
    assert out["Pulmonologist"] == {"pivotal": 1, "appearances": 1, "score": 1.0}
    assert out["Internist"] == {"pivotal": 1, "appearances": 1, "score": 1.0}
    assert out["Surgeon"] == {"pivotal": 0, "appearances": 1, "score": 0.0}
    # highest score first; ties by more appearances, then by name
    assert list(out) == ["Internist", "Pulmonologist", "Cardiologist", "Nephrologist", "Surgeon"]


def test_decisiveness_min_appearances_and_missing_votes() -> None:
    assert set(decisiveness(DECISIVENESS_ROWS, min_appearances=2)) == {"Cardiologist", "Nephrologist"}
    skipped_vote = {
        "prediction": "B",
        **_tw(agents=[{"id": "a1", "role": "R"}], votes_by_turn={"a1": ["A", None, "B"]}),
    }
    assert decisiveness(rows(skipped_vote))["R"]["pivotal"] == 1


def test_decisiveness_reads_a_deliberations_votes() -> None:
    swung = {"prediction": "B", **_dl(r2=["A", "B"], final=["B", "B"], roles=["Cardiologist", "Surgeon"])}
    out = decisiveness(rows(swung))
    assert out == {"Cardiologist": {"pivotal": 1, "appearances": 1, "score": 1.0},
                   "Surgeon": {"pivotal": 0, "appearances": 1, "score": 0.0}}


# --- efficiency, binary tasks, peer systems --------------------------------------------------


def test_efficiency_means_and_pooled_rates() -> None:
    table = rows(
        {"calls": 10, "prompt_tokens": 1000, "completion_tokens": 200, "latency_s": 2.0, "cost_usd": 0.01,
         "cache_hits": 1, "parse_failures": 1, "repaired": 2, "spent_cost_usd": 0.002},
        {"calls": 20, "prompt_tokens": 3000, "completion_tokens": 400, "latency_s": 4.0, "cost_usd": 0.03,
         "cache_hits": 3, "parse_failures": 0, "repaired": 1, "spent_cost_usd": None},  # spent: not reported
    )
    out = efficiency(table)
    assert out == pytest.approx({
        "calls": 15, "prompt_tokens": 2000, "completion_tokens": 300, "total_tokens": 2300, "latency_s": 3.0,
        "cost_usd": 0.02, "cache_hits": 2, "spent_cost_usd": 0.002, "parse_failure_rate": 1 / 30,
        "repaired_rate": 0.1,
    })
    assert efficiency([]) == {}


def _binary_row(dataset: str, gold: str, prediction: str, *, failed: bool = False) -> dict[str, object]:
    return {
        "dataset": dataset, "gold": gold, "prediction": prediction, "binary_positive": "A", "failed": failed,
    }


BINARY_ROWS = rows(
    _binary_row("aki", "A", "A"),  # TP
    _binary_row("aki", "A", "B"),  # FN
    _binary_row("aki", "B", "A"),  # FP
    _binary_row("aki", "B", "B"),  # TN
    _binary_row("aki", "B", "C"),  # TN: "maybe" is not positive
    _binary_row("aki", "A", "A", failed=True),  # FN: a failed question predicts nothing
    _binary_row("chf", "A", "A"),  # TP
    _binary_row("chf", "A", "A"),  # TP
    _binary_row("chf", "B", "A"),  # FP
    {"dataset": "medqa", "gold": "A", "prediction": "A", "binary_positive": None},  # not binary
)


def test_binary_confusion() -> None:
    assert binary_confusion(BINARY_ROWS) == {"TP": 3, "FP": 2, "TN": 2, "FN": 2}


def test_binary_metrics_with_macro_average() -> None:
    out = binary_metrics(BINARY_ROWS)
    assert out is not None
    aki, chf = out["by_group"]["aki"], out["by_group"]["chf"]
    assert (aki["TP"], aki["FP"], aki["TN"], aki["FN"]) == (1, 1, 2, 2)
    assert aki["precision"] == 0.5 and aki["recall"] == pytest.approx(1 / 3)
    assert aki["specificity"] == pytest.approx(2 / 3) and aki["f1"] == pytest.approx(0.4)
    assert chf["precision"] == pytest.approx(2 / 3) and chf["recall"] == 1.0
    assert chf["specificity"] == 0.0 and chf["f1"] == pytest.approx(0.8)  # TN 0 of TN + FP 1
    assert out["overall"]["f1"] == pytest.approx(0.6) and out["overall"]["specificity"] == 0.5
    assert out["macro"] == pytest.approx(
        {"precision": 7 / 12, "recall": 2 / 3, "specificity": 1 / 3, "f1": 0.6}
    )
    assert binary_metrics(rows({"gold": "A", "prediction": "A"})) is None


def test_binary_metrics_group_by_a_kept_extra_field() -> None:
    table = rows(*({**row, "problem": "p1" if i % 2 else "p2"} for i, row in enumerate(
        [_binary_row("aki", "A", "A"), _binary_row("aki", "A", "A"), _binary_row("aki", "B", "A")])))
    out = binary_metrics(table, by="problem")
    assert out is not None and sorted(out["by_group"]) == ["p1", "p2"]
    assert out["by_group"]["p2"]["n"] == 2 and out["by_group"]["p1"]["TP"] == 1


def test_binary_scores_leave_undefined_ratios_out_of_the_macro_average() -> None:
    assert binary_scores({"TP": 1, "FP": 0, "TN": 0, "FN": 0}) == {
        "precision": 1.0, "recall": 1.0, "specificity": None, "f1": 1.0,
    }
    table = rows(_binary_row("p1", "A", "A"), _binary_row("p2", "B", "A"), _binary_row("p2", "B", "B"))
    out = binary_metrics(table)
    assert out is not None
    assert out["macro"]["specificity"] == 0.5  # only p2 has negatives
    assert out["macro"]["recall"] == 1.0  # only p1 has positives
    assert out["macro"]["precision"] == 0.5  # p1: 1/1, p2: 0/1


def test_peer_structure() -> None:
    table = rows(
        _tw(route="basic", experts=["x", "y"], rounds=1, reassignments=0),
        _tw(route="advanced", experts=["x", "y", "z", "w"], rounds=3, reassignments=1),
        _tw(route="basic"),
        {"record": None},
        _dl(),  # a deliberation is no peer structure
    )
    out = peer_structure(table)
    assert out["routes"] == pytest.approx({"advanced": 1 / 3, "basic": 2 / 3})
    assert out["experts_per_question"] == 3.0
    assert out["rounds"] == 2.0 and out["reassignments"] == 0.5
    assert peer_structure(rows({})) == {}


# --- summarize --------------------------------------------------------------------------------


def test_summarize_skips_sections_without_data() -> None:
    stored = [
        {"id": "q1", "correct": True, "confidence": "High", "calls": 1, "prompt_tokens": 100,
         "completion_tokens": 10, "record": None},
        {"id": "q2", "correct": False, "failed": True, "error": "timeout", "calls": 1, "record": None},
    ]
    out = summarize(stored)
    assert out["n"] == 2 and out["n_failed"] == 1 and out["accuracy"] == 0.5
    assert "teamwork" not in out and "binary" not in out and "peers" not in out and "agreement" not in out
    assert out["calibration"]["ece"] == pytest.approx(0.1)
    assert out["calibration"]["confidence_map"] == {"High": 0.9, "Medium": 0.6, "Low": 0.3}
    assert out["efficiency"]["calls"] == 1.0
    json.dumps(out)


def test_summarize_teamwork_rows_is_json_and_rounded() -> None:
    table = [*DECISIVENESS_ROWS, *rows({"prediction": "A", "gold": "A", "correct": True,
                                        **_dl(r2=["A", "B"], final=["A", "A"], facts=["f"])})]
    out = summarize(table)
    json.dumps(out)
    assert out["accuracy"] == 0.2
    assert out["agreement"]["r2_disagreement_rate"] == 1.0
    assert out["teamwork"]["decisiveness"]["Cardiologist"]["score"] == 0.6667
    assert out["teamwork"]["smm_facts_per_question"] == 1.0
    assert out["teamwork"]["leadership"] == {"n": 1, "tie_rate": 0.0, "leader_rate": 0.0}


def test_rounded() -> None:
    assert rounded({"a": 1 / 3, "b": [1234.5678, 0.000123456], "c": 2, "d": None}) == {
        "a": 0.3333, "b": [1234.57, 0.0001235], "c": 2, "d": None,
    }


# --- statistics -------------------------------------------------------------------------------


def test_mean_se_by_hand() -> None:
    # sample std of (0.5, 0.6, 0.7) is 0.1, so SE = 0.1 / √3
    mean, se, k = mean_se([0.5, 0.6, 0.7])
    assert mean == pytest.approx(0.6) and se == pytest.approx(0.1 / math.sqrt(3)) and k == 3
    assert mean_se([0.8]) == (0.8, None, 1)
    with pytest.raises(ValueError, match="at least one value"):
        mean_se([])


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (10, 2, 0.0385742),  # 2·(1 + 12 + 66) / 2¹²
        (2, 10, 0.0385742),
        (6, 1, 0.125),  # 2·(1 + 7) / 2⁷
        (0, 6, 0.03125),  # 2 / 2⁶
        (5, 5, 1.0),  # capped at 1
        (1, 0, 1.0),
        (0, 0, 1.0),  # no discordant pairs: no evidence
    ],
)
def test_mcnemar_exact(b: int, c: int, p: float) -> None:
    assert mcnemar(b, c) == pytest.approx(p, abs=1e-6)


def test_mcnemar_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        mcnemar(-1, 2)


def _result(seed: int, qid: str, correct: bool) -> dict[str, object]:
    return {"seed": seed, "id": qid, "correct": correct}


def test_each_question_pairs_once_at_the_first_seed_both_answered() -> None:
    ours = [_result(0, "q1", True), _result(0, "q2", True), _result(1, "q1", False), _result(2, "q9", True)]
    theirs = [_result(0, "q1", False), _result(0, "q2", True), _result(1, "q1", True), _result(1, "q2", True)]
    pairing = match_pairs(ours, theirs)
    assert pairing.pairs == [(True, False), (True, True)]  # keyed by (seed, id) it would add q1's seed-1 pair
    assert pairing.keys == [("0", "q1"), ("0", "q2")] and pairing.repeats == 1 and pairing.unpaired == 1
    assert discordant(pairing.pairs) == (1, 0)


def test_the_first_seed_is_the_first_in_natural_order() -> None:
    ours = [_result(10, "q1", True), _result(9, "q1", False)]
    theirs = [_result(10, "q1", False), _result(9, "q1", False)]
    assert match_pairs(ours, theirs).keys == [("9", "q1")]


def test_paired_bootstrap_is_seeded_and_brackets_the_difference() -> None:
    ours = [_result(s, f"q{i}", i % 4 != 0) for s in range(3) for i in range(20)]  # 75 %
    theirs = [_result(s, f"q{i}", i % 2 == 0) for s in range(3) for i in range(20)]  # 50 %
    first = paired_bootstrap(ours, theirs, seed=7)
    assert first == paired_bootstrap(ours, theirs, seed=7)
    assert first is not None
    assert first["diff"] == pytest.approx(0.25)
    assert first["ci_low"] < 0.25 < first["ci_high"]
    assert first["n_pairs"] == 20 and first["n_resamples"] == 2000  # 20 questions, whatever the 3 seeds


def test_paired_bootstrap_degenerate_cases() -> None:
    always = [_result(0, f"q{i}", True) for i in range(5)]
    never = [_result(0, f"q{i}", False) for i in range(5)]
    out = paired_bootstrap(always, never, n_resamples=50)
    assert out is not None and (out["diff"], out["ci_low"], out["ci_high"]) == (1.0, 1.0, 1.0)
    assert paired_bootstrap(always, [_result(1, "q0", True)]) is None
    with pytest.raises(ValueError, match="confidence"):
        paired_bootstrap(always, never, confidence=95)


def test_paired_comparison_combines_mcnemar_and_bootstrap() -> None:
    ours = [_result(0, f"q{i}", True) for i in range(12)]
    theirs = [_result(0, f"q{i}", i >= 10) for i in range(12)]  # 10 discordant pairs, all ours
    out = paired_comparison(ours, theirs, n_resamples=200)
    assert out is not None
    assert (out["b"], out["c"]) == (10, 0)
    assert out["p_mcnemar"] == pytest.approx(2 / 2**10)
    assert out["diff"] == pytest.approx(10 / 12)


# --- majority baseline and answer spread: one definition for summary.json and the report ---------
@pytest.mark.parametrize("seed", range(5))
def test_the_run_summary_and_the_report_give_the_same_baseline_and_spread(seed):
    import random

    from teammed.evals.metrics import answer_spread, majority_baseline
    from teammed.runner import summarize_rows

    rng = random.Random(seed)
    stored = []
    for i in range(rng.randint(0, 25)):
        gold = rng.choice(["A", "B", "C", None])
        failed = rng.random() < 0.2
        stored.append({"id": str(i), "gold": gold, "prediction": None if failed else rng.choice("AAB"),
                       "failed": failed, "correct": False})
    typed = rows(*stored)
    summary = summarize_rows(typed)
    base, spread = majority_baseline(typed), answer_spread(typed)
    if base is None:
        assert summary["majority_baseline"] == {"letter": None, "accuracy": None}
    else:
        assert summary["majority_baseline"] == {"letter": base["letter"], "accuracy": round(base["accuracy"], 4)}
    if spread is None:
        assert summary["answer_spread"] == {"n_answered": 0, "top": None, "share": None, "constant": False}
    else:
        assert summary["answer_spread"] == {**spread, "share": round(spread["share"], 4)}
        assert spread["constant"] == (spread["n_answered"] >= 10 and spread["share"] >= 0.9)
