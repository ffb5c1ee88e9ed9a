"""Peer systems: routing, stopping rules, recruitment, vote rules, demos, and one contract for all.

Every LM call is answered by a `ScriptedLM` responder keyed on the behaviour's name
(``call.signature``) and the call's inputs, so results do not depend on thread order.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import dspy
import pytest

from teammed import usage
from teammed.adapter import SchemaAdapter
from teammed.backends import ScriptedCall, ScriptedLM
from teammed.errors import ConfigError, NoAnswerError
from teammed.programs.peers import (
    SYSTEMS,
    AdaptiveComplexity,
    ConsensusVote,
    ConsultationTeam,
    FewShot,
    KnowledgeDrivenTeam,
    MajorityVote,
    SingleAgentCoT,
    build_system,
)
from teammed.programs.peers._history import estimate_tokens, over_budget
from teammed.programs.peers._shared import distinct_roles, read_letter, select_examples
from teammed.programs.peers._votes import anchored_scores, confidence_from_share, plurality
from teammed.results import PeerRecord, TranscriptEvent


def _json(record):
    """A typed record as the JSON a row stores of it (nested entries as dicts)."""
    return record.model_dump(mode="json", exclude_unset=True)


QUESTION = (
    "A 58-year-old man has crushing chest pain radiating to his left arm. What is the most likely diagnosis?"
)
OPTIONS = {"A": "Myocardial infarction", "B": "Reflux", "C": "Pulmonary embolism", "D": "Costochondritis"}
YES_NO = {"A": "Yes", "B": "No"}
ROLES = ["Cardiology", "Nephrology", "Pulmonology", "Critical Care", "Infectious Disease"]
Responder = Callable[[ScriptedCall], Any]


@pytest.fixture(autouse=True)
def _fresh_dspy_settings():
    with dspy.context(lm=None, adapter=None):
        yield


def run(
    system: dspy.Module,
    responder: Responder | None = None,
    *,
    options: dict[str, str] = OPTIONS,
    context: str | None = None,
) -> tuple[dspy.Prediction, ScriptedLM, usage.Usage]:
    lm = ScriptedLM(responder)
    with dspy.context(lm=lm, adapter=SchemaAdapter()), usage.track() as used:
        prediction = system(question=QUESTION, options=options, context=context)
    return prediction, lm, used


def called(lm: ScriptedLM) -> Counter[str]:
    return Counter(call.signature for call in lm.calls)


def role_of(call: ScriptedCall) -> str:
    return str(call.inputs.get("role", "")).split(";")[0].strip()


def round_of(call: ScriptedCall) -> int:
    """The round a consultation call belongs to: 1 for the analysis, else previous round + 1."""
    if call.signature == "SpecialistAnalysis":
        return 1
    previous = str(call.inputs["own_previous"])
    return int(previous.removeprefix("[round ").split("]")[0]) + 1


# ---------------------------------------------------------------------- contract, every system


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_contract(name: str) -> None:
    system = build_system(name)
    prediction, lm, used = run(system, context="Vital signs: BP 90/60, HR 110.")
    assert isinstance(prediction, dspy.Prediction)
    assert prediction.answer in OPTIONS
    assert isinstance(prediction.rationale, str)
    assert prediction.confidence in ("High", "Medium", "Low")
    assert isinstance(prediction.record, PeerRecord)  # typed, from Python too
    assert all(isinstance(e, TranscriptEvent) for e in prediction.transcript)
    json.loads(prediction.record.model_dump_json())  # records are JSON-ready
    assert isinstance(prediction.transcript, list)
    assert used.calls > 0
    assert used.calls == len(lm.calls)
    assert sum(used.calls_by_signature.values()) == used.calls
    assert set(called(lm)) <= set(system.behaviours())
    assert all(
        "BP 90/60" in str(call.inputs.get("question", "")) for call in lm.calls if "question" in call.inputs
    )


GARBAGE: dict[str, Responder] = {
    "not_json": lambda call: "I would say (E), no wait, maybe the second one!!",
    "invalid_values": lambda call: {name: "ZZZ" for name in call.schema["properties"]},
}


@pytest.mark.parametrize("garbage", sorted(GARBAGE))
@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_garbage_output_gives_no_answer(name: str, garbage: str) -> None:
    """Every system, team peers included: when no agent's letter parsed, never a silent default option."""
    with pytest.raises(NoAnswerError, match="names no option|named an option"):
        run(build_system(name), GARBAGE[garbage])


