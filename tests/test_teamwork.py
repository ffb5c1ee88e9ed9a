"""Each component, on and off, changes the deliberation the way the spec says."""

from __future__ import annotations

import pytest

from teammed.config import TeamworkConfig, preset
from teammed.programs.teamwork import TeamworkProgram
from tests.helpers import OPTIONS, run


def test_base_uses_generic_roles_equal_weights_and_standard_borda():
    out, _, lm = run(TeamworkProgram(TeamworkConfig(n_agents=3)))
    record = out.json_record
    assert [a["role"] for a in record["agents"]] == ["Medical Expert 1", "Medical Expert 2", "Medical Expert 3"]
    assert all(a["weight"] == pytest.approx(1 / 3) for a in record["agents"])
    assert record["aggregation"] == "borda" and record["trust"] is None
    assert {c.signature for c in lm.calls} == {"InitialAssessment", "DiscussionTurn", "FinalRanking"}
    assert out.answer in OPTIONS and out.rationale and out.confidence in ("High", "Medium", "Low")


def test_team_orientation_recruits_specialists_with_hidden_hierarchical_weights():
    def responder(call):
        if call.signature == "SpecialtyRecruitment":
            return {"specialists": [{"role": "Cardiologist", "expertise": "ECG"},
                                    {"role": "cardiologist", "expertise": "duplicate"},
                                    {"role": "Radiologist", "expertise": "CT"}]}
        return None

    out, _, lm = run(TeamworkProgram(preset("team_orientation", n_agents=3)), responder)
    agents = out.json_record["agents"]
    assert [a["role"] for a in agents] == ["Cardiologist", "Radiologist", "Medical Expert 3"]
    assert [a["weight"] for a in agents] == [0.5, 0.3, 0.2]
    assert out.json_record["aggregation"] == "hierarchical_borda"
    assert out.json_record["report"]  # TO + L: the leader's formal report
    for call in lm.calls:
        assert "0.5" not in str(call.inputs.get("role", "")) and "weight" not in str(call.inputs).lower()


def test_smm_is_updated_at_its_three_points():
    config = TeamworkConfig(n_agents=2, shared_mental_model=True, leadership=True, mutual_monitoring=True)

    def responder(call):
        return {"QuestionTricks": {"analysis": "Note the word MOST."},
                "ConsensusFacts": {"facts": ["Troponin rises within hours"]},
                "RaiseConcern": {"concern": "Why not dissection?", "severity": "high"}}.get(call.signature)

    out, _, lm = run(TeamworkProgram(config), responder)
    smm = out.json_record["smm"]
    assert smm["question_analysis"] == "Note the word MOST."
    assert smm["verified_facts"] == ["Troponin rises within hours"]
    assert smm["debated_points"][0]["concern"] == "Why not dissection?"
    finals = [c for c in lm.calls if c.signature == "FinalRanking"]
    assert all("Why not dissection?" in c.inputs["team_context"] + c.inputs["history"] for c in finals)


def test_smm_without_leader_intersects_facts_without_a_call():
    def responder(call):
        if call.signature == "InitialAssessment":
            own = "Pain radiates to the jaw" if call.inputs["role"].endswith("1") else "Diaphoresis was noted"
            return {"facts": ["Troponin is raised in infarction", own]}
        return None

    out, _, lm = run(TeamworkProgram(TeamworkConfig(n_agents=2, shared_mental_model=True)), responder)
    assert out.json_record["smm"]["verified_facts"] == ["Troponin is raised in infarction"]
    assert "ConsensusFacts" not in {c.signature for c in lm.calls}


def test_trust_ema_then_mm_verdict_and_trust_weighted_borda():
    config = preset("mutual_monitoring", n_agents=2)

    def responder(call):
        if call.signature == "AssessmentQuality":
            return {"grades": [1.0, 0.0]}
        if call.signature == "WeakestReasoning":
            return {"agent": "agent_2"}
        if call.signature == "EvaluateResponse":
            return {"verdict": "weak"}
        return None

    out, _, _ = run(TeamworkProgram(config), responder)
    history = out.json_record["trust_history"]
    assert [h["stage"] for h in history] == ["initial", "post_r2", "mm_turn_1"]
    assert history[1]["scores"] == pytest.approx({"agent_1": 0.86, "agent_2": 0.56})
    assert history[2]["scores"] == pytest.approx({"agent_1": 0.86, "agent_2": 0.51})
    challenge = out.json_record["challenges"][0]
    assert challenge["agent"] == "agent_2" and challenge["verdict"] == "weak"
    assert (challenge["trust_before"], challenge["trust_after"]) == pytest.approx((0.56, 0.51))
    assert out.json_record["aggregation"] == "trust_borda"


