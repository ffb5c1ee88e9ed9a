"""The typed deliberation record, honest fallbacks, the tie-break's author and the leader's correction authority."""

from __future__ import annotations

import json

import dspy
import pytest

from teammed.adapter import SchemaAdapter, compact_system_text
from teammed.config import TeamworkConfig, preset
from teammed.deliberation import Deliberation
from teammed.errors import ConfigError, NoAnswerError
from teammed.programs.accounting import expected_calls
from teammed.programs.teamwork import TeamworkProgram
from teammed.signatures import FinalRanking
from tests.helpers import OPTIONS, run

LEGACY_KEYS = {"agents", "r2", "final", "votes_by_turn", "challenges", "closed_loop", "mediations", "report", "smm",
               "trust_history", "trust", "scores", "aggregation", "tie", "early_consensus", "ranking_repairs"}


def _split_vote(call):
    """Agents 1 and 3 rank A first, 2 and 4 rank B first: a Borda tie between A and B."""
    if call.signature in ("FinalRanking", "InitialAssessment"):
        first = "A" if str(call.inputs.get("role")).endswith(("1", "3")) else "B"
        return {"ranking": [first, "B" if first == "A" else "A", "C", "D"]}
    return None


# ---------------------------------------------------------------------- the typed record
def test_record_is_typed_and_round_trips_through_json():
    out, _, _ = run(TeamworkProgram(preset("all", n_agents=3)))
    record = out.record
    assert isinstance(record, Deliberation)
    stored = json.loads(json.dumps(record.model_dump(mode="json")))
    assert LEGACY_KEYS <= stored.keys()
    assert Deliberation.model_validate(stored) == record
    assert stored["r2"][0]["first"] == stored["r2"][0]["ranking"][0]  # computed, as the dict had it
    assert stored["final"][0].keys() >= {"agent", "ranking", "first", "confidence", "rationale"}
    assert stored["smm"].keys() == {"question_analysis", "verified_facts", "debated_points"}
    assert [s["stage"] for s in stored["trust_history"]] == ["initial", "post_r2", "mm_turn_1"]
    assert stored["answer"] == out.answer and stored["version"] == 2
    assert stored["fallbacks"] == 0 and stored["abstained"] == []


def test_transcript_and_rationale_are_derived_from_the_record():
    out, _, _ = run(TeamworkProgram(preset("all", n_agents=2)))
    kinds = [e.kind for e in out.transcript]
    assert kinds[:2] == ["question_analysis", "recruited"]
    assert kinds.index("assessment") < kinds.index("discussion") < kinds.index("final_ranking")
    assert kinds[-2:] == ["vote", "leader_review"]
    assert out.rationale.startswith(f"Answer {out.answer} ({OPTIONS[out.answer]})")


# ---------------------------------------------------------------------- honest final answers
def test_every_final_ranking_falling_back_raises_no_answer():
    def garbage(call):
        return {"ranking": ["Z", "9"]} if call.signature in ("FinalRanking", "InitialAssessment") else None

    with pytest.raises(NoAnswerError, match="no agent produced a parseable final ranking .2 of 2 fell back"):
        run(TeamworkProgram(TeamworkConfig(n_agents=2)), garbage)


def test_unparseable_text_for_every_call_raises_no_answer():
    with pytest.raises(NoAnswerError):
        run(TeamworkProgram(preset("all", n_agents=3)), lambda call: "I think (E), or maybe not")


def test_early_consensus_ignores_rankings_that_fell_back():
    def r2_garbage(call):
        return {"ranking": ["?"]} if call.signature == "InitialAssessment" else None

    config = TeamworkConfig(n_agents=3, early_consensus=1.0)
    out, _, lm = run(TeamworkProgram(config), r2_garbage)  # fallback rankings "agree" on A: not a consensus
    assert out.json_record["early_consensus"] is False
    assert any(c.signature == "FinalRanking" for c in lm.calls)
    assert out.json_record["fallbacks_by_behaviour"] == {"InitialAssessment": 3}