@pytest.mark.parametrize("name", ["kamac", "consultation", "mdagents"])
def test_a_team_peer_with_some_garbage_still_answers(name: str) -> None:
    """Only when *every* letter fell back is there no answer: one garbled call is not a failed question."""
    state = {"n": 0}

    def first_call_garbled(call):  # type: ignore[no-untyped-def]
        state["n"] += 1
        return GARBAGE["invalid_values"](call) if state["n"] == 1 else None

    prediction, _, _ = run(build_system(name), first_call_garbled)
    assert prediction.answer in OPTIONS


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_binary_yes_no_questions(name: str) -> None:
    prediction, _, _ = run(build_system(name), lambda call: None, options=YES_NO)
    assert prediction.answer in YES_NO


# ---------------------------------------------------------------------- registry


def test_registry_names() -> None:
    assert set(SYSTEMS) == {
        "zero_shot",
        "few_shot",
        "cot",
        "mdagents",
        "kamac",
        "consultation",
        "majority_vote",
        "consensus",
        "adaptive",
    }


def test_unknown_system_suggests_a_name() -> None:
    with pytest.raises(ConfigError, match=r"Did you mean 'kamac'\?.*Available: teamwork, zero_shot, few_shot"):
        build_system("kamak")


def test_unknown_parameter_and_bad_value_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"takes no parameter 'n_expert'\. Did you mean 'n_experts'\?"):
        build_system("majority_vote", n_expert=3)
    with pytest.raises(ConfigError, match="consensus_threshold"):
        build_system("consultation", consensus_threshold=1.5)
    with pytest.raises(ConfigError, match="dissent"):
        ConsultationTeam(dissent="shout")  # type: ignore[arg-type]


# ---------------------------------------------------------------------- pure helpers


def test_read_letter_repairs_or_drops() -> None:
    assert read_letter("b", OPTIONS, behaviour="X") == "B"
    assert read_letter("(C)", OPTIONS, behaviour="X") == "C"
    assert read_letter("D) costochondritis", OPTIONS, behaviour="X") == "D"
    assert read_letter("pulmonary embolism", OPTIONS, behaviour="X") == "C"
    with usage.track() as used:  # never the first option, never a fallback letter: dropped and counted
        assert [read_letter(raw, OPTIONS, behaviour="X") for raw in ("E", None, "Absolutely")] == [None] * 3
    assert (used.fallbacks, used.fallbacks_by_behaviour) == (3, {"X": 3})


def test_distinct_roles_is_case_and_space_insensitive() -> None:
    proposed = [
        "cardiologist",
        " Nephrologist ",
        "NEPHROLOGIST",
        "",
        "Renal  Pathologist",
        "renal pathologist",
    ]
    assert distinct_roles(proposed, ["Cardiologist"]) == ["Nephrologist", "Renal Pathologist"]
    assert distinct_roles(proposed, [], limit=1) == ["cardiologist"]


def test_plurality_tie_goes_to_the_earliest_letter() -> None:
    letters = list(OPTIONS)
    assert plurality(["C", "B", "C", "B"], letters) == ("B", 0.5)
    assert plurality(["D", "A"], letters) == ("A", 0.5)
    assert plurality(["A", "B", "C", "C", "D"], letters) == ("C", 0.4)  # plurality without a majority
    assert plurality([], letters) == (None, 0.0)  # no valid vote: no winner, never the first option


def test_anchored_scores_weigh_independent_votes_half() -> None:
    scores = anchored_scores(["A", "B", "B", "B", "B"], ["A"] * 5, ["A", "B"])
    assert scores == pytest.approx({"A": 0.6, "B": 0.4})
    assert anchored_scores([], ["B"], ["A", "B"]) == {"A": 0.0, "B": 1.0}


