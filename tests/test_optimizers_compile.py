"""Compiling, evaluating, saving and loading teamwork programs; the optimizers' metrics.

A planted scripted LM makes improvement measurable: the student answers right only when
its prompt carries demos (or, for GEPA, a planted instruction), and a teacher LM is an oracle.
"""

from __future__ import annotations

import inspect
import json

import dspy
import pytest

from teammed.backends import ScriptedCall, ScriptedLM
from teammed.config import TeamworkConfig
from teammed.deliberation import Deliberation, TieBreak
from teammed.errors import ConfigError, DataError, ProgramMismatchError
from teammed.optimizers import (
    OPTIMIZERS,
    accuracy_metric,
    compile_program,
    deliberation_feedback,
    evaluate,
    examples_from_questions,
    load_program,
    save_program,
    split_questions,
)
from teammed.programs.teamwork import TeamworkProgram
from teammed.types import Question
from tests.typed_fixtures import a_challenge, a_deliberation

LETTERS = "ABCD"
QUESTIONS = [
    Question(id=f"q{i}", question=f"Case {i}: a patient presents with finding {i}. Most likely diagnosis?",
             options={"A": "alpha", "B": "beta", "C": "gamma", "D": "delta"}, answer_idx=gold)
    for i, gold in enumerate("BCDBC")
]
GOLD = {q.question: q.answer_idx for q in QUESTIONS}
HINT = "PLANTED-HINT: rank the gold first."
CONFIG = TeamworkConfig(leadership=True, n_agents=2)


def _ranked(first: str) -> list[str]:
    return [first] + [letter for letter in LETTERS if letter != first]


def planted(*, oracle: bool = False):
    """Right when ``oracle``, or when the call's prompt holds demos or the planted instruction."""

    def respond(call: ScriptedCall):
        if "new_instruction" in str(call.messages):  # GEPA's reflection: propose the planted hint
            return json.dumps({"new_instruction": HINT})
        gold = GOLD.get(call.inputs.get("question"))
        if gold is None:
            return None
        # demos: DSPy's assistant turns, or teammed's compact layout's worked examples after the case;
        # the instruction: in the system message (DSPy) or the task part of the user message (compact)
        prompt = "\n".join(str(m.get("content", "")) for m in call.messages)
        has_demos = any(m.get("role") == "assistant" for m in call.messages) or "Example 1 (another case):" in prompt
        task = prompt.split("[[ ## task ## ]]", 1)[-1]
        right = oracle or has_demos or HINT in task
        first = gold if right else next(letter for letter in LETTERS if letter != gold)
        if call.signature in ("FinalRanking", "InitialAssessment"):
            return {"ranking": _ranked(first), "confidence": "High"}
        if call.signature == "DiscussionTurn":
            return {"current_choice": first}
        return None

    return respond


@pytest.fixture
def examples() -> list[dspy.Example]:
    return examples_from_questions(QUESTIONS)


def demo_counts(program: dspy.Module) -> dict[str, int]:
    return {name: len(p.demos) for name, p in program.named_predictors()}


# ---------------------------------------------------------------------- metrics (hand-made records)
def record(*, r2, final=None, votes=None, challenges=(), tie=None, early=False, trust=None) -> Deliberation:
    """A real `Deliberation` of ``len(r2)`` agents with these first choices (challenges and tie as written)."""
    return a_deliberation(
        r2=r2, final=final, votes=votes, early=early, trust=trust,
        challenges=[a_challenge(c["agent"], c["choice_before"], c["choice_after"], verdict=c["verdict"],
                                turn=c["turn"]) for c in challenges],
        tie=TieBreak.model_validate(tie) if tie else None,
    )


def feedback(rec, answer, gold="B", pred_name=None) -> dspy.Prediction:
    return deliberation_feedback(dspy.Example(answer=gold), dspy.Prediction(answer=answer, record=rec),
                                 None, pred_name, None)


def test_accuracy_metric():
    assert accuracy_metric(dspy.Example(answer="B"), dspy.Prediction(answer="B")) == 1.0
    assert accuracy_metric(dspy.Example(answer="B"), dspy.Prediction(answer="C")) == 0.0
    assert accuracy_metric(dspy.Example(answer="B"), dspy.Prediction(answer=None)) == 0.0


def test_feedback_has_gepas_five_argument_signature():
    inspect.signature(deliberation_feedback).bind(None, None, None, None, None)


def test_feedback_correct():
    out = feedback(record(r2=["B", "B"]), "B")
    assert (out.score, out.feedback) == (1.0, "correct")


def test_feedback_talked_out_of_the_right_answer():
    out = feedback(record(r2=["B", "B", "A"], final=["A", "A", "A"]), "A")
    assert out.score == 0.0
    assert "right at R2 (majority first choice was the gold answer B) but talked out of it in R3" \
        in out.feedback


