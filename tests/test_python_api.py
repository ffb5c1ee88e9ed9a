"""The README's Python example, run as it is printed, plus the API guarantees it relies on.

A plain ``dspy.LM`` (no teammed backend) talks to a fake OpenAI-compatible server on loopback
that fills whatever JSON schema teammed asks for; ``Key: X`` in a question tells it the answer.
"""

from __future__ import annotations

import dspy
import pytest

import teammed.programs
from teammed import usage
from teammed.errors import ConfigError
from tests.fake_openai import FakeOpenAI, completion
from tests.schema_fake import handler, respond

QUESTIONS = [
    ("A 58-year-old man has crushing chest pain radiating to the left arm. Key: A", "A"),
    ("A 30-year-old woman has pleuritic pain after a long flight. Key: B", "B"),
    ("A tall man has tearing pain radiating to the back. Key: C", "C"),
    ("Sharp pain relieved by sitting forward, diffuse ST elevation. Key: D", "D"),
    ("A smoker has sudden dyspnoea and absent breath sounds on one side. Key: B", "B"),
    ("A marathon runner collapses with chest pain. Key: A", "A"),
]
OPTIONS = {"A": "Myocardial infarction", "B": "Pulmonary embolism", "C": "Aortic dissection", "D": "Pericarditis"}


def readme_example(api_base: str) -> dict:
    """The README's example, verbatim but for the model and server (here: the fake one)."""
    import dspy

    from teammed.programs import SingleAgentCoT, TeamworkProgram, preset
    from teammed.usage import track

    lm = dspy.LM("openai/fake-model", api_base=api_base, api_key="not-needed", cache=False)
    examples = [dspy.Example(question=q, options=OPTIONS, answer=a).with_inputs("question", "options")
                for q, a in QUESTIONS]
    trainset, devset = examples[:2], examples[2:]

    def correct(example, prediction, trace=None):
        return prediction.answer == example.answer

    team = TeamworkProgram(preset("leadership"))
    with dspy.context(lm=lm):
        evaluate = dspy.Evaluate(devset=devset, metric=correct, num_threads=2, max_errors=1)
        before = evaluate(team)
        compiled = dspy.LabeledFewShot(k=2).compile(team, trainset=trainset)
        after = evaluate(compiled)
        with track() as used:
            prediction = compiled(question=QUESTIONS[0][0], options=OPTIONS)
        cot = dspy.BootstrapFewShot(metric=correct, max_bootstrapped_demos=1).compile(
            SingleAgentCoT(), trainset=trainset)
        cot_score = evaluate(cot)
    return {"before": before.score, "after": after.score, "answer": prediction.answer, "calls": used.calls,
            "tokens": (used.prompt_tokens, used.completion_tokens), "by": dict(used.calls_by_signature),
            "cot": cot_score.score, "compiled": compiled}


def test_readme_example_runs_on_a_plain_dspy_lm():
    with FakeOpenAI(handler) as server:
        result = readme_example(server.api_base)
        requests = list(server.requests)
    assert result["before"] == 100.0 and result["after"] == 100.0 and result["cot"] == 100.0
    assert result["answer"] == "A"
    # usage tracking under a plain dspy.LM: one call per request, tokens as the server reported them
    assert result["calls"] > 0 and sum(result["by"].values()) == result["calls"]
    assert "InitialAssessment" in result["by"] and "Mediation" in result["by"]
    assert result["tokens"][1] == 10 * result["calls"]
    # schema-constrained output with no adapter configured: every request carried the schema
    assert all(r.get("response_format", {}).get("type") == "json_schema" for r in requests)
    # LabeledFewShot's demos reached the compiled program
    demos = [len(p.demos) for _, p in result["compiled"].named_predictors()]
    assert demos and all(n == 2 for n in demos)


def test_exports_are_importable_and_listed():
    assert len(teammed.programs.__all__) == len(set(teammed.programs.__all__))
    for name in teammed.programs.__all__:
        assert getattr(teammed.programs, name) is not None, name
    with pytest.raises(AttributeError):
        teammed.programs.NoSuchThing  # noqa: B018


def test_a_garbled_reply_is_counted_and_never_becomes_a_silent_answer_under_a_plain_lm():
    def garble_first(n, request):
        text = "I think the answer is B" if n == 1 else respond(request)
        return 200, {}, completion(text)

    from teammed.errors import NoAnswerError
    from teammed.programs import ZeroShot

    with FakeOpenAI(garble_first) as server:
        lm = dspy.LM("openai/fake-model", api_base=server.api_base, api_key="x", cache=False)
        with dspy.context(lm=lm), usage.track() as used:
            try:  # the adapter never raises; the system either read a letter or says it has none
                prediction = ZeroShot()(question="Q? Key: B", options=OPTIONS)
            except NoAnswerError as exc:
                assert "names no option" in str(exc)
            else:
                assert prediction.answer == "B"
    assert used.calls == 1 and used.repaired + used.parse_failures == 1