def test_confidence_from_share() -> None:
    assert [confidence_from_share(x) for x in (1.0, 0.8, 0.6, 0.5)] == ["High", "High", "Medium", "Low"]


def test_token_budget_is_passed_strictly_above_the_threshold() -> None:
    assert estimate_tokens("x" * 200) == 50
    assert estimate_tokens("x" * 201) == 51
    assert not over_budget(50, context_window=100, summarize_at=0.5)
    assert over_budget(51, context_window=100, summarize_at=0.5)


# ---------------------------------------------------------------------- single-agent baselines


def _trainset(n: int = 12) -> list[dict[str, Any]]:
    return [
        {"question": f"Training question {i}?", "options": {"A": "yes", "B": "no"}, "answer": "AB"[i % 2]}
        for i in range(n)
    ]


def test_few_shot_demos_are_deterministic_for_a_seed() -> None:
    def demos(seed: int) -> list[str]:
        return [d.question for d in FewShot(trainset=_trainset(), k=3, seed=seed).answer.predict.demos]

    assert demos(7) == demos(7)
    assert len(demos(7)) == 3
    assert demos(7) != demos(8)
    assert select_examples(_trainset(2), 5, 0) == select_examples(_trainset(2), 5, 0)
    assert len(select_examples(_trainset(2), 5, 0)) == 2


def test_few_shot_demos_reach_the_prompt() -> None:
    system = FewShot(trainset=_trainset(), k=2, seed=3)
    demo = system.answer.predict.demos[0]
    assert isinstance(demo, dspy.Example) and set(demo.inputs().keys()) == {"question", "options"}
    _, lm, used = run(system)
    assert used.calls == 1
    assert demo.question in json.dumps(lm.calls[0].messages)


def test_few_shot_rejects_an_example_without_an_answer() -> None:
    with pytest.raises(ConfigError, match="few-shot example 0"):
        FewShot(trainset=[{"question": "Q?", "options": {"A": "x", "B": "y"}, "answer": "C"}], k=1)


def test_chain_of_thought_reasons_before_answering() -> None:
    prediction, lm, _ = run(SingleAgentCoT(), lambda call: {"reasoning": "ST elevation.", "answer": "A"})
    assert list(lm.calls[0].schema["properties"])[:2] == ["reasoning", "answer"]
    assert (prediction.answer, prediction.rationale, _json(prediction.record)) == (
        "A",
        "ST elevation.",
        {"system": "cot", "route": None, "fallbacks": 0, "fallbacks_by_behaviour": {}},
    )


# ---------------------------------------------------------------------- MDAgents-style routing


def mdagents_responder(route: str, *, consensus: str = "yes") -> Responder:
    def respond(call: ScriptedCall) -> Any:
        if call.signature == "ComplexityCheck":
            return {"complexity": route, "reason": "because"}
        if call.signature == "TeamRecruitment":
            return {"members": [{"role": r, "expertise": "x"} for r in ROLES]}
        if call.signature == "CareTeamsRecruitment":
            return {
                "teams": [
                    {
                        "name": f"Team {t}",
                        "members": [{"role": f"{r} {t}", "expertise": "x"} for r in ROLES[:3]],
                    }
                    for t in "XYZ"
                ]
            }
        if call.signature == "ModeratorReview":
            return {"summary": "They lean to C.", "consensus": consensus}
        if call.signature in ("ModeratorDecision", "IntegratedDecision", "PrimaryCareAnswer"):
            return {"answer": "C", "rationale": "Decided.", "reasoning": "Decided.", "confidence": "Medium"}
        return {"answer": "C", "reasoning": "Opinion.", "message": "Reply.", "report": "Report."}

    return respond


def test_mdagents_basic_route_is_one_primary_care_agent_with_demos() -> None:
    system = AdaptiveComplexity(examples=_trainset(), k=2, seed=1)
    prediction, lm, used = run(system, mdagents_responder("basic"))
    assert _json(prediction.record)["route"] == "basic"
    assert _json(prediction.record)["experts"] == ["Primary Care Physician"]
    assert called(lm) == {"ComplexityCheck": 1, "PrimaryCareAnswer": 1}
    assert used.calls == 2
    primary = next(c for c in lm.calls if c.signature == "PrimaryCareAnswer")
    assert all(d.question in json.dumps(primary.messages) for d in system.primary_care.predict.demos)
    assert prediction.answer == "C"