def test_feedback_tie_broken_the_wrong_way():
    tie = {"tied": ["A", "B"], "resolved_by": "leader", "answer": "A", "reason": "x"}
    out = feedback(record(r2=["A", "B"], tie=tie), "A")
    assert "the leader broke a tie the wrong way (tied A, B; chose A; gold B)" in out.feedback


def test_feedback_challenged_agent_switched_away():
    challenge = {"turn": 1, "agent": "agent_2", "choice_before": "B", "choice_after": "C", "verdict": "weak"}
    out = feedback(record(r2=["C", "B", "C"], final=["C", "C", "C"], challenges=[challenge]), "C")
    assert ("a challenged agent switched away from the correct answer: agent_2 (turn 1) moved from "
            "the gold B to C") in out.feedback


def test_feedback_wrong_from_the_start():
    out = feedback(record(r2=["A", "C"]), "A")
    assert out.feedback.startswith("wrong from the start: no agent ranked the gold B first in R2")


def test_feedback_is_scoped_to_the_named_predictor():
    tie = {"tied": ["A", "B"], "resolved_by": "leader", "answer": "A", "reason": "x"}
    challenge = {"turn": 1, "agent": "agent_1", "choice_before": "B", "choice_after": "A", "verdict": "weak"}
    rec = record(r2=["B", "B"], final=["A", "B"], tie=tie, challenges=[challenge])
    on_tie = feedback(rec, "A", pred_name="leader.resolve_tie.predict").feedback
    on_r2 = feedback(rec, "A", pred_name="assessment.assess.predict").feedback
    on_challenge = feedback(rec, "A", pred_name="monitoring.respond.predict").feedback
    on_discussion = feedback(rec, "A", pred_name="discussion.final.predict").feedback
    assert on_tie == "the leader broke a tie the wrong way (tied A, B; chose A; gold B)"
    assert on_r2 == "every agent ranked the gold B first in R2"
    assert "switched away" in on_challenge and "tie" not in on_challenge and "R2" not in on_challenge
    assert "talked out of it" in on_discussion and "tie" not in on_discussion
    no_tie = feedback(record(r2=["A", "C"]), "A", pred_name="leader.resolve_tie.predict").feedback
    assert no_tie == "the vote was not tied on this question"


def test_feedback_on_trust_and_without_a_record():
    rec = record(r2=["A", "B"], trust={"agent_1": 0.9, "agent_2": 0.5})
    assert feedback(rec, "A", pred_name="leader.grade.predict").feedback == (
        "the most trusted agent (agent_1, 0.90) finished on the wrong A (gold B), while the least "
        "trusted (agent_2, 0.50) had the gold")
    assert feedback(None, None).feedback.startswith("wrong: the team chose None (gold B)")


# ---------------------------------------------------------------------- data plumbing
def test_examples_from_questions(examples):
    assert set(examples[0].inputs().keys()) == {"question", "options", "context"}
    assert examples[0].answer == "B" and examples[0].labels().answer == "B"
    with pytest.raises(DataError, match="no gold answer"):
        examples_from_questions([Question(id="x", question="?", options={"A": "a", "B": "b"})])


def test_split_is_disjoint_deterministic_and_order_free():
    train, val, test = split_questions(QUESTIONS, train=2, val=2, test=1, seed=3)
    ids = [q.id for q in train + val + test]
    assert len(set(ids)) == 5
    again = split_questions(list(reversed(QUESTIONS)), train=2, val=2, test=1, seed=3)
    assert [[q.id for q in part] for part in again] == [[q.id for q in part] for part in (train, val, test)]
    assert split_questions(QUESTIONS, train=2, val=2, test=1, seed=4) != (train, val, test)
    with pytest.raises(ConfigError, match="needs 6 questions but only 5"):
        split_questions(QUESTIONS, train=3, val=2, test=1, seed=0)


def test_unknown_optimizer_suggests_the_nearest(examples):
    assert OPTIMIZERS == {"labeled", "bootstrap", "random-search", "mipro", "gepa"}
    with pytest.raises(ConfigError, match="Did you mean 'mipro'"):
        compile_program(TeamworkProgram(CONFIG), optimizer="mirpo", trainset=examples, valset=examples,
                        lm=ScriptedLM())


def test_evaluate_scores_each_example_with_its_accounting(examples):
    oracle = ScriptedLM(planted(oracle=True))
    accuracy, rows = evaluate(TeamworkProgram(CONFIG), examples, oracle, num_threads=3)
    assert accuracy == 1.0 and [r.id for r in rows] == [q.id for q in QUESTIONS]
    assert all(r.calls > 0 and r.prompt_tokens + r.completion_tokens > 0 and not r.failed for r in rows)


