"""Issue 32, item 11: the MDAgents-style system follows MDAgents' own code by default.

MDAgents' code (mitmedialab/MDAgents, ``utils.py``): ``process_basic_query`` shows 5 worked
examples; ``process_intermediate_query`` gives each expert the same 5, then runs
``num_rounds = 5`` rounds of ``num_turns = 5`` turns in which each expert says whether it
wants to talk and names the experts it talks to, stops the whole discussion at the first turn
in which nobody wants to talk, asks every expert's answer after each round, and has a moderator
decide "by taking majority vote". That is the ``paper`` variant, the default; the lighter design
the system had first is ``variant="light"``. Every LM call is answered by a `ScriptedLM`
responder keyed on the behaviour (``call.signature``) and the agent (its ``role`` input), so
results do not depend on thread order.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import dspy
import pytest

from teammed import usage
from teammed.adapter import SchemaAdapter
from teammed.backends import ScriptedCall, ScriptedLM
from teammed.errors import ConfigError, NoAnswerError
from teammed.programs.peers import AdaptiveComplexity, build_system
from teammed.programs.peers.mdagents import DEFAULT_VARIANT, VARIANT_SUMMARY, VARIANTS
from teammed.results import MdagentsRecord

QUESTION = "A 58-year-old man has crushing chest pain radiating to his left arm. What is the most likely diagnosis?"
OPTIONS = {"A": "Myocardial infarction", "B": "Reflux", "C": "Pulmonary embolism", "D": "Costochondritis"}
ROLES = ["Cardiology", "Nephrology", "Pulmonology", "Critical Care", "Infectious Disease"]
Responder = Callable[[ScriptedCall], Any]


def _json(record):
    """A typed record as the JSON a row stores of it (nested entries as dicts)."""
    return record.model_dump(mode="json", exclude_unset=True)


@pytest.fixture(autouse=True)
def _fresh_dspy_settings():
    with dspy.context(lm=None, adapter=None):
        yield


def run(system: dspy.Module, responder: Responder) -> tuple[dspy.Prediction, ScriptedLM, usage.Usage]:
    lm = ScriptedLM(responder)
    with dspy.context(lm=lm, adapter=SchemaAdapter()), usage.track() as used:
        prediction = system(question=QUESTION, options=OPTIONS)
    return prediction, lm, used


def called(lm: ScriptedLM) -> Counter[str]:
    return Counter(c.signature for c in lm.calls)


def _examples(n: int = 10) -> list[dict[str, Any]]:
    return [{"question": f"Worked example {i}?", "options": {"A": "x", "B": "y"}, "answer": "AB"[i % 2]}
            for i in range(n)]


def role_of(call: ScriptedCall) -> str:
    return str(call.inputs.get("role", "")).split(";")[0]


def panel(*, route: str = "intermediate", n: int = 3, opinion: str = "C", round_answer: str = "C",
          decision: str = "C", talk: Callable[[str, int], Any] | None = None) -> Responder:
    """A scripted MDAgents run: ``talk(role, turn_of_that_agent)`` gives a `PanelTurn` reply
    (``None``: silent), counted per agent so the turn is known whatever the thread order."""
    turns: Counter[str] = Counter()
    lock = threading.Lock()

    def respond(call: ScriptedCall) -> Any:
        sig = call.signature
        if sig == "ComplexityCheck":
            return {"complexity": route, "reason": "because"}
        if sig == "TeamRecruitment":
            return {"members": [{"role": r, "expertise": "x"} for r in ROLES[:n]]}
        if sig == "PanelTurn":
            with lock:
                turns[role_of(call)] += 1
                mine = turns[role_of(call)]
            reply = talk(role_of(call), mine) if talk else None
            return reply if reply is not None else {"speak": "no", "messages": []}
        if sig in ("PanelOpinion", "SpecialistOpinion"):
            return {"answer": opinion, "reasoning": "Opinion.", "confidence": "Medium"}
        if sig == "PanelRoundAnswer":
            return {"answer": round_answer, "reasoning": "After talking."}
        if sig == "ModeratorReview":
            return {"summary": "They lean to C.", "consensus": "yes"}
        if sig in ("MajorityDecision", "ModeratorDecision", "IntegratedDecision", "PrimaryCareAnswer"):
            return {"answer": decision, "rationale": "Decided.", "reasoning": "Decided.", "confidence": "High"}
        if sig == "CareTeamsRecruitment":
            return {"teams": [{"name": f"Team {t}", "members": [{"role": f"{r} {t}", "expertise": "x"}
                                                               for r in ROLES[:3]]} for t in "XYZ"]}
        return {"answer": "C", "report": "Report.", "message": "Reply."}

    return respond


def says(*to: str, text: str = "Think of the ECG.") -> dict[str, Any]:
    return {"speak": "yes", "messages": [{"to": t, "text": f"{text} ({t})"} for t in to]}


# ---------------------------------------------------------------------- the defaults


def test_the_defaults_are_mdagents_own_numbers_and_light_keeps_the_old_ones() -> None:
    paper = AdaptiveComplexity().config
    assert DEFAULT_VARIANT == paper.variant == "paper"
    assert (paper.k, paper.max_rounds, paper.n_turns) == (5, 5, 5)  # utils.py: examplers[:5], num_rounds/turns = 5
    assert (paper.n_specialists, paper.n_teams, paper.team_size) == (5, 3, 3)  # num_agents = 5; 3 MDTs x 3
    light = AdaptiveComplexity(variant="light").config
    assert (light.k, light.max_rounds, light.n_turns, light.n_specialists) == (3, 2, None, 5)
    assert VARIANTS == {"paper": {"k": 5, "max_rounds": 5, "n_turns": 5},
                        "light": {"k": 3, "max_rounds": 2, "n_turns": None}}
    assert set(VARIANT_SUMMARY) == set(VARIANTS)
    explicit = AdaptiveComplexity(k=2, max_rounds=1, n_turns=3).config
    assert (explicit.variant, explicit.k, explicit.max_rounds, explicit.n_turns) == ("paper", 2, 1, 3)
    assert AdaptiveComplexity(variant="light", k=4).config.k == 4


def test_a_bad_variant_or_turns_for_the_light_variant_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="variant"):
        AdaptiveComplexity(variant="heavy")
    with pytest.raises(ConfigError, match="light variant has no turns"):
        AdaptiveComplexity(variant="light", n_turns=3)
    with pytest.raises(ConfigError, match="n_turns"):
        build_system("mdagents", n_turns=0)


def test_each_variant_builds_only_the_behaviours_it_calls_and_its_worked_examples() -> None:
    paper = AdaptiveComplexity(examples=_examples())
    shared = {"ComplexityCheck", "PrimaryCareAnswer", "TeamRecruitment", "SpecialistOpinion",
              "CareTeamsRecruitment", "TeamReport", "IntegratedDecision"}
    assert set(paper.behaviours()) == shared | {"PanelOpinion", "PanelTurn", "PanelRoundAnswer", "MajorityDecision"}
    assert len(paper.primary_care.predict.demos) == len(paper.panel_opinion.predict.demos) == 5
    light = AdaptiveComplexity(examples=_examples(), variant="light")
    assert set(light.behaviours()) == shared | {"ModeratorReview", "PanelReply", "ModeratorDecision"}
    assert len(light.primary_care.predict.demos) == 3


def test_a_saved_system_rebuilds_with_its_variant(tmp_path) -> None:
    from teammed.programs.load import load_program

    for variant in ("paper", "light"):
        path = tmp_path / f"{variant}.json"
        AdaptiveComplexity(variant=variant).save(path)
        program, _ = load_program(path, system="mdagents")
        assert program.config == AdaptiveComplexity(variant=variant).config


# ---------------------------------------------------------------------- agent-chosen recipients


def test_the_recipients_an_agent_chooses_get_its_message_and_no_one_else() -> None:
    def talk(role: str, turn: int) -> Any:
        if role == "Cardiology" and turn == 1:
            return says("agent_2")
        if role == "Nephrology" and turn == 2:
            return says("agent_1", text="Agreed.")
        return None

    system = AdaptiveComplexity(n_specialists=3, max_rounds=2, n_turns=2)
    prediction, lm, used = run(system, panel(talk=talk))
    turns = [c for c in lm.calls if c.signature == "PanelTurn"]
    second = {role_of(c): c.inputs["discussion"] for c in turns if "[turn 1]" in str(c.inputs["discussion"])}
    assert set(second) == {"Cardiology", "Nephrology"}  # the sender and its chosen recipient, not Pulmonology
    assert "you -> agent_2 (Nephrology)" in second["Cardiology"]
    assert "agent_1 (Cardiology) -> you: Think of the ECG." in second["Nephrology"]
    assert all("agent_3" not in str(c.inputs["teammates"]) for c in turns if role_of(c) == "Pulmonology")
    answers = {role_of(c): str(c.inputs["discussion"]) for c in lm.calls if c.signature == "PanelRoundAnswer"}
    assert answers["Pulmonology"] == "" and "[turn 2] you -> agent_1" in answers["Nephrology"]
    messages = [e for e in prediction.transcript if e.kind == "message"]
    assert [(e.agent, e.data["to"], e.turn) for e in messages] == [("agent_1", "agent_2", 1),
                                                                             ("agent_2", "agent_1", 2)]
    # round 1 ran its 2 turns and its answers; round 2's first turn was silent: the discussion ended
    assert _json(prediction.record)["rounds"] == 1 and _json(prediction.record)["variant"] == "paper"
    assert called(lm)["PanelTurn"] == 3 * 3 and called(lm)["PanelRoundAnswer"] == 3
    assert used.calls == 3 + 3 + 3 * 3 + 3 == 18
    assert used.fallbacks == 0


def test_invalid_recipients_are_dropped_and_counted_and_names_and_numbers_are_read() -> None:
    def talk(role: str, turn: int) -> Any:
        if role == "Cardiology" and turn == 1:  # unknown, itself, a role, its repeat, a number, a blank
            return says("agent_9", "agent_1", "nephrology", "Agent 2", "3", "")
        return None

    prediction, _, used = run(AdaptiveComplexity(n_specialists=3, max_rounds=1, n_turns=2), panel(talk=talk))
    sent = [e.data["to"] for e in prediction.transcript if e.kind == "message"]
    assert sent == ["agent_2", "agent_3"]
    assert used.fallbacks_by_behaviour == {"PanelTurn": 4}
    assert _json(prediction.record)["fallbacks_by_behaviour"] == {"PanelTurn": 4}
    assert prediction.answer == "C"


def test_an_unreadable_wish_to_talk_is_a_counted_no() -> None:
    prediction, lm, used = run(AdaptiveComplexity(n_specialists=3),
                               panel(talk=lambda role, turn: {"speak": "perhaps", "messages": []}))
    assert used.fallbacks_by_behaviour == {"PanelTurn": 3}
    assert called(lm)["PanelTurn"] == 3 and "PanelRoundAnswer" not in called(lm)
    assert _json(prediction.record)["rounds"] == 0


def test_a_yes_without_a_valid_recipient_still_counts_as_talking() -> None:
    """As in MDAgents' code (``num_yes`` counts the "yes"), the turn was not silent."""
    talk: Callable[[str, int], Any] = lambda role, turn: says("agent_9") if turn == 1 else None  # noqa: E731
    _, lm, used = run(AdaptiveComplexity(n_specialists=3, max_rounds=2, n_turns=1), panel(talk=talk))
    assert called(lm)["PanelTurn"] == 2 * 3 and called(lm)["PanelRoundAnswer"] == 3
    assert used.fallbacks_by_behaviour == {"PanelTurn": 3}