def test_mdagents_intermediate_route_stops_at_the_moderators_consensus() -> None:
    prediction, lm, used = run(AdaptiveComplexity(variant="light"), mdagents_responder("intermediate", consensus="yes"))
    assert _json(prediction.record)["route"] == "intermediate"
    assert _json(prediction.record)["experts"] == ROLES
    assert (_json(prediction.record)["rounds"], _json(prediction.record)["consensus"]) == (1, True)
    assert "PanelReply" not in called(lm)
    assert used.calls == 3 + 1 * (5 + 1)


def test_mdagents_intermediate_route_discusses_up_to_max_rounds() -> None:
    prediction, lm, used = run(
        AdaptiveComplexity(variant="light", max_rounds=2), mdagents_responder("intermediate", consensus="no")
    )
    assert (_json(prediction.record)["rounds"], _json(prediction.record)["consensus"]) == (2, False)
    assert called(lm)["PanelReply"] == 2 * 5
    assert used.calls == 3 + 5 + 2 * (5 + 1)


def test_mdagents_advanced_route_runs_teams_in_order_then_decides() -> None:
    prediction, lm, used = run(AdaptiveComplexity(), mdagents_responder("advanced"))
    record = _json(prediction.record)
    assert record["route"] == "advanced"
    assert [t["name"] for t in record["teams"]] == ["Team X", "Team Y", "Team Z"]
    assert len(record["experts"]) == len({r.casefold() for r in record["experts"]}) == 9
    reports = [c for c in lm.calls if c.signature == "TeamReport"]
    assert [bool(c.inputs["earlier_reports"]) for c in reports] == [False, True, True]
    assert used.calls == 3 + 3 * (3 + 1)
    assert prediction.answer == "C"


# ---------------------------------------------------------------------- KAMAC-style growth


def kamac_responder(*, consensus: str, gap: str = "no", proposals: list[str] | None = None) -> Responder:
    def respond(call: ScriptedCall) -> Any:
        if call.signature == "ExpertRecruitment":
            return {"experts": [{"role": "Cardiologist", "expertise": "ECG"}]}
        if call.signature == "ConsensusCheck":
            return {"consensus": consensus, "answer": "B", "reason": "r"}
        if call.signature == "KnowledgeGap":
            specialties = [{"role": r, "expertise": "x"} for r in proposals or []]
            return {"gap": gap, "specialties": specialties, "reason": "r"}
        return {
            "answer": "B",
            "assessment": "a",
            "comment": "c",
            "rationale": "Decided.",
            "confidence": "High",
        }

    return respond


def kamac_calls(initial: int, team_sizes: list[int], recruits: list[int], consensus_at: int | None) -> int:
    """``2 + E + Σ_r (N_r + 1) + Σ_(r without consensus) (1 + N_r + 2·g_r)``."""
    total = 2 + initial
    for r, (n, g) in enumerate(zip(team_sizes, recruits, strict=True), start=1):
        total += n + 1
        if r != consensus_at:
            total += 1 + n + 2 * g
    return total


def test_kamac_stops_at_consensus() -> None:
    prediction, lm, used = run(KnowledgeDrivenTeam(), kamac_responder(consensus="yes"))
    record = _json(prediction.record)
    assert (record["rounds"], record["consensus"], record["recruited_per_round"]) == (1, True, [[]])
    assert "KnowledgeGap" not in called(lm) and "AnswerUpdate" not in called(lm)
    assert used.calls == kamac_calls(1, [1], [0], consensus_at=1) == 5
    assert prediction.answer == "B"


def test_kamac_stops_after_max_rounds_without_consensus() -> None:
    prediction, lm, used = run(KnowledgeDrivenTeam(max_rounds=3), kamac_responder(consensus="no"))
    record = _json(prediction.record)
    assert (record["rounds"], record["consensus"]) == (3, False)
    assert record["recruited_per_round"] == [[], [], []]
    assert called(lm)["ConsensusCheck"] == 3 and called(lm)["ModeratorVerdict"] == 1
    assert used.calls == kamac_calls(1, [1, 1, 1], [0, 0, 0], consensus_at=None) == 15


