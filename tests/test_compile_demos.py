"""Issue 23.6: `compile` never keeps a demo built from a fallback or a repaired output.

Under partial garbage (prose, an empty reply, ``null``, wrong field names) the adapter repairs an
output or fills it with fallback values; the team can still reach the right answer, and DSPy's
bootstrapping used to keep every step of such a trace as a demo, e.g.
``discuss {'message': '', 'current_choice': ''}``.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import dspy

from teammed.backends import ScriptedCall, ScriptedLM
from teammed.cli import main
from teammed.config import TeamworkConfig
from teammed.optimizers import compile_program, examples_from_questions
from teammed.optimizers._demos import DegradedOutputs, drop_unsound_demos, fits_schema
from teammed.programs.teamwork import TeamworkProgram
from teammed.types import Question
from tests import schema_fake
from tests.fake_openai import FakeOpenAI, completion

LETTERS = "ABCD"
QUESTIONS = [
    Question(id=f"q{i}", question=f"Case {i}: a patient presents with finding {i}. Most likely diagnosis? Key: {gold}",
             options={"A": "alpha", "B": "beta", "C": "gamma", "D": "delta"}, answer_idx=gold)
    for i, gold in enumerate("BCDBCABDCA")
]
GOLD = {q.question: q.answer_idx for q in QUESTIONS}
# What a model answering 30% of its calls badly sends: prose, nothing, null, the wrong fields.
GARBAGE = ["I think the answer is probably B, given the findings.", "", "null", json.dumps({"wrong": "field"})]


def _garbled(text: str) -> str | None:
    """One of `GARBAGE` for 30% of the calls (decided by the call's text, so threads do not matter)."""
    key = zlib.crc32(text.encode())
    return GARBAGE[key % 4] if key % 10 < 3 else None


def _respond(call: ScriptedCall) -> Any:
    garbage = _garbled(json.dumps(call.messages, sort_keys=True, default=str))
    if garbage is not None:
        return garbage
    gold = GOLD.get(call.inputs.get("question"))
    if gold and call.signature in ("FinalRanking", "InitialAssessment"):
        return {"ranking": [gold] + [x for x in LETTERS if x != gold], "confidence": "High",
                "justification": "The finding points there.", "facts": ["a fact", "another fact"]}
    if gold and call.signature == "DiscussionTurn":
        return {"current_choice": gold, "message": f"I hold {gold}."}
    return None  # a schema-valid default ("noted", first choices)


def _bad_demos(program: dspy.Module) -> list[str]:
    """The bootstrapped demos holding an empty or fallback output, or one that breaks its schema."""
    bad = []
    for name, predictor in program.named_predictors():
        for demo in predictor.demos:
            if not demo.get("augmented"):
                continue  # labelled demos come from the data set, not from a model's output
            outputs = {k: demo.get(k) for k in predictor.signature.output_fields}
            empty = [k for k, v in outputs.items() if v in ("", [], None)]
            if empty or not fits_schema(predictor.signature, dict(demo.items())):
                bad.append(f"{name} {outputs}")
    return bad


def test_bootstrap_under_partial_garbage_keeps_no_fallback_or_repaired_demo():
    examples = examples_from_questions(QUESTIONS)
    lm = ScriptedLM(_respond)
    compiled = compile_program(TeamworkProgram(TeamworkConfig(leadership=True, n_agents=2)), optimizer="bootstrap",
                               trainset=examples[:6], valset=examples[6:], lm=lm, max_demos=4)
    garbled = sum(_garbled(json.dumps(c.messages, sort_keys=True, default=str)) is not None for c in lm.calls)
    assert garbled >= 5  # the garbage really reached the adapter
    demos = [d for _, p in compiled.named_predictors() for d in p.demos if d.get("augmented")]
    assert len(demos) >= 8  # the clean steps still make demos
    assert _bad_demos(compiled) == []


def test_a_demo_the_program_had_to_repair_is_dropped():
    """A ranking naming a letter twice parses cleanly but is repaired by the program: its demo goes too."""
    program = TeamworkProgram(TeamworkConfig(n_agents=2))
    name, predictor = next((n, p) for n, p in program.named_predictors() if n == "discussion.final.predict")
    options = {"A": "alpha", "B": "beta", "C": "gamma"}
    inputs = {k: "x" for k in predictor.signature.input_fields} | {"options": options}
    good = dspy.Example(augmented=True, **inputs, ranking=["B", "A", "C"], confidence="High", rationale="r")
    twice = dspy.Example(augmented=True, **inputs, ranking=["B", "B", "C"], confidence="High", rationale="r")
    outside = dspy.Example(augmented=True, **inputs, ranking=["B", "A", "Z"], confidence="High", rationale="r")
    labelled = dspy.Example(question="q", options=options, answer="A")
    predictor.demos = [good, twice, outside, labelled]
    assert drop_unsound_demos(program, DegradedOutputs()) == {name: 2}
    assert predictor.demos == [good, labelled]


def _server_handler(n: int, request: dict[str, Any]):  # noqa: ARG001 - FakeOpenAI's handler shape
    garbage = _garbled(json.dumps(request.get("messages"), sort_keys=True))
    text = garbage if garbage is not None else schema_fake.respond(request)
    return 200, {}, completion(text, prompt_tokens=100, completion_tokens=10)


def test_teammed_compile_against_a_partly_garbage_server_saves_no_fallback_demo(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps(q.model_dump(exclude_none=True)) + "\n" for q in QUESTIONS))
    out = tmp_path / "program.json"
    with FakeOpenAI(_server_handler) as server:
        code = main(["compile", "--dataset", str(data), "--split", "all", "--optimizer", "bootstrap", "--train", "6",
                     "--val", "2", "--test", "2", "--components", "leadership", "--n-agents", "2",
                     "--concurrency", "1", "--model", "openai/fake", "--api-base", server.api_base,
                     "--out", str(out)])
        garbled = sum(_garbled(json.dumps(r.get("messages"), sort_keys=True)) is not None for r in server.requests)
    assert code == 0 and garbled >= 5
    saved = json.loads(out.read_text())
    demos = [(name, demo) for name, entry in saved.items() if isinstance(entry, dict)
             for demo in entry.get("demos", []) if demo.get("augmented")]
    assert demos
    output_names = {"message", "current_choice", "ranking", "synthesis", "flaw", "answer", "decision", "rationale",
                    "justification", "facts", "report", "confidence"}
    bad = [(name, {k: v for k, v in demo.items() if k in output_names}) for name, demo in demos
           if any(demo.get(k) in ("", [], None) for k in output_names & demo.keys() - {"flaw"})]
    assert bad == []