def test_a_fallback_ranking_abstains_instead_of_voting_for_the_first_option():
    def one_garbage(call):
        if call.signature == "FinalRanking":
            return {"ranking": ["Q"]} if call.inputs["role"].endswith("1") else {"ranking": ["C", "B", "A", "D"]}
        return None

    out, _, _ = run(TeamworkProgram(TeamworkConfig(n_agents=3)), one_garbage)
    record = out.json_record
    assert record["abstained"] == ["agent_1"] and out.answer == "C"
    assert record["scores"] == {"A": 2.0, "B": 4.0, "C": 6.0, "D": 0.0}  # agent_1's default A>B>C>D not counted
    assert record["fallbacks"] == 1 and record["fallbacks_by_behaviour"] == {"FinalRanking": 1}


def test_invalid_letters_are_counted():
    def responder(call):
        if call.signature in ("InitialAssessment", "FinalRanking"):
            return {"ranking": ["Z", "C", "C"]}
        if call.signature == "DiscussionTurn":
            return {"current_choice": "banana"}
        return None

    out, _, _ = run(TeamworkProgram(TeamworkConfig(n_agents=2)), responder)
    record = out.json_record
    assert record["invalid_letters"] == 4 + 2  # one Z per ranking (2 R2 + 2 final), two invalid choices
    assert record["ranking_repairs"] == 4 + 2
    assert record["fallbacks_by_behaviour"] == {"DiscussionTurn": 2}
    assert [t["choice"] for t in record["turns"] if t["turn"] == 1] == ["C", "C"]  # kept their last position


# ---------------------------------------------------------------------- tie-break
@pytest.mark.parametrize(("pick", "resolved_by", "answer"), [("B", "leader", "B"), ("C", "rule", "A"),
                                                              ("nonsense", "rule", "A")])
def test_tie_break_records_who_decided(pick, resolved_by, answer):
    def responder(call):
        if call.signature == "TieResolution":
            return {"answer": pick, "reason": "why"}
        return _split_vote(call)

    config = TeamworkConfig(n_agents=4, leadership=True, leader_correction=False)
    out, _, _ = run(TeamworkProgram(config), responder)
    tie = out.json_record["tie"]
    assert (tie["resolved_by"], tie["answer"], tie["leader_pick"]) == (resolved_by, answer, pick)
    assert out.answer == answer
    if resolved_by == "rule":
        assert "was not one of the tied options" in tie["reason"]
        assert out.json_record["fallbacks_by_behaviour"] == {"TieResolution": 1}


# ---------------------------------------------------------------------- correction authority
def _override(answer="B", flaw="The vote ignores the raised D-dimer.", decision="override"):
    def responder(call):
        if call.signature == "CorrectionAuthority":
            return {"decision": decision, "flaw": flaw, "answer": answer}
        return None

    return responder


def test_leader_overrides_a_flawed_decision_and_it_is_recorded():
    config = preset("leadership", n_agents=2)
    out, usage, lm = run(TeamworkProgram(config), _override())
    override = out.json_record["leader_override"]
    assert override == {"original": "A", "answer": "B", "flaw": "The vote ignores the raised D-dimer.",
                        "overridden": True, "invalid_pick": False}
    assert out.answer == "B" and "overrode the team's A with B" in out.rationale
    # the answer line names what decided: the leader's correction, not the vote it overrode
    assert out.rationale.splitlines()[0].startswith("Answer B (") and "by the leader's correction of the team's A" \
        in out.rationale.splitlines()[0]
    assert out.json_record["scores"]["A"] > out.json_record["scores"]["B"]  # the vote itself is kept
    assert usage.calls == len(lm.calls) == expected_calls(config, 2)
    assert [e.kind for e in out.transcript][-1] == "leader_override"


