"""Issue 18: the case reaches every call, every request of a deliberation starts with the same
bytes (preamble, then the case), and an invalid team size is refused.

`teammed ask --preset all --n-agents 3 --n-turns 2` runs against FakeOpenAI answering from the
response schema (`tests.schema_fake`); the requests are read as the server received them.
"""

from __future__ import annotations

import json
import os
from typing import Any

import dspy
import pytest

from teammed.adapter import CASE_FIELDS, PREAMBLE, SchemaAdapter
from teammed.cli import main
from teammed.config import TeamworkConfig
from teammed.errors import ConfigError
from teammed.signatures import InitialAssessment, Mediation, TieResolution
from tests import schema_fake
from tests.fake_openai import FakeOpenAI

STEM = "A 58-year-old man has crushing chest pain radiating to the left arm for an hour. Key: A"
OPTIONS = {"A": "Myocardial infarction", "B": "Pulmonary embolism", "C": "Aortic dissection", "D": "Pericarditis"}
OTHER = "A 24-year-old woman has a fever, neck stiffness and a petechial rash. Key: C"
OTHER_OPTIONS = {"A": "Viral meningitis", "B": "Migraine", "C": "Meningococcal meningitis", "D": "Tension headache"}


def _flat(request: dict[str, Any]) -> str:
    """The request's messages as one text, in order (what a server's prefix cache sees, role tags aside)."""
    out = []
    for m in request["messages"]:
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        out.append(f"<{m['role']}>{content}")
    return "".join(out)


def _behaviour(request: dict[str, Any]) -> str:
    return (schema_fake.schema_of(request) or {}).get("title", "?")


def _ask(question: str, options: dict[str, str], *extra: str) -> list[dict[str, Any]]:
    argv = ["ask", question, *[f"--option={k}={v}" for k, v in options.items()], "--preset", "all",
            "--n-agents", "3", "--n-turns", "2", "--no-cache", "--model", "openai/fake", *extra]
    with FakeOpenAI(schema_fake.handler) as server:
        code = main([*argv, "--api-base", server.api_base])
        requests = list(server.requests)
    assert code == 0
    return requests


@pytest.fixture(scope="module")
def deliberations() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    old = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = "sk-test"
    try:
        return _ask(STEM, OPTIONS), _ask(OTHER, OTHER_OPTIONS)
    finally:
        if old is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = old


def _case_end(text: str, options: dict[str, str]) -> int:
    """Where the case (question, then the options one per line) ends in a request's text."""
    block = "\n".join(f"{k}. {v}" for k, v in options.items())
    return text.index(block) + len(block)


def test_every_request_carries_the_question_and_its_options(deliberations):
    requests, _ = deliberations
    behaviours = {_behaviour(r) for r in requests}
    assert len(requests) == 27  # the README's formula for `all`, N=3, T=2 (no tie with these answers)
    # every teamwork behaviour of `all` that reasons about the case, leader and closed loop included
    assert {"ConsensusFacts", "FormalReport", "AssessmentQuality", "Mediation", "WeakestReasoning", "RaiseConcern",
            "RespondToConcern", "EvaluateResponse", "CorrectionAuthority", "Acknowledge", "VerifyUnderstanding",
            "QuestionTricks", "SpecialtyRecruitment", "InitialAssessment", "DiscussionTurn",
            "FinalRanking"} <= behaviours
    missing = [_behaviour(r) for r in requests if STEM not in _flat(r) or "D. Pericarditis" not in _flat(r)]
    assert missing == []


def test_every_request_of_a_deliberation_starts_with_preamble_then_case(deliberations):
    requests, _ = deliberations
    texts = [_flat(r) for r in requests]
    shared = os.path.commonprefix(texts)
    # the shared prefix runs through the whole case: preamble, question, every option
    assert shared.startswith(f"<system>{PREAMBLE}<user>")
    assert len(shared) >= _case_end(texts[0], OPTIONS), shared[-200:]
    for request in requests:
        assert request["messages"][0] == {"role": "system", "content": PREAMBLE}
    # and nothing behaviour-specific comes before the case: no instruction, no field list, no JSON template
    for request, text in zip(requests, texts, strict=True):
        head = text[: _case_end(text, OPTIONS)]
        boilerplate = [w for w in ("[[ ## task ## ]]", "output fields", "JSON") if w in head]
        assert boilerplate == [], _behaviour(request)


def test_two_behaviours_and_two_questions_share_everything_before_the_case(deliberations):
    first, second = deliberations
    by_name = {_behaviour(r): _flat(r) for r in first}
    mediation, assessment = by_name["Mediation"], by_name["InitialAssessment"]
    end = _case_end(mediation, OPTIONS)
    assert mediation[:end] == assessment[:end]
    assert mediation[end:] != assessment[end:]  # the behaviours' own parts follow
    # across questions the preamble and the layout up to the question's text are the same bytes
    other = {_behaviour(r): _flat(r) for r in second}["Mediation"]
    assert mediation.index(STEM) == other.index(OTHER)
    assert mediation[: mediation.index(STEM)] == other[: other.index(OTHER)]
    assert other[: _case_end(other, OTHER_OPTIONS)].endswith("D. Tension headache")


def test_option_letters_stay_restricted_to_the_questions(deliberations):
    requests, _ = deliberations
    for request in requests:
        schema = schema_fake.schema_of(request)
        if _behaviour(request) == "InitialAssessment":
            assert schema["properties"]["ranking"]["items"]["enum"] == ["A", "B", "C", "D"]
            assert schema["properties"]["ranking"]["minItems"] == 4