def test_kamac_never_recruits_a_role_already_on_the_team() -> None:
    proposals = ["cardiologist", "Nephrologist", " nephrologist ", "CARDIOLOGIST"]
    responder = kamac_responder(consensus="no", gap="yes", proposals=proposals)
    prediction, lm, used = run(KnowledgeDrivenTeam(max_rounds=3), responder)
    record = _json(prediction.record)
    assert record["experts"] == ["Cardiologist", "Nephrologist"]
    assert record["recruited_per_round"] == [["Nephrologist"], [], []]
    assert [a["joined_round"] for a in record["agents"]] == [0, 1]
    gap_calls = [c for c in lm.calls if c.signature == "KnowledgeGap"]
    assert [c.inputs["team"] for c in gap_calls] == [["Cardiologist"]] + [
        ["Cardiologist", "Nephrologist"]
    ] * 2
    recruit_assessment = [
        c for c in lm.calls if c.signature == "ExpertAssessment" and "Nephrologist" in role_of(c)
    ]
    assert len(recruit_assessment) == 1 and recruit_assessment[0].inputs["discussion"]
    assert called(lm)["AnswerUpdate"] == 2 + 2 + 2
    assert used.calls == kamac_calls(1, [1, 2, 2], [1, 0, 0], consensus_at=None)


def test_kamac_caps_recruits_per_round() -> None:
    responder = kamac_responder(
        consensus="no", gap="yes", proposals=["Nephrologist", "Radiologist", "Oncologist"]
    )
    prediction, _, _ = run(KnowledgeDrivenTeam(max_rounds=1, max_recruits=2), responder)
    assert _json(prediction.record)["recruited_per_round"] == [["Nephrologist", "Radiologist"]]


# ---------------------------------------------------------------------- consultation


def consultation_responder(
    votes: Callable[[str, int], str], *, manager: str = "D", reasoning: str = "Because of the findings."
) -> Responder:
    """``votes(role, round)`` is each specialist's choice in each round."""

    def respond(call: ScriptedCall) -> Any:
        if call.signature == "ConsultSpecialties":
            return {"specialties": ROLES}
        if call.signature in ("SpecialistAnalysis", "SpecialistDebate", "DevilsAdvocate"):
            return {
                "reasoning": reasoning,
                "counter_case": "But consider B.",
                "choice": votes(role_of(call), round_of(call)),
            }
        if call.signature == "ManagerAggregate":
            return {"answer": manager, "rationale": "Manager decided.", "confidence": "Low"}
        if call.signature == "TeamHandoff":
            return {"summary": "They split between A and B."}
        if call.signature == "CompressMessage":
            return {"summary": "short"}
        return None

    return respond


def test_consultation_stops_when_80_percent_agree_in_round_one() -> None:
    responder = consultation_responder(lambda role, r: "B" if role == "Nephrology" else "A")
    prediction, lm, used = run(ConsultationTeam(), responder)
    record = _json(prediction.record)
    assert prediction.answer == "A"
    assert (record["rounds"], record["reassignments"], record["consensus"], record["method"]) == (
        1,
        0,
        True,
        "consensus",
    )
    assert record["consensus_share"] == pytest.approx(0.8)
    assert used.calls == 2 + 5
    assert record["votes_by_turn"] == {
        f"agent_{i + 1}": ["B" if r == "Nephrology" else "A"] for i, r in enumerate(ROLES)
    }
    assert [a["role"] for a in record["agents"]] == ROLES


def test_consultation_debates_until_the_threshold() -> None:
    def votes(role: str, r: int) -> str:
        dissenters = {"Nephrology", "Pulmonology"} if r == 1 else {"Pulmonology"}
        return "B" if role in dissenters else "A"

    prediction, lm, used = run(ConsultationTeam(), consultation_responder(votes))
    assert (_json(prediction.record)["rounds"], _json(prediction.record)["consensus"]) == (2, True)
    assert _json(prediction.record)["votes_by_turn"]["agent_2"] == ["B", "A"]
    debate = [c for c in lm.calls if c.signature == "SpecialistDebate"]
    assert all("Cardiology" in c.inputs["peers"] or role_of(c) == "Cardiology" for c in debate)
    assert used.calls == 2 + 5 + 5


