"""Issue 17, item 1: no system invents an answer.

A vote, choice or final answer that names none of the question's options is dropped and
counted (the row's ``fallbacks``/``fallbacks_by_behaviour``), never read as an option (the
first option, or the agent's earlier vote); a system decides from the valid votes only,
and with none the question fails with `NoAnswerError`, no prediction, in the denominator.

Three layers: the pure vote arithmetic with hand-computed examples; each decision point of
each peer system driven by a `ScriptedLM`; every peer system run end to end through
``teammed run`` against a fault-injecting OpenAI-compatible server on loopback. The valid
letter the faulty servers send is always "B" and the gold is always "A" (the first option),
so an invented vote shows up as an "A" anywhere in a row, and as accuracy above zero.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dspy
import pytest

from teammed import usage
from teammed.adapter import SchemaAdapter
from teammed.backends import ScriptedCall, ScriptedLM
from teammed.backends.scripted import schema_example
from teammed.cli import main
from teammed.errors import NoAnswerError
from teammed.programs.peers import (
    SYSTEMS,
    AdaptiveComplexity,
    ConsensusVote,
    ConsultationTeam,
    KnowledgeDrivenTeam,
    MajorityVote,
    ZeroShot,
)
from teammed.programs.peers._votes import (
    anchored_scores,
    dropped,
    leaders,
    majority_holds,
    plurality,
    shares,
    unanimous,
)

from .fake_openai import FakeOpenAI, completion


def _json(record):
    """A typed record as the JSON a row stores of it (nested entries as dicts)."""
    return record.model_dump(mode="json", exclude_unset=True)


OPTIONS = {"A": "Myocardial infarction", "B": "Reflux", "C": "Pulmonary embolism", "D": "Costochondritis"}
LETTERS = list(OPTIONS)
ROLES = ["Cardiology", "Nephrology", "Pulmonology", "Critical Care", "Infectious Disease"]


@pytest.fixture(autouse=True)
def _fresh_dspy_settings():
    with dspy.context(lm=None, adapter=None):
        yield


# ---------------------------------------------------------------------- pure vote arithmetic


def test_shares_keep_dropped_votes_in_the_denominator() -> None:
    votes = ["A", None, "B", "A", None]
    assert shares(votes, LETTERS) == {"A": 2 / 5, "B": 1 / 5, "C": 0.0, "D": 0.0}
    assert dropped(votes) == 2
    assert shares([], LETTERS) == dict.fromkeys(LETTERS, 0.0)


def test_plurality_counts_valid_votes_only_and_never_defaults() -> None:
    assert plurality([None] * 5, LETTERS) == (None, 0.0)
    assert plurality(["C", None, None, None, None], LETTERS) == ("C", 0.2)  # 1 of 5, not 1 of 1
    # three dropped votes do not make "A" (the first option) win against two for "B"
    assert plurality([None, None, None, "B", "B"], LETTERS) == ("B", 0.4)
    assert plurality(["D", "C", None], LETTERS) == ("C", pytest.approx(1 / 3))  # tie: earliest letter


def test_leaders_are_empty_when_no_option_scored() -> None:
    assert leaders(dict.fromkeys(LETTERS, 0.0), LETTERS) == []
    assert leaders({"A": 0.0, "B": 0.4, "C": 0.4, "D": 0.2}, LETTERS) == ["B", "C"]


def test_unanimity_needs_every_member_to_vote_validly() -> None:
    assert unanimous(["C", "C", "C"])
    assert not unanimous(["C", "C", None])
    assert not unanimous([None, None])
    assert not unanimous([])


def test_a_majority_is_relative_to_the_whole_team() -> None:
    assert majority_holds("A", ["A", "A", "A", None, None])  # 3 of 5
    assert not majority_holds("A", ["A", "A", None, None, None])  # 2 of 5: not a majority of 2 valid
    assert not majority_holds("A", ["A", None])  # 1 of 2 is half, not more
    assert majority_holds("A", ["A"])
    assert not majority_holds(None, [None, None, None])


def test_anchored_scores_count_dropped_votes_as_no_support() -> None:
    # A: ½·(1/2) + ½·(2/2) = 0.75; B: ½·0 + ½·0 = 0
    scores = anchored_scores(["A", None], ["A", "A"], ["A", "B"])
    assert scores == pytest.approx({"A": 0.75, "B": 0.0})
    # first round: B 2/4, A 1/4; last round: B 1/4, A 0 -> B ½·0.5 + ½·0.25 = 0.375, A 0.125
    scores = anchored_scores(["B", "B", "A", None], ["B", None, None, None], ["A", "B"])
    assert scores == pytest.approx({"A": 0.125, "B": 0.375})


# ---------------------------------------------------------------------- decision points, scripted


def run(system: dspy.Module, responder: Callable[[ScriptedCall], Any]) -> tuple[dspy.Prediction, usage.Usage]:
    lm = ScriptedLM(responder)
    with dspy.context(lm=lm, adapter=SchemaAdapter()), usage.track() as used:
        prediction = system(question="Chest pain?", options=OPTIONS)
    return prediction, used


def run_failing(system: dspy.Module, responder: Callable[[ScriptedCall], Any]) -> usage.Usage:
    lm = ScriptedLM(responder)
    with dspy.context(lm=lm, adapter=SchemaAdapter()), usage.track() as used:
        with pytest.raises(NoAnswerError):
            system(question="Chest pain?", options=OPTIONS)
    return used


def expert_of(call: ScriptedCall) -> int:
    return int(str(call.inputs["expert"]).rsplit(" ", 1)[-1])


def role_of(call: ScriptedCall) -> str:
    return str(call.inputs.get("role", "")).split(";")[0].strip()


def test_majority_vote_drops_invalid_ballots_instead_of_counting_them_as_the_first_option() -> None:
    table = {1: "Z", 2: "banana", 3: "C", 4: "B", 5: "B"}  # before the fix: A 2, B 2 -> "A" by the tie rule
    prediction, used = run(MajorityVote(), lambda call: {"answer": table[expert_of(call)], "reasoning": "r"})
    assert prediction.answer == "B"
    assert _json(prediction.record)["share"] == pytest.approx(0.4)  # 2 of the 5 experts, not 2 of 3
    assert prediction.confidence == "Low"
    assert _json(prediction.record)["votes_by_turn"] == {"agent_1": [None], "agent_2": [None], "agent_3": ["C"],
                                                  "agent_4": ["B"], "agent_5": ["B"]}
    assert (_json(prediction.record)["fallbacks"], _json(prediction.record)["fallbacks_by_behaviour"]) == (
        2, {"IndependentVote": 2})
    assert (used.fallbacks, used.fallbacks_by_behaviour) == (2, {"IndependentVote": 2})


def test_majority_vote_with_one_valid_ballot_answers_it_with_a_low_share() -> None:
    prediction, _ = run(MajorityVote(), lambda call: {"answer": "D" if expert_of(call) == 3 else "Z"})
    assert (prediction.answer, _json(prediction.record)["share"], prediction.confidence) == ("D", 0.2, "Low")


def test_majority_vote_without_a_valid_ballot_has_no_answer() -> None:
    used = run_failing(MajorityVote(), lambda call: {"answer": "Z"})
    assert used.fallbacks == 5


def test_consensus_vote_is_not_unanimous_while_a_ballot_is_dropped() -> None:
    def respond(call: ScriptedCall) -> dict[str, str]:
        if call.signature == "IndependentVote":
            return {"answer": "Z" if expert_of(call) == 1 else "C"}
        return {"answer": "C"}

    prediction, used = run(ConsensusVote(), respond)
    assert (prediction.answer, prediction.record.rounds, prediction.record.method) == ("C", 1, "consensus")
    assert _json(prediction.record)["votes_by_turn"]["agent_1"] == [None, "C"]
    assert used.fallbacks_by_behaviour == {"IndependentVote": 1}


def test_consensus_vote_decides_from_the_final_valid_ballots() -> None:
    def respond(call: ScriptedCall) -> dict[str, str]:
        return {"answer": "Z" if expert_of(call) <= 3 else "D"}

    prediction, used = run(ConsensusVote(max_rounds=1), respond)
    assert (prediction.answer, prediction.record.share, prediction.record.method) == ("D", 0.4, "majority")
    assert used.fallbacks_by_behaviour == {"IndependentVote": 3, "RevisedVote": 3}


def consultation(votes: Callable[[str, int], str], *, manager: str = "Z") -> Callable[[ScriptedCall], Any]:
    def respond(call: ScriptedCall) -> Any:
        if call.signature == "ConsultSpecialties":
            return {"specialties": ROLES}
        if call.signature in ("SpecialistAnalysis", "SpecialistDebate", "DevilsAdvocate"):
            turn = 1 if call.signature == "SpecialistAnalysis" else 2
            return {"reasoning": "r", "choice": votes(role_of(call), turn)}
        if call.signature == "ManagerAggregate":
            return {"answer": manager, "rationale": "Manager decided.", "confidence": "High"}
        return None

    return respond


def test_consultation_threshold_counts_valid_votes_of_the_whole_team() -> None:
    # round 1: B from 4 specialists, 1 dropped -> 4/5 = 0.8 reaches the threshold
    prediction, used = run(ConsultationTeam(), consultation(lambda role, r: "Z" if role == "Cardiology" else "B"))
    assert (prediction.answer, prediction.record.method, prediction.record.rounds) == ("B", "consensus", 1)
    assert _json(prediction.record)["consensus_share"] == pytest.approx(0.8)
    assert _json(prediction.record)["votes_by_turn"]["agent_1"] == [None]
    assert used.fallbacks_by_behaviour == {"SpecialistAnalysis": 1}


def test_consultation_one_valid_vote_is_never_a_consensus() -> None:
    # only Cardiology names an option: 1/5 = 0.2 in every round of every team (1/1 would be "unanimous")
    system = ConsultationTeam(max_reassignments=0)
    prediction, used = run(system, consultation(lambda role, r: "C" if role == "Cardiology" else "Z", manager="D"))
    assert (prediction.record.consensus, prediction.record.method, prediction.answer) == (False, "manager", "D")
    assert _json(prediction.record)["rounds"] == 3
    assert used.fallbacks_by_behaviour == {"SpecialistAnalysis": 4, "SpecialistDebate": 8}
    assert all(v in (None, "C") for votes in _json(prediction.record)["votes_by_turn"].values() for v in votes)


def test_consultation_drops_an_invalid_manager_pick_and_uses_the_valid_votes() -> None:
    def split(role: str, r: int) -> str:
        return {"Cardiology": "C", "Nephrology": "C", "Pulmonology": "D"}.get(role, "Z")

    system = ConsultationTeam(max_reassignments=0, max_rounds=1)
    prediction, used = run(system, consultation(split, manager="banana"))
    assert (prediction.answer, _json(prediction.record)["method"]) == ("C", "final_vote")
    assert _json(prediction.record)["manager"]["answer"] is None
    assert prediction.confidence == "Low"  # 2 of 5
    assert used.fallbacks_by_behaviour == {"SpecialistAnalysis": 2, "ManagerAggregate": 1}


def test_consultation_without_any_valid_vote_or_pick_has_no_answer() -> None:
    used = run_failing(ConsultationTeam(max_reassignments=0, max_rounds=1), consultation(lambda role, r: "Z"))
    assert used.fallbacks_by_behaviour == {"SpecialistAnalysis": 5, "ManagerAggregate": 1}


def test_consultation_devils_advocate_needs_a_valid_majority() -> None:
    system = ConsultationTeam(max_reassignments=0, max_rounds=2, dissent="devil_advocate")
    prediction, _ = run(system, consultation(lambda role, r: "Z" if r == 1 else "B", manager="B"))
    assert _json(prediction.record)["devil_advocates"] == []  # round 1 had no valid vote: nothing to argue against


def mdagents(*, route: Any = "intermediate", consensus: Any = "yes", opinion: str = "B",
             decision: str = "C") -> Callable[[ScriptedCall], Any]:
    def respond(call: ScriptedCall) -> Any:
        if call.signature == "ComplexityCheck":
            return {"complexity": route, "reason": "r"}
        if call.signature == "TeamRecruitment":
            return {"members": [{"role": r, "expertise": "x"} for r in ROLES]}
        if call.signature == "ModeratorReview":
            return {"summary": "s", "consensus": consensus}
        if call.signature in ("ModeratorDecision", "IntegratedDecision", "TeamReport", "PrimaryCareAnswer"):
            return {"answer": decision}
        return {"answer": opinion}

    return respond


def test_mdagents_unreadable_route_is_a_counted_non_answer_default() -> None:
    prediction, used = run(AdaptiveComplexity(variant="light"), mdagents(route="very hard"))
    assert (_json(prediction.record)["route"], _json(prediction.record)["route_fell_back"]) == ("intermediate", True)
    assert used.fallbacks_by_behaviour == {"ComplexityCheck": 1}
    prediction, used = run(AdaptiveComplexity(variant="light"), mdagents(route="basic"))
    assert (prediction.record.route, prediction.record.route_fell_back, used.fallbacks) == ("basic", False, 0)


def test_mdagents_moderator_consensus_needs_a_valid_majority_of_the_panel() -> None:
    state = {"n": 0}
    lock = threading.Lock()

    def respond(call: ScriptedCall) -> Any:
        if call.signature == "SpecialistOpinion":  # one valid opinion of five
            with lock:
                state["n"] += 1
                first = state["n"] == 1
            return {"answer": "B" if first else "Z"}
        return mdagents(consensus="yes", opinion="B")(call)

    prediction, used = run(AdaptiveComplexity(variant="light", max_rounds=2), respond)
    assert prediction.record.rounds == 2  # the "yes" after the opinions did not count; after the replies it did
    assert _json(prediction.record)["consensus"] is True
    assert used.fallbacks_by_behaviour == {"SpecialistOpinion": 4}


def test_mdagents_unreadable_moderator_verdict_is_a_counted_no() -> None:
    prediction, used = run(AdaptiveComplexity(variant="light", max_rounds=1), mdagents(consensus="maybe"))
    assert _json(prediction.record)["consensus"] is False
    assert used.fallbacks_by_behaviour == {"ModeratorReview": 1}


def test_mdagents_invalid_decision_falls_to_the_valid_votes_then_to_no_answer() -> None:
    prediction, used = run(AdaptiveComplexity(variant="light"), mdagents(decision="Z", opinion="D"))
    assert prediction.answer == "D"
    assert used.fallbacks_by_behaviour == {"ModeratorDecision": 1}
    prediction, _ = run(AdaptiveComplexity(), mdagents(route="advanced", decision="Z", opinion="D"))
    assert prediction.answer == "D" and [t["answer"] for t in _json(prediction.record)["teams"]] == ["D"] * 3
    run_failing(AdaptiveComplexity(variant="light"), mdagents(decision="Z", opinion="Z"))
    run_failing(AdaptiveComplexity(), mdagents(route="advanced", decision="Z", opinion="Z"))
    run_failing(AdaptiveComplexity(), mdagents(route="basic", decision="Z"))


def kamac(*, answer: Any = "B", leaning: Any = "B", consensus: Any = "yes", verdict: Any = "C",
          gap: Any = "no") -> Callable[[ScriptedCall], Any]:
    def respond(call: ScriptedCall) -> Any:
        if call.signature == "ExpertRecruitment":
            return {"experts": [{"role": "Cardiologist", "expertise": "ECG"}]}
        if call.signature == "ConsensusCheck":
            return {"consensus": consensus, "answer": leaning, "reason": "r"}
        if call.signature == "KnowledgeGap":
            return {"gap": gap, "specialties": [{"role": "Nephrologist", "expertise": "x"}], "reason": "r"}
        if call.signature == "ModeratorVerdict":
            return {"answer": verdict, "rationale": "Decided.", "confidence": "High"}
        return {"answer": answer, "assessment": "a", "comment": "c"}

    return respond


def test_kamac_consensus_needs_the_team_to_hold_the_option_validly() -> None:
    prediction, used = run(KnowledgeDrivenTeam(max_rounds=2), kamac(answer="Z", gap="no"))
    assert _json(prediction.record)["consensus"] is False  # "yes" for B, but the one expert named no option
    assert _json(prediction.record)["rounds"] == 2
    assert all(v is None for v in _json(prediction.record)["votes_by_turn"]["agent_1"])
    assert used.fallbacks_by_behaviour == {"ExpertAssessment": 1, "ViewExchange": 2, "AnswerUpdate": 2}


def test_kamac_unreadable_verdicts_are_counted_and_recruit_no_one() -> None:
    prediction, used = run(KnowledgeDrivenTeam(max_rounds=1), kamac(consensus="perhaps", gap="?", leaning="Z"))
    assert (_json(prediction.record)["consensus"], _json(prediction.record)["recruited_per_round"]) == (False, [[]])
    assert used.fallbacks_by_behaviour == {"ConsensusCheck": 2, "KnowledgeGap": 1}


def test_kamac_invalid_moderator_verdict_falls_to_consensus_then_votes_then_no_answer() -> None:
    prediction, _ = run(KnowledgeDrivenTeam(), kamac(verdict="Z", leaning="B", answer="B"))
    assert (prediction.answer, _json(prediction.record)["method"], prediction.confidence) == ("B", "consensus", "Low")
    prediction, _ = run(KnowledgeDrivenTeam(max_rounds=1), kamac(verdict="Z", consensus="no", answer="D"))
    assert (prediction.answer, _json(prediction.record)["method"]) == ("D", "latest_vote")
    used = run_failing(KnowledgeDrivenTeam(max_rounds=1), kamac(verdict="Z", consensus="no", answer="Z"))
    assert used.fallbacks_by_behaviour["ModeratorVerdict"] == 1


def test_single_agent_baselines_count_the_answer_they_could_not_read() -> None:
    used = run_failing(ZeroShot(), lambda call: {"answer": "Z"})
    assert used.fallbacks_by_behaviour == {"DirectAnswer": 1}


# ---------------------------------------------------------------------- every system, faulty server


class FaultyServer:
    """Answers every call with schema-valid JSON whose option-letter fields are "Z" (invalid) or
    "B": ``every`` letter invalid, every ``other`` one per question (50%), or ``not_json`` at all.
    Counts, per question, the invalid letters it sent."""

    def __init__(self, mode: str):
        self.mode = mode
        self.sent: Counter[str] = Counter()
        self.invalid: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, n: int, body: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
        if self.mode == "not_json":
            return 200, {}, completion("I would go with the second one, probably.")
        fmt = body.get("response_format") or {}
        schema = fmt.get("json_schema", {}).get("schema") or fmt.get("schema")
        assert schema, "the fake server needs the request's JSON schema"
        answer = schema_example(schema)
        # few-shot demos come before the last user message (DSPy) or after the case inside it (compact layout)
        user = [m for m in body["messages"] if m["role"] == "user"][-1]
        question = re.findall(r"Case (\d+):", json.dumps(user["content"]))[0]
        for name, prop in schema["properties"].items():
            if prop.get("enum") and set(prop["enum"]) <= set(OPTIONS):
                with self._lock:
                    self.sent[question] += 1
                    bad = self.mode == "every" or self.sent[question] % 2 == 1
                    self.invalid[question] += bad
                answer[name] = "Z" if bad else "B"
        return 200, {}, completion(json.dumps(answer))


def _dataset(path: Path, n: int) -> Path:
    rows = [{"id": f"q{i}", "question": f"Case {i}: a 58-year-old with chest pain. Diagnosis?",
             "options": OPTIONS, "answer_idx": "A"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run(tmp_path: Path, system: str, mode: str, monkeypatch: pytest.MonkeyPatch,
         n: int = 2) -> tuple[list[dict[str, Any]], dict[str, Any], FaultyServer]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    data = _dataset(tmp_path / "cases.jsonl", n + 4)  # the other cases are few-shot examples
    faulty = FaultyServer(mode)
    with FakeOpenAI(faulty) as server:
        main(["run", "--dataset", str(data), "--split", "test", "--n", str(n), "--system", system,
              "--model", "openai/x", "--api-base", server.api_base, "--no-cache", "--retry-attempts", "1",
              "--timeout", "10", "--out", str(tmp_path / "run")])
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert len(rows) == n
    return rows, summary, faulty


def _case(row: dict[str, Any]) -> str:
    return re.findall(r"Case (\d+):", row["question"])[0]


def _letters_recorded(row: dict[str, Any]) -> list[Any]:
    """Every option letter the row says an agent chose or the system answered."""
    record = row["record"] or {}
    letters: list[Any] = [row["prediction"]]
    letters += [v for votes in (record.get("votes_by_turn") or {}).values() for v in votes]
    letters += [v.get("first") for key in ("r2", "final") for v in record.get(key) or []]
    letters += [t.get("answer") for t in record.get("teams") or []]
    letters += [(e.get("data") or {}).get(k) for e in row["transcript"] for k in ("choice", "answer")]
    return letters


@pytest.mark.parametrize("mode", ["every", "not_json"])
@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_no_valid_letter_fails_every_row_without_a_prediction(tmp_path, monkeypatch, system, mode) -> None:
    rows, summary, faulty = _run(tmp_path, system, mode, monkeypatch)
    assert summary["n"] == summary["n_failed"] == 2 and summary["accuracy"] == 0.0  # failures stay counted
    for row in rows:
        assert row["failed"] and row["prediction"] is None and row["correct"] is False
        assert row["error_type"] == "NoAnswerError"
        assert row["fallbacks"] > 0 and sum(row["fallbacks_by_behaviour"].values()) == row["fallbacks"]
        if mode == "every":  # every invalid letter the server sent was dropped and counted
            assert row["fallbacks"] >= faulty.invalid[_case(row)] > 0
        else:
            assert row["parse_failures"] == row["calls"] > 0


@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_half_invalid_letters_are_dropped_and_counted_never_read_as_an_option(tmp_path, monkeypatch, system) -> None:
    rows, summary, faulty = _run(tmp_path, system, "other", monkeypatch, n=3)
    assert summary["fallbacks"] > 0
    for row in rows:
        invalid = faulty.invalid[_case(row)]
        assert invalid > 0
        # each invalid letter is one fallback of the behaviour that produced it; nothing else fell back
        assert row["fallbacks"] == invalid == sum(row["fallbacks_by_behaviour"].values())
        # the server only ever named "B": an "A" (the first option) would be a dropped vote counted as one
        assert set(_letters_recorded(row)) <= {"B", None}
        assert row["prediction"] in ("B", None) and (row["prediction"] is None) == row["failed"]
        votes = [v for votes in ((row["record"] or {}).get("votes_by_turn") or {}).values() for v in votes]
        assert votes.count(None) <= row["fallbacks"]