def _inputs(signature: type[dspy.Signature], **given: Any) -> dict[str, Any]:
    return {k: given.get(k, f"{k} text") for k in signature.input_fields}


def test_a_compiled_instruction_and_demos_come_after_the_shared_prefix():
    """What an optimizer changes (instruction, demos) sits in the behaviour's part, after the case."""
    adapter = SchemaAdapter()
    case = {"question": STEM, "options": OPTIONS}
    plain = adapter.format(InitialAssessment, [], _inputs(InitialAssessment, **case), compact=True)
    compiled = Mediation.with_instructions("A rewritten instruction from GEPA.")
    demo = dspy.Example(question=OTHER, options=OTHER_OPTIONS, turn_messages="agent_1 favours C",
                        shared_context="", synthesis="The team agrees on C.")
    tuned = adapter.format(compiled, [demo], _inputs(compiled, **case), compact=True)
    a, b = _flat({"messages": plain}), _flat({"messages": tuned})
    end = _case_end(a, OPTIONS)
    assert a[:end] == b[:end]
    task = b.index("[[ ## task ## ]]")
    assert task > end and b.index("A rewritten instruction from GEPA.") > task
    assert end < b.index(OTHER) < b.index("[[ ## turn_messages ## ]]")  # the demo: after the task, before the inputs
    assert '"synthesis": "The team agrees on C."' in b
    assert len(tuned) == 2  # one system, one user message: no role alternation a chat template could refuse


def test_the_case_fields_come_first_in_a_fixed_order_whatever_the_signature_order():
    adapter = SchemaAdapter()
    tie = adapter.format(TieResolution, [], _inputs(TieResolution, question=STEM, options=OPTIONS,
                                                    tied_options={"A": OPTIONS["A"], "B": OPTIONS["B"]}), compact=True)
    user = tie[1]["content"]
    assert CASE_FIELDS[:2] == ("question", "options")
    assert user.startswith(f"[[ ## question ## ]]\n{STEM}\n\n[[ ## options ## ]]\nA. Myocardial infarction\n")
    assert user.index("[[ ## tied_options ## ]]") > user.index("[[ ## task ## ]]")


@pytest.mark.parametrize("bad", [5, 1, 0, "three", "3", 2.5, True, None])
def test_an_invalid_team_size_is_refused(bad):
    with pytest.raises(ConfigError, match=r"n_agents: the team size is 2, 3 or 4 clinicians.*'auto'"):
        TeamworkConfig.build(n_agents=bad)


@pytest.mark.parametrize("good", [2, 3, 4, "auto"])
def test_valid_team_sizes_are_kept(good):
    assert TeamworkConfig.build(n_agents=good).n_agents == good


@pytest.mark.parametrize("bad", [5, 1, "three"])
def test_a_special_set_with_an_invalid_team_size_is_refused_before_any_call(tmp_path, capsys, bad):
    path = tmp_path / "special.json"
    path.write_text(json.dumps({"format": "teammed-special-set/1", "config": {"leadership": True, "n_agents": bad}}))
    with FakeOpenAI(schema_fake.handler) as server:
        code = main(["ask", STEM, "--option=A=x", "--option=B=y", "--config", str(path), "--no-cache",
                     "--model", "openai/fake", "--api-base", server.api_base])
        assert server.requests == []
    assert code == 2
    err = capsys.readouterr().err
    assert "n_agents" in err and "2, 3 or 4" in err and repr(bad) in err


def test_the_embedded_llama_cpp_model_asks_for_its_prompt_cache(monkeypatch):
    import contextlib

    from teammed.backends import resolve

    with FakeOpenAI(schema_fake.handler) as server:
        class Server:  # stands in for the llama.cpp server process
            model_path = "SmolLM2.gguf"
            api_base = server.api_base

            def __init__(self, *args: Any) -> None:
                pass

            def __enter__(self) -> Server:
                return self

            def __exit__(self, *exc: object) -> None:
                pass

        monkeypatch.setattr(resolve, "LocalServer", Server)
        with contextlib.ExitStack() as stack:
            lm, _ = resolve.open_lm("local", resolve.BackendOptions(), stack=stack)
            lm(messages=[{"role": "user", "content": "hi"}])
        assert server.requests and all(r.get("cache_prompt") is True for r in server.requests)


def test_a_program_compiled_before_the_case_was_added_loads_each_field_by_its_own_prefix():
    """DSPy restores field descriptions by position; the two new inputs would shift them all."""
    from teammed.programs.behaviour import Behaviour

    old = {"demos": [], "lm": None, "traces": [], "train": [], "signature": {
        "instructions": "A tuned mediation instruction.",
        "fields": [{"prefix": "Turn Messages:", "description": "Tuned: what each clinician said."},
                   {"prefix": "Shared Context:", "description": "Tuned: what the team knows."},
                   {"prefix": "Synthesis:", "description": "Tuned: under 30 words."}]}}
    behaviour = Behaviour(Mediation)
    behaviour.predict.load_state(old)
    fields = behaviour.predict.signature.fields
    assert behaviour.predict.signature.instructions == "A tuned mediation instruction."
    assert fields["turn_messages"].json_schema_extra["desc"] == "Tuned: what each clinician said."
    assert fields["synthesis"].json_schema_extra["desc"] == "Tuned: under 30 words."
    assert fields["options"].json_schema_extra["desc"] == "Answer options keyed by letter."
    assert fields["question"].json_schema_extra["prefix"] == "Question:"
    # a file saved now round-trips unchanged
    again = Behaviour(Mediation)
    again.predict.load_state(behaviour.predict.dump_state())
    assert again.predict.signature.dump_state() == behaviour.predict.signature.dump_state()