@pytest.mark.parametrize("responder", [_override(decision="uphold"), _override(answer="A"), _override(flaw=""),
                                       _override(answer="Z")])
def test_leader_upholds_without_a_stated_flaw_and_a_valid_other_option(responder):
    out, _, _ = run(TeamworkProgram(preset("leadership", n_agents=2)), responder)
    override = out.json_record["leader_override"]
    assert out.answer == "A" and override["overridden"] is False and override["original"] == "A"


def test_an_invalid_override_pick_is_a_counted_fallback():
    out, _, _ = run(TeamworkProgram(preset("leadership", n_agents=2)), _override(answer="Z"))
    assert out.json_record["leader_override"]["invalid_pick"] is True
    assert out.json_record["fallbacks_by_behaviour"] == {"CorrectionAuthority": 1}


def test_correction_authority_can_be_switched_off_and_needs_leadership():
    config = preset("leadership", n_agents=2, leader_correction=False)
    out, usage, lm = run(TeamworkProgram(config), _override())
    assert out.answer == "A" and out.json_record["leader_override"] is None
    assert "CorrectionAuthority" not in {c.signature for c in lm.calls}
    assert usage.calls == expected_calls(config, 2) == expected_calls(preset("leadership", n_agents=2), 2) - 1
    with pytest.raises(ConfigError, match="leader_correction requires leadership"):
        TeamworkConfig.build(leader_correction=True)
    assert preset("all").corrects and not preset("base").corrects
    assert preset("base", leadership=True).corrects  # merging a dumped config keeps the default on


# ---------------------------------------------------------------------- prompt format
def test_compact_prompt_only_where_the_backend_enforces_the_schema():
    inputs = {"question": "Q?", "options": OPTIONS, "role": "Cardiologist", "team_context": "", "history": ""}
    full = SchemaAdapter().format(FinalRanking, [], inputs)
    compact = SchemaAdapter().format(FinalRanking, [], inputs, compact=True)
    assert "Your output fields are" in full[0]["content"] and "Respond with a JSON object" in full[-1]["content"]
    assert compact[0]["content"] == compact_system_text(FinalRanking) == compact_system_text()  # one preamble
    assert "Your output fields are" not in str(compact) and "Respond with" not in str(compact)
    assert "A. Myocardial infarction\nB. Pulmonary embolism" in compact[-1]["content"]
    assert compact[-1]["content"].count("Q?") == 1
    # the case first, then the behaviour's instruction (after the case, where an optimizer may rewrite it)
    user = compact[-1]["content"]
    assert user.startswith("[[ ## question ## ]]\nQ?") and user.index("Pericarditis") < user.index("final ranking")


def test_no_schema_backend_gets_the_full_format():
    from teammed.backends import ScriptedLM

    lm = ScriptedLM()
    lm.structured_output = "none"
    with dspy.context(lm=lm, adapter=SchemaAdapter()):
        dspy.Predict(FinalRanking)(question="Q?", options=OPTIONS, role="r", team_context="", history="")
    assert "Your input fields are" in lm.calls[0].messages[0]["content"]


def test_gepa_feedback_reads_the_typed_record_and_speaks_of_the_override():
    from teammed.optimizers.metrics import deliberation_feedback

    out, _, _ = run(TeamworkProgram(preset("leadership", n_agents=2)), _override())  # team A -> leader B
    gold_a = deliberation_feedback(dspy.Example(answer="A"), out, None, "leader.correct.predict", None)
    assert gold_a.score == 0.0 and "overrode the team's correct A with B" in gold_a.feedback
    gold_b = deliberation_feedback(dspy.Example(answer="B"), out, None, "leader.correct.predict", None)
    assert gold_b.score == 1.0 and "rightly overrode the team's A with the gold B" in gold_b.feedback
    whole = deliberation_feedback(dspy.Example(answer="A"), out)
    assert "overrode the team's correct A" in whole.feedback
