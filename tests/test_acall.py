"""A system's ``acall`` runs its ``forward`` on one of the process's workers and awaits it
(`teammed.interrupts.in_worker`): the same calls, records and usage as ``__call__``, errors where a
coroutine would have them, a cancellation that stops the work at its next LM call, and context
variables that follow the work."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time

import dspy
import pytest

from teammed import interrupts, usage
from teammed.adapter import SchemaAdapter
from teammed.backends import ScriptedLM
from teammed.config import TeamworkConfig
from teammed.programs import TeamworkProgram, build_system
from teammed.programs.parallel import parallel_map
from tests.fake_openai import FakeOpenAI
from tests.helpers import OPTIONS, QUESTION, run
from tests.test_accounting import SUBSETS

_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("bridge_test", default="unset")


def _arun(program: dspy.Module, responder=None):  # type: ignore[no-untyped-def]
    """`tests.helpers.run` through ``await program.acall(...)``."""
    lm = ScriptedLM(responder)

    async def go():  # type: ignore[no-untyped-def]
        with dspy.context(lm=lm, adapter=SchemaAdapter()), usage.track() as u:
            prediction = await program.acall(question=QUESTION, options=OPTIONS)
        return prediction, u

    prediction, u = asyncio.run(go())
    return prediction, u, lm


def _calls(lm: ScriptedLM) -> list[tuple[str, str]]:
    return sorted((c.signature, repr(sorted(c.inputs.items()))) for c in lm.calls)


@pytest.mark.parametrize("values", SUBSETS[::3], ids=lambda v: "+".join(k for k, on in v.items() if on) or "none")
def test_acall_makes_the_same_calls_and_record_as_call_for_component_subsets(values):
    config = TeamworkConfig(**values, n_agents=3, n_turns=2)
    sync_prediction, sync_usage, sync_lm = run(TeamworkProgram(config))
    prediction, u, lm = _arun(TeamworkProgram(config))
    record = prediction.record.model_dump(mode="json")
    assert record == sync_prediction.json_record
    assert u.calls == sync_usage.calls == len(lm.calls)
    assert _calls(lm) == _calls(sync_lm)  # the same calls with the same inputs


@pytest.mark.parametrize("system", ["mdagents", "kamac", "consultation", "majority_vote", "cot"])
def test_acall_of_a_peer_system_matches_its_call(system, caplog):
    sync_prediction, sync_usage, sync_lm = run(build_system(system))
    with caplog.at_level(logging.WARNING):
        prediction, u, lm = _arun(build_system(system))
    assert "discouraged" not in caplog.text  # DSPy's warning for a forward called outside __call__
    assert prediction.answer == sync_prediction.answer
    assert u.calls == sync_usage.calls
    assert _calls(lm) == _calls(sync_lm)


def test_an_agent_failing_under_acall_fails_the_call_after_its_teammates_are_asked():
    def responder(call):  # type: ignore[no-untyped-def]
        if call.signature == "InitialAssessment" and str(call.inputs.get("role", "")).endswith("2"):
            raise RuntimeError("agent 2's call failed")
        return None

    with pytest.raises(RuntimeError, match="agent 2"):
        run(TeamworkProgram(TeamworkConfig(n_agents=3)), responder)
    with pytest.raises(RuntimeError, match="agent 2"):
        _arun(TeamworkProgram(TeamworkConfig(n_agents=3)), responder)


def _garbled(call):  # type: ignore[no-untyped-def]
    return "not json at all"  # every ranking falls back: the team has no answer


def test_a_failing_deliberation_makes_the_same_calls_fanned_out_in_turn_and_under_acall():
    """The last turn's mediation is started beside the decision, which then fails (no agent gave a
    ranking): it runs, and is counted, in every mode (on the workers it used to be cancelled when
    no worker had picked it up yet, a race)."""
    from teammed.errors import NoAnswerError
    from teammed.programs.parallel import calls_in_turn

    config = TeamworkConfig(n_agents=3, leadership=True)
    counts = []
    for mode in ("fanned out", "in turn", "acall"):
        for _ in range(3):
            lm = ScriptedLM(_garbled)
            with dspy.context(lm=lm, adapter=SchemaAdapter()), usage.track() as u, pytest.raises(NoAnswerError):
                if mode == "acall":
                    asyncio.run(TeamworkProgram(config).acall(question=QUESTION, options=OPTIONS))
                else:
                    with calls_in_turn(mode == "in turn"):
                        TeamworkProgram(config)(question=QUESTION, options=OPTIONS)
            counts.append((u.calls, sum(c.signature == "Mediation" for c in lm.calls)))
    assert len(set(counts)) == 1 and counts[0][1] == 2, counts


def test_context_follows_the_work_into_the_worker_and_its_side_calls_and_changes_inside_stay_inside():
    def inner(_: int) -> str:
        seen = _VAR.get()
        _VAR.set("changed inside")
        return seen

    def outer() -> tuple[str, list[str], str]:
        seen = _VAR.get()
        items = parallel_map(inner, [1, 2])
        return seen, items, _VAR.get()

    async def go():  # type: ignore[no-untyped-def]
        _VAR.set("caller")
        result = await interrupts.in_worker(outer)
        return result, _VAR.get()

    (seen, items, after), caller_after = asyncio.run(go())
    assert seen == "caller" and items == ["caller", "caller"] and after == "caller"
    assert caller_after == "caller"


def test_an_error_under_acall_keeps_the_frames_where_it_was_raised():
    import traceback

    def deep() -> None:
        raise ValueError("raised deep inside")

    def body() -> None:
        deep()

    with pytest.raises(ValueError) as caught:
        asyncio.run(interrupts.in_worker(body))
    frames = [f.name for f in traceback.extract_tb(caught.value.__traceback__)]
    assert "deep" in frames and "body" in frames


def test_a_cancelled_acall_returns_at_once_and_its_work_makes_no_further_call():
    """``asyncio.wait_for`` around a deliberation whose server is slow once round 2 is in, while the
    leader's facts, report and grades run side by side: the caller gets its timeout at once; the
    three requests in flight end on their threads, and the deliberation then stops at its next
    call instead of going on to the decision."""
    from tests import schema_fake
    from tests.test_transport_http import _lm

    config = TeamworkConfig(n_agents=3, leadership=True, shared_mental_model=True, team_orientation=True,
                            trust=True)

    async def go(lm) -> float:  # type: ignore[no-untyped-def]
        started = time.monotonic()
        with dspy.context(lm=lm, adapter=SchemaAdapter()):
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(TeamworkProgram(config).acall(question="q? Key: A",
                                                                     options={"A": "a", "B": "b"}), 1.0)
        return time.monotonic() - started

    def handler(n, body):  # type: ignore[no-untyped-def]
        return schema_fake.handler(n, body) if n <= 5 else 2.0  # recruitment and round 2 answer at once

    with FakeOpenAI(handler) as server:
        took = asyncio.run(go(_lm(server.api_base, timeout_s=60.0)))
        assert len(server.requests) == 8  # the leader's three calls were in flight side by side
        time.sleep(3.0)  # they end (the slow answers come), and nothing follows them
        assert len(server.requests) == 8
    assert took < 2.0, took


def test_an_lms_acall_runs_on_a_worker_and_is_counted_as_its_call_is():
    from tests import schema_fake
    from tests.test_transport_http import _lm

    callers: list[str] = []
    with FakeOpenAI(schema_fake.handler) as server:
        lm = _lm(server.api_base)
        complete = type(lm).complete

        def spy(self, messages, **params):  # type: ignore[no-untyped-def]
            import threading

            callers.append(threading.current_thread().name)
            return complete(self, messages, **params)

        type(lm).complete = spy  # type: ignore[method-assign]
        try:
            with usage.track() as u:
                outputs = asyncio.run(lm.acall(messages=[{"role": "user", "content": "hi"}]))
        finally:
            type(lm).complete = complete  # type: ignore[method-assign]
    assert outputs and len(server.requests) == 1 and u.calls == 1
    assert callers == ["teammed-worker"]