def test_usage_counts_a_dspy_cache_hit_without_tokens(tmp_path):
    from teammed.programs import ZeroShot

    previous = dspy.cache
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=True)
    try:
        with FakeOpenAI(handler) as server:
            lm = dspy.LM("openai/fake-model-cached", api_base=server.api_base, api_key="x")
            with dspy.context(lm=lm), usage.track() as first:
                ZeroShot()(question="Q cached? Key: C", options=OPTIONS)
            with dspy.context(lm=lm), usage.track() as second:
                ZeroShot()(question="Q cached? Key: C", options=OPTIONS)
            served = len(server.requests)
    finally:
        dspy.cache = previous
    assert served == 1
    assert first.calls == 1 and first.prompt_tokens == 101 and first.cache_hits == 0
    assert second.calls == 1 and second.cache_hits == 1 and second.prompt_tokens == 0


def test_spans_name_the_behaviour_not_behaviour_forward():
    from dspy.utils.callback import BaseCallback

    from teammed.programs import Behaviour, ConsensusVote

    class Spans(BaseCallback):
        def __init__(self):
            self.names = []

        def on_module_start(self, call_id, instance, inputs):
            self.names.append(f"{type(instance).__name__}.forward")

    spans = Spans()
    with FakeOpenAI(handler) as server:
        lm = dspy.LM("openai/fake-model", api_base=server.api_base, api_key="x", cache=False)
        with dspy.context(lm=lm, callbacks=[spans]):
            ConsensusVote(n_experts=2)(question="Q? Key: A", options=OPTIONS)
    assert "IndependentVote.forward" in spans.names
    assert "Behaviour.forward" not in spans.names
    program = ConsensusVote(n_experts=2)
    assert all(isinstance(m, Behaviour) for m in (program.vote, program.revise))
    assert type(program.deepcopy().vote).__name__ == "IndependentVote"


@pytest.mark.parametrize("options, fragment", [
    ({"A": "x", "B": "y", "C": None}, "option C is empty"),
    ({"A": "x", "B": "y", "C": "  "}, "option C is empty"),
    ({"A": "x", "B": float("nan")}, "option B is empty"),
    ({"A": "x"}, "at least two options"),
    ({}, "at least two options"),
    ({"A": "x", "C": "y"}, "lettered A, B in order"),
    (["x", "y"], "must be a mapping"),
])
def test_options_are_validated_by_every_system(options, fragment):
    from teammed.programs import SingleAgentCoT, TeamworkProgram

    for program in (TeamworkProgram(), SingleAgentCoT()):
        with pytest.raises(ConfigError, match=fragment):
            program(question="Q?", options=options)


def test_usage_is_tracked_under_the_users_own_adapter():
    from teammed.programs import ZeroShot

    def plain_json(n, request):
        return 200, {}, completion('{"answer": "B", "confidence": "High"}', prompt_tokens=50 + n)

    with FakeOpenAI(plain_json) as server:
        lm = dspy.LM("openai/fake-model", api_base=server.api_base, api_key="x", cache=False)
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), usage.track() as used:
            prediction = ZeroShot()(question="Q?", options=OPTIONS)
        requests = len(server.requests)
    assert prediction.answer == "B"
    assert used.calls == requests >= 1 and used.calls_by_signature == {"DirectAnswer": requests}
    assert used.prompt_tokens == sum(50 + n for n in range(1, requests + 1)) and used.completion_tokens == 7 * requests


def test_the_text_none_is_a_valid_option():
    from teammed.programs import validated_options

    assert validated_options({"A": "Surgery", "B": " None "}) == {"A": "Surgery", "B": "None"}


def test_acall_under_a_plain_dspy_lm_is_counted_as_call_is():
    """A plain ``dspy.LM`` under ``acall``: the same calls and tokens in `Usage` as under ``__call__``."""
    import asyncio

    from teammed.programs import TeamworkProgram, preset

    def answered(asynchronous: bool):  # type: ignore[no-untyped-def]
        team = TeamworkProgram(preset("leadership"))
        with FakeOpenAI(handler) as server:  # a fresh server: its prompt tokens count its requests
            lm = dspy.LM("openai/fake-model", api_base=server.api_base, api_key="x", cache=False)

            async def go():  # type: ignore[no-untyped-def]
                return await team.acall(question="Q? Key: B", options=OPTIONS)

            with dspy.context(lm=lm), usage.track() as used:
                prediction = asyncio.run(go()) if asynchronous else team(question="Q? Key: B", options=OPTIONS)
        return prediction, used

    expected, sync_used = answered(False)
    prediction, used = answered(True)
    assert prediction.answer == expected.answer == "B"
    assert used.calls == sync_used.calls > 0
    assert used.calls_by_signature == sync_used.calls_by_signature
    assert (used.prompt_tokens, used.completion_tokens) == (sync_used.prompt_tokens, sync_used.completion_tokens)