# ---------------------------------------------------------------------- compiling
def test_bootstrap_with_a_teacher_improves_the_planted_metric(examples):
    student, lm = TeamworkProgram(CONFIG), ScriptedLM(planted())
    before, _ = evaluate(student, examples, lm)
    compiled = compile_program(student, optimizer="bootstrap", trainset=examples[:3], valset=examples[3:],
                               lm=lm, teacher_lm=ScriptedLM(planted(oracle=True)), max_demos=2)
    after, _ = evaluate(compiled, examples, lm)
    assert (before, after) == (0.0, 1.0)
    assert compiled is not student and set(demo_counts(student).values()) == {0}
    assert demo_counts(compiled)["discussion.final.predict"] == 2


def test_labeled_attaches_k_demos_to_every_predictor(examples):
    student = TeamworkProgram(CONFIG)
    compiled = compile_program(student, optimizer="labeled", trainset=examples[:3], valset=examples[3:],
                               lm=ScriptedLM(), max_demos=2)
    assert set(demo_counts(compiled).values()) == {2} and set(demo_counts(student).values()) == {0}


def test_random_search_keeps_the_best_candidate(examples):
    compiled = compile_program(TeamworkProgram(CONFIG), optimizer="random-search", trainset=examples[:3],
                               valset=examples[3:], lm=ScriptedLM(planted()),
                               teacher_lm=ScriptedLM(planted(oracle=True)), num_candidates=1, max_demos=1)
    assert evaluate(compiled, examples, ScriptedLM(planted()))[0] == 1.0


def test_gepa_adopts_a_reflected_instruction_that_helps(examples):
    lm = ScriptedLM(planted())
    compiled = compile_program(TeamworkProgram(TeamworkConfig(n_agents=2)), optimizer="gepa",
                               trainset=examples[:3], valset=examples[3:], lm=lm, reflection_lm=lm, auto=None,
                               max_metric_calls=40)
    instructions = {name: p.signature.instructions for name, p in compiled.named_predictors()}
    assert instructions["discussion.final.predict"] == HINT
    assert evaluate(compiled, examples, lm)[0] == 1.0


def test_mipro_runs_on_a_tiny_budget(examples):
    student = TeamworkProgram(TeamworkConfig(n_agents=2))
    compiled = compile_program(student, optimizer="mipro", trainset=examples[:3], valset=examples[3:],
                               lm=ScriptedLM(planted()), teacher_lm=ScriptedLM(planted(oracle=True)),
                               auto=None, num_candidates=2, num_trials=2, max_demos=1)
    assert compiled is not student
    assert demo_counts(compiled).keys() == demo_counts(student).keys()


# ---------------------------------------------------------------------- saving and loading
@pytest.fixture
def compiled(examples) -> dspy.Module:
    program = compile_program(TeamworkProgram(CONFIG), optimizer="bootstrap", trainset=examples[:3],
                              valset=examples[3:], lm=ScriptedLM(planted()),
                              teacher_lm=ScriptedLM(planted(oracle=True)), max_demos=2)
    mediate = program.leader.mediate.predict
    mediate.signature = mediate.signature.with_instructions("Mediate briefly; name the key disagreement.")
    return program


def test_save_load_round_trip_keeps_demos_and_instructions(tmp_path, compiled, examples):
    path = save_program(compiled, tmp_path / "program.json", system="teamwork", config=CONFIG,
                        meta={"optimizer": "bootstrap", "dataset": "planted", "score_before": 0.0,
                              "score_after": 1.0})
    document = json.loads(path.read_text())["teammed"]
    assert document["format"] == "teammed-program/2" and document["config"] == CONFIG.model_dump(mode="json")
    assert document["behaviours"] == sorted(n for n, _ in compiled.named_predictors())
    loaded, meta = load_program(path, config=CONFIG)
    assert meta["optimizer"] == "bootstrap" and meta["dspy_version"] == dspy.__version__
    assert "created" not in meta  # no timestamp: an identical compile writes identical bytes
    assert loaded.dump_state() == compiled.dump_state()
    instructions = loaded.leader.mediate.predict.signature.instructions
    assert instructions == "Mediate briefly; name the key disagreement."
    assert demo_counts(loaded) == demo_counts(compiled)
    assert evaluate(loaded, examples, ScriptedLM(planted()))[0] == 1.0
    assert load_program(path)[0].config == CONFIG  # no config asked for: the compiled one is used