def _split(role: str, r: int) -> str:
    return {"Cardiology": "A", "Nephrology": "A", "Pulmonology": "B", "Critical Care": "B"}.get(role, "C")


def test_consultation_reassigns_at_most_twice_then_the_manager_decides() -> None:
    prediction, lm, used = run(ConsultationTeam(), consultation_responder(_split, manager="D"))
    record = _json(prediction.record)
    assert (record["reassignments"], record["consensus"], record["method"]) == (2, False, "manager")
    assert prediction.answer == "D" and prediction.rationale == "Manager decided."
    assert record["rounds_by_team"] == [3, 3, 3]
    assert called(lm)["ConsultSpecialties"] == 3 and called(lm)["TeamHandoff"] == 2
    assert called(lm)["ManagerAggregate"] == 1
    assert len(record["votes_by_turn"]) == 15 and all(len(v) == 3 for v in record["votes_by_turn"].values())
    handed = [c.inputs["previous_team"] for c in lm.calls if c.signature == "SpecialistAnalysis"]
    assert handed.count("") == 5 and handed.count("They split between A and B.") == 10
    assert used.calls == 3 * (2 + 5 * 3) + 2 + 1


def test_consultation_without_reassignment_falls_back_at_once() -> None:
    prediction, lm, _ = run(
        ConsultationTeam(max_reassignments=0, max_rounds=1), consultation_responder(_split)
    )
    assert (_json(prediction.record)["reassignments"], _json(prediction.record)["method"]) == (0, "manager")
    assert called(lm) == {
        "ConsultSpecialties": 1,
        "ConsultExpertise": 1,
        "SpecialistAnalysis": 5,
        "ManagerAggregate": 1,
    }


def _pair(role: str, r: int) -> str:
    return "A" if role == "Cardiology" else "B"


def _two_agent_history_tokens() -> int:
    system = ConsultationTeam(n_specialists=2, max_rounds=2, max_reassignments=0, context_window=10**6)
    prediction, lm, _ = run(system, consultation_responder(_pair, reasoning="x" * 300))
    assert "CompressMessage" not in called(lm)
    return _json(prediction.record)["history_tokens"][0]["tokens"]


def test_history_is_summarised_exactly_when_it_passes_the_threshold() -> None:
    tokens = _two_agent_history_tokens()
    responder = consultation_responder(_pair, reasoning="x" * 300)

    at = ConsultationTeam(
        n_specialists=2, max_rounds=2, max_reassignments=0, context_window=tokens, summarize_at=1.0
    )
    prediction, lm, _ = run(at, responder)
    assert _json(prediction.record)["history_tokens"][0]["tokens"] == tokens
    assert "CompressMessage" not in called(lm) and _json(prediction.record)["summaries"] == []

    above = ConsultationTeam(
        n_specialists=2, max_rounds=2, max_reassignments=0, context_window=tokens - 1, summarize_at=1.0
    )
    prediction, lm, used = run(above, responder)
    assert called(lm)["CompressMessage"] == 1
    (summary,) = _json(prediction.record)["summaries"]
    assert summary["tokens_before"] == tokens and summary["tokens_after"] < tokens - 1
    debate = [c for c in lm.calls if c.signature == "SpecialistDebate"]
    assert any("short" in str(c.inputs["peers"]) for c in debate)
    assert used.calls == 2 + 2 + 1 + 2 + 1


def test_summarisation_is_bounded_when_the_summary_does_not_shrink() -> None:
    responder = consultation_responder(_pair, reasoning="x" * 300)

    def stubborn(call: ScriptedCall) -> Any:
        return {"summary": "y" * 600} if call.signature == "CompressMessage" else responder(call)

    system = ConsultationTeam(n_specialists=2, max_rounds=2, max_reassignments=0, context_window=10)
    prediction, lm, _ = run(system, stubborn)
    assert called(lm)["CompressMessage"] == 2  # one try per message, then it gives up
    assert prediction.answer in OPTIONS