def test_trust_without_leader_scores_assessments_by_rule():
    def responder(call):
        if call.signature == "InitialAssessment":
            good = call.inputs["role"].endswith("1")
            return {"facts": ["a", "b"] if good else [], "justification": "x" * (60 if good else 3),
                    "confidence": "High" if good else "Low"}
        return None

    out, _, _ = run(TeamworkProgram(TeamworkConfig(n_agents=2, trust=True)), responder)
    assert out.json_record["trust"] == pytest.approx({"agent_1": 0.86, "agent_2": 0.56 + 0.3 * 0.25})


def test_mutual_monitoring_runs_between_turns_only_and_tracks_answer_change():
    config = preset("c7", n_agents=2, n_turns=3)

    def responder(call):
        if call.signature == "RespondToConcern":
            return {"revised_choice": "B"}
        return None

    out, _, lm = run(TeamworkProgram(config), responder)
    assert [c["turn"] for c in out.json_record["challenges"]] == [1, 2]
    assert all((c["choice_before"], c["choice_after"]) == ("A", "B") for c in out.json_record["challenges"])
    assert sum(c.signature == "Mediation" for c in lm.calls) == 3


def test_mediation_reaches_the_next_turn():
    def responder(call):
        if call.signature == "Mediation":
            return {"synthesis": "Focus on the ECG."}
        return None

    _, _, lm = run(TeamworkProgram(preset("leadership", n_agents=2)), responder)
    final = [c for c in lm.calls if c.signature == "FinalRanking"]
    assert all("Focus on the ECG." in c.inputs["team_context"] for c in final)
    first_turn = [c for c in lm.calls if c.signature == "DiscussionTurn"]
    assert not any("Focus on the ECG." in c.inputs["team_context"] for c in first_turn)


def test_closed_loop_correction_joins_the_history():
    def responder(call):
        if call.signature == "VerifyUnderstanding":
            return {"confirmed": False, "correction": "I said troponin, not CK-MB."}
        return None

    out, _, lm = run(TeamworkProgram(TeamworkConfig(n_agents=2, closed_loop=True)), responder)
    loops = out.json_record["closed_loop"]
    assert [(lp["sender"], lp["receiver"]) for lp in loops] == [("agent_1", "agent_2"), ("agent_2", "agent_1")]
    final = [c for c in lm.calls if c.signature == "FinalRanking"]
    assert all("I said troponin, not CK-MB." in c.inputs["history"] for c in final)


def test_round_robin_each_speaker_sees_the_previous_ones():
    _, _, lm = run(TeamworkProgram(TeamworkConfig(n_agents=3)),
                   lambda c: {"message": f"said by {c.inputs['role']}"} if c.signature == "DiscussionTurn" else None)
    turns = [c for c in lm.calls if c.signature == "DiscussionTurn"]
    assert "said by Medical Expert 1" in turns[1].inputs["history"]
    assert "said by Medical Expert 2" in turns[2].inputs["history"]


def test_invalid_letters_from_the_lm_are_repaired_and_counted():
    def responder(call):
        if call.signature in ("InitialAssessment", "FinalRanking"):
            return {"ranking": ["Z", "C", "C"]}
        return None

    out, used, _ = run(TeamworkProgram(TeamworkConfig(n_agents=2)), responder)
    assert out.answer == "C"
    assert out.json_record["final"][0]["ranking"] == ["C", "A", "B", "D"]
    assert out.json_record["ranking_repairs"] == 4


def test_binary_and_ten_option_questions():
    out, _, _ = run(TeamworkProgram(TeamworkConfig(n_agents=2)), options={"A": "Yes", "B": "No"})
    assert out.answer in ("A", "B")
    ten = {chr(65 + i): f"option {i}" for i in range(10)}
    out, _, _ = run(TeamworkProgram(TeamworkConfig(n_agents=2)), options=ten)
    assert out.answer in ten and len(out.json_record["final"][0]["ranking"]) == 10


def test_only_used_behaviours_are_predictors():
    base = TeamworkProgram(TeamworkConfig(n_agents=2))
    full = TeamworkProgram(preset("all"))
    assert len(base.named_predictors()) == 3
    assert len(full.named_predictors()) == 18  # 17 behaviours + the leader's correction authority
    assert len({name for name, _ in full.named_predictors()}) == 18


def test_image_questions_reach_round_two_as_images(tmp_path):
    import base64

    from teammed.programs.teamwork import TeamworkProgram as Program

    png = tmp_path / "slide.png"
    png.write_bytes(base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="))
    out, _, lm = run(Program(TeamworkConfig(n_agents=2), vision=True), options={"A": "yes", "B": "no"},
                     image=str(png))
    assessments = [c for c in lm.calls if c.signature == "ImageAssessment"]
    assert len(assessments) == 2 and out.answer in ("A", "B")
    assert all("image_url" in str(c.messages) for c in assessments)
    with pytest.raises(ValueError, match="vision=True"):
        run(Program(TeamworkConfig(n_agents=2)), image=str(png))