def test_loading_into_another_config_names_both(tmp_path, compiled):
    path = save_program(compiled, tmp_path / "p.json", system="teamwork", config=CONFIG, meta={})
    asked = TeamworkConfig(leadership=True, trust=True, n_agents=3)
    with pytest.raises(ProgramMismatchError) as caught:
        load_program(path, config=asked)
    message = str(caught.value)
    assert "compiled for [leadership] (n_agents=2, n_turns=2" in message
    assert "but [leadership, trust] (n_agents=3, n_turns=2" in message
    assert "omit the config flags" in message and "recompile" in message


def test_loading_another_system_is_refused(tmp_path, compiled):
    path = save_program(compiled, tmp_path / "p.json", system="teamwork", config=CONFIG, meta={})
    with pytest.raises(ProgramMismatchError, match="system 'teamwork', but 'single' was requested"):
        load_program(path, system="single", build=lambda: dspy.Predict("question -> answer"))


def test_non_teamwork_systems_load_through_build(tmp_path):
    program = dspy.Predict("question -> answer")
    program.demos = [dspy.Example(question="2+2?", answer="4")]
    path = save_program(program, tmp_path / "single.json", system="single", config=None,
                        meta={"optimizer": "x"})
    loaded, _ = load_program(path, system="single", build=lambda: dspy.Predict("question -> answer"))
    assert loaded.demos[0]["answer"] == "4"
    with pytest.raises(ConfigError, match="needs build="):
        load_program(path, system="single")


def test_labeled_is_refused_where_it_would_change_nothing(tmp_path, capsys):
    """Labeled demos carry question/options/answer only; DSPy drops a demo with none of a predictor's
    outputs, so for `base` teamwork the "compiled" program was the uncompiled one under a new name."""
    from teammed.adapter import SchemaAdapter
    from teammed.cli import main

    out = tmp_path / "p.json"
    assert main(["compile", "--dataset", "demo", "--optimizer", "labeled", "--train", "2", "--val", "2", "--test",
                 "2", "--model", "scripted", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "would change nothing" in err and "--optimizer bootstrap" in err and "accuracy before" not in err
    assert not out.exists()
    # a system whose predictor outputs the answer keeps labeled demos in its prompt
    assert main(["compile", "--dataset", "demo", "--system", "cot", "--optimizer", "labeled", "--train", "2",
                 "--val", "2", "--test", "2", "--model", "scripted", "--out", str(out)]) == 0
    from teammed.programs.load import load_program

    predictor = load_program(out)[0].predictors()[0]
    messages = SchemaAdapter().format(predictor.signature, predictor.demos,
                                      {"question": "q?", "options": {"A": "x", "B": "y"}})
    assert predictor.demos and len(messages) > 2  # the demos are in the prompt


def test_the_same_bootstrap_compile_twice_writes_the_same_bytes(tmp_path, capsys):
    """Same command, data, seed and backend answers, several questions in flight: the same sha256."""
    import hashlib

    from teammed.cli import main

    digests = []
    for k in (1, 2):
        out = tmp_path / f"p{k}.json"
        assert main(["compile", "--dataset", "demo", "--split", "all", "--optimizer", "bootstrap", "--train", "8",
                     "--val", "4", "--test", "4", "--model", "simulated:3", "--concurrency", "4", "--out", str(out),
                     "--no-cache"]) == 0, capsys.readouterr().err
        digests.append(hashlib.sha256(out.read_bytes()).hexdigest())
    assert digests[0] == digests[1]


@pytest.mark.parametrize("preset_name", ["leadership", "all", "trust"])
def test_the_same_bootstrap_compile_of_a_parallel_preset_writes_the_same_bytes(tmp_path, monkeypatch, capsys,
                                                                               preset_name):
    """Issue 32: a preset whose calls run side by side (three assessments, the leader's background
    calls) gave a different program per run, its demos taken from traces in thread order. Cold
    response cache, then warm: the same bytes, and the program has demos (else the test shows nothing)."""
    import hashlib

    from teammed.cli import main
    from teammed.programs.load import load_program
    from tests.fake_openai import FakeOpenAI
    from tests.schema_fake import handler

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("TEAMMED_CACHE_DIR", str(tmp_path / "cache"))
    digests = []
    with FakeOpenAI(handler) as server:
        for k in (1, 2):
            out = tmp_path / f"p{k}.json"
            assert main(["compile", "--dataset", "demo", "--split", "all", "--optimizer", "bootstrap", "--preset",
                         preset_name, "--train", "8", "--val", "4", "--test", "4", "--model", "openai/x",
                         "--api-base", server.api_base, "--out", str(out)]) == 0, capsys.readouterr().err
            digests.append(hashlib.sha256(out.read_bytes()).hexdigest())
    assert digests[0] == digests[1]
    assert any(p.demos for p in load_program(tmp_path / "p1.json")[0].predictors())