# ---------------------------------------------------------------------- stopping and deciding


def test_a_silent_first_turn_ends_the_discussion_and_the_moderator_weighs_the_opinions() -> None:
    prediction, lm, used = run(AdaptiveComplexity(n_specialists=3), panel(opinion="B", decision="Z"))
    assert called(lm) == {"ComplexityCheck": 1, "TeamRecruitment": 1, "PanelOpinion": 3, "PanelTurn": 3,
                          "MajorityDecision": 1}
    assert used.calls == 3 + 2 * 3 == 9
    assert prediction.record.rounds == 0 and prediction.record.votes_by_turn == {"opinions": ["B"] * 3}
    decision = next(c for c in lm.calls if c.signature == "MajorityDecision")
    assert "favours B" in str(decision.inputs["answers"])
    assert prediction.answer == "B"  # the moderator named no option: the plurality of the answers it weighed
    assert used.fallbacks_by_behaviour == {"MajorityDecision": 1}
    assert any(e.kind == "silence" for e in prediction.transcript)


def test_nobody_ever_silent_runs_every_round_and_turn() -> None:
    talk: Callable[[str, int], Any] = lambda role, turn: says("agent_1" if role != "Cardiology" else "agent_2")  # noqa: E731
    prediction, lm, used = run(AdaptiveComplexity(n_specialists=3), panel(talk=talk, round_answer="A", decision="A"))
    n, rounds, turns = 3, 5, 5
    assert called(lm)["PanelTurn"] == rounds * turns * n and called(lm)["PanelRoundAnswer"] == rounds * n
    assert used.calls == 3 + n + rounds * n * (turns + 1) == 96
    record = _json(prediction.record)
    assert record["rounds"] == 5 and list(record["votes_by_turn"]) == ["opinions"] + [f"round {r}" for r in
                                                                                     range(1, 6)]
    assert record["final"] == [{"agent": f"agent_{i}", "first": "A"} for i in (1, 2, 3)]
    assert record["method"] == "moderator_majority" and prediction.answer == "A"