def test_devils_advocate_argues_against_the_majority_each_debate_round() -> None:
    system = ConsultationTeam(max_reassignments=0, dissent="devil_advocate")
    prediction, lm, used = run(system, consultation_responder(_split))
    assert called(lm)["DevilsAdvocate"] == 2 and called(lm)["SpecialistDebate"] == 2 * 4
    advocates = _json(prediction.record)["devil_advocates"]
    assert [(d["round"], d["against"]) for d in advocates] == [(2, "A"), (3, "A")]
    assert [d["agent"] for d in advocates] == ["agent_1", "agent_2"]  # rotates over the majority holders
    assert used.calls == 2 + 5 * 3 + 1


def test_anchor_first_votes_resists_herding_and_weighs_the_fallback() -> None:
    def herd(role: str, r: int) -> str:
        return ("A" if role in ("Cardiology", "Nephrology") else "B") if r == 1 else "A"

    plain, _, _ = run(ConsultationTeam(max_reassignments=0), consultation_responder(herd, manager="B"))
    assert (plain.answer, _json(plain.record)["rounds"], _json(plain.record)["method"]) == ("A", 2, "consensus")

    system = ConsultationTeam(max_reassignments=0, dissent="anchor_first_votes")
    anchored, _, _ = run(system, consultation_responder(herd, manager="B"))
    assert (_json(anchored.record)["rounds"], _json(anchored.record)["consensus"]) == (3, False)
    assert _json(anchored.record)["method"] == "anchored_vote"
    assert _json(anchored.record)["manager"]["answer"] == "B"
    assert anchored.answer == "A"  # ½·(2/5) + ½·(5/5) = 0.7 for A (below 0.8) against 0.3 for B


# ---------------------------------------------------------------------- voting baselines


def ballots(by_expert: dict[int, str], revised: dict[int, str] | None = None) -> Responder:
    def respond(call: ScriptedCall) -> Any:
        expert = int(str(call.inputs["expert"]).rsplit(" ", 1)[-1])
        table = revised if call.signature == "RevisedVote" and revised is not None else by_expert
        return {"answer": table[expert], "reasoning": f"expert {expert}", "confidence": "Medium"}

    return respond


def test_majority_vote_tie_goes_to_the_earliest_letter() -> None:
    prediction, lm, used = run(MajorityVote(n_experts=4), ballots({1: "C", 2: "B", 3: "C", 4: "B"}))
    assert prediction.answer == "B"
    assert (_json(prediction.record)["share"], _json(prediction.record)["method"]) == (0.5, "majority")
    assert used.calls == 4


def test_majority_vote_takes_the_plurality() -> None:
    prediction, _, _ = run(MajorityVote(), ballots({1: "D", 2: "C", 3: "D", 4: "A", 5: "B"}))
    assert (prediction.answer, prediction.confidence) == ("D", "Low")


def test_consensus_vote_stops_when_all_agree() -> None:
    responder = ballots({1: "A", 2: "B", 3: "A", 4: "C", 5: "A"}, revised=dict.fromkeys(range(1, 6), "C"))
    prediction, lm, used = run(ConsensusVote(), responder)
    assert (prediction.answer, _json(prediction.record)["rounds"], _json(prediction.record)["method"]) == (
        "C",
        1,
        "consensus",
    )
    assert _json(prediction.record)["votes_by_turn"]["agent_1"] == ["A", "C"]
    assert used.calls == 5 * 2


def test_consensus_vote_falls_back_to_majority() -> None:
    split = {1: "A", 2: "B", 3: "A", 4: "B", 5: "C"}
    prediction, lm, used = run(ConsensusVote(max_rounds=2), ballots(split, revised=split))
    assert (prediction.answer, _json(prediction.record)["rounds"], _json(prediction.record)["method"]) == (
        "A",
        2,
        "majority",
    )
    assert called(lm) == {"IndependentVote": 5, "RevisedVote": 10}
    assert used.calls == 5 * (1 + 2)