def test_a_round_answer_naming_no_option_is_dropped_never_the_earlier_opinion() -> None:
    talk: Callable[[str, int], Any] = lambda role, turn: says("agent_2") if turn == 1 else None  # noqa: E731
    system = AdaptiveComplexity(n_specialists=3, max_rounds=2, n_turns=1)
    prediction, _, used = run(system, panel(talk=talk, opinion="B", round_answer="Z", decision="C"))
    assert _json(prediction.record)["final"] == [{"agent": f"agent_{i}", "first": None} for i in (1, 2, 3)]
    assert _json(prediction.record)["votes_by_turn"] == {"opinions": ["B"] * 3, "round 1": [None] * 3}
    assert used.fallbacks_by_behaviour == {"PanelTurn": 1, "PanelRoundAnswer": 3}  # agent_2 to itself: dropped
    assert prediction.answer == "C"
    # the moderator names no option either: the latest answers it weighed had no valid vote, and the
    # opinions of round 0 are not read in their place
    with pytest.raises(NoAnswerError, match="neither the moderator nor any panel member"):
        run(system, panel(talk=talk, opinion="B", round_answer="Z", decision="Z"))


def test_no_valid_letter_in_the_paper_variant_fails_the_question() -> None:
    with pytest.raises(NoAnswerError):
        run(AdaptiveComplexity(n_specialists=3), panel(opinion="Z", decision="Z"))


def test_the_record_is_typed_with_its_variant() -> None:
    for variant in ("paper", "light"):
        prediction, _, _ = run(AdaptiveComplexity(variant=variant, n_specialists=3), panel())
        record = MdagentsRecord.model_validate(prediction.record)
        assert record.variant == variant and record.route == "intermediate"
    assert MdagentsRecord.model_validate({"system": "mdagents", "route": "basic"}).variant is None


def test_run_system_mdagents_runs_the_paper_variant_and_says_so(tmp_path) -> None:
    import json

    from teammed.cli import main

    out = tmp_path / "run"
    assert main(["run", "--dataset", "demo", "--system", "mdagents", "--model", "scripted", "--no-cache", "--n", "2",
                 "--out", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert rows and all(r["record"]["variant"] == "paper" for r in rows)


# ---------------------------------------------------------------------- the light variant, and the cost


def test_the_light_variant_still_runs_as_before() -> None:
    def no_consensus(call: ScriptedCall) -> Any:
        if call.signature == "ModeratorReview":
            return {"summary": "Split.", "consensus": "no"}
        return panel()(call)

    prediction, lm, used = run(AdaptiveComplexity(variant="light", n_specialists=3), panel())
    assert called(lm) == {"ComplexityCheck": 1, "TeamRecruitment": 1, "SpecialistOpinion": 3, "ModeratorReview": 1,
                          "ModeratorDecision": 1}
    assert used.calls == 3 + 1 * (3 + 1) == 7
    assert (prediction.record.rounds, prediction.record.consensus, prediction.record.method) == (
        1, True, "moderator")
    prediction, lm, used = run(AdaptiveComplexity(variant="light", n_specialists=3), no_consensus)
    assert called(lm)["PanelReply"] == 2 * 3
    assert used.calls == 3 + 3 + 2 * (3 + 1) == 14
    assert _json(prediction.record)["variant"] == "light"


@pytest.mark.parametrize("variant", ["paper", "light"])
def test_basic_and_advanced_routes_cost_the_same_in_both_variants(variant: str) -> None:
    system = AdaptiveComplexity(variant=variant, examples=_examples())
    prediction, lm, used = run(system, panel(route="basic"))
    assert used.calls == 2 and _json(prediction.record)["variant"] == variant
    primary = next(c for c in lm.calls if c.signature == "PrimaryCareAnswer")
    shown = sum(f"Worked example {i}?" in str(primary.messages) for i in range(10))
    assert shown == (5 if variant == "paper" else 3)
    _, _, used = run(AdaptiveComplexity(variant=variant), panel(route="advanced"))
    assert used.calls == 3 + 3 * (3 + 1) == 15


def test_the_panel_sees_the_worked_examples_only_in_the_paper_variant() -> None:
    _, lm, _ = run(AdaptiveComplexity(examples=_examples(), n_specialists=3), panel())
    opinion = next(c for c in lm.calls if c.signature == "PanelOpinion")
    assert sum(f"Worked example {i}?" in str(opinion.messages) for i in range(10)) == 5
    _, lm, _ = run(AdaptiveComplexity(examples=_examples(), n_specialists=3, variant="light"), panel())
    opinion = next(c for c in lm.calls if c.signature == "SpecialistOpinion")
    assert "Worked example" not in str(opinion.messages)


# ---------------------------------------------------------------------- Table 1 says which variant ran


def test_the_table1_row_names_the_variant_that_ran() -> None:
    from teammed.optimizers.reproduce import ReproduceSettings, _markdown, _table
    from teammed.optimizers.tune_queue import cell_key

    cell = {"kind": "table1", "dataset": "MQA", "row": "MDAgents", "seed": 111, "special": None}
    done = {cell_key(cell): {"ids": ["q0", "q1"], "correct": [True, False], "failed": [False, False],
                             "value": 0.5, "calls": 2, "tokens": 0, "cost_usd": 0.0}}
    settings = ReproduceSettings(model="m", seeds=(111,), n=2, rows=("MDAgents",))
    text = _markdown(_table([cell], done, settings), {}, settings)
    assert "| MDAgents (paper variant) | MQA |" in text
    assert f"MDAgents: our MDAgents-style system (`mdagents`), paper variant: {VARIANT_SUMMARY['paper']}." in text


def test_acall_of_the_paper_discussion_makes_the_same_calls_as_call() -> None:
    import asyncio

    def talk(role: str, turn: int) -> Any:
        return says("agent_2" if role == "Cardiology" else "agent_1") if turn <= 2 else None

    def go(asynchronous: bool) -> tuple[dspy.Prediction, ScriptedLM]:
        lm = ScriptedLM(panel(talk=talk))
        system = AdaptiveComplexity(n_specialists=3, n_turns=2)

        async def acall() -> dspy.Prediction:
            with dspy.context(lm=lm, adapter=SchemaAdapter()):
                return await system.acall(question=QUESTION, options=OPTIONS)

        if asynchronous:
            return asyncio.run(acall()), lm
        with dspy.context(lm=lm, adapter=SchemaAdapter()):
            return system(question=QUESTION, options=OPTIONS), lm

    (sync, sync_lm), (prediction, lm) = go(False), go(True)
    assert prediction.record == sync.record and prediction.answer == sync.answer
    assert sorted((c.signature, repr(sorted(c.inputs.items()))) for c in lm.calls) == sorted(
        (c.signature, repr(sorted(c.inputs.items()))) for c in sync_lm.calls)
    assert called(lm)["PanelTurn"] == 3 * 3  # round 1: two turns; round 2: a silent first turn
