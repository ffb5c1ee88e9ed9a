"""A system's ``acall`` runs its deliberation on the caller's event loop (`teammed.async_bridge`):
the same calls, records and usage as ``__call__``, errors and cancellations where a coroutine
would have them, and context variables that follow the work."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time

import dspy
import pytest

from teammed import usage
from teammed.adapter import SchemaAdapter
from teammed.async_bridge import await_only, bridged, run_sync
from teammed.backends import ScriptedLM
from teammed.config import TeamworkConfig
from teammed.programs import TeamworkProgram, build_system
from teammed.programs.parallel import Background, parallel_map
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


def test_parallel_map_on_the_loop_runs_every_item_then_raises_the_first_error_in_order():
    ran: list[int] = []

    def call(x: int) -> int:
        ran.append(x)
        await_only(asyncio.sleep(0.01 * (5 - x)))  # later items finish first
        if x in (2, 3):
            raise ValueError(f"item {x}")
        return x * 10

    async def go() -> list[int]:
        return await run_sync(parallel_map, call, [1, 4])

    assert asyncio.run(go()) == [10, 40]
    ran.clear()
    with pytest.raises(ValueError, match="item 2"):
        asyncio.run(run_sync(parallel_map, call, [1, 2, 3, 4]))
    assert sorted(ran) == [1, 2, 3, 4]


def test_parallel_map_on_the_loop_overlaps_and_keeps_max_workers():
    running, peak = [0], [0]

    def call(x: int) -> int:
        running[0] += 1
        peak[0] = max(peak[0], running[0])
        await_only(asyncio.sleep(0.05))
        running[0] -= 1
        return x

    async def go(limit: int | None) -> float:
        started = time.monotonic()
        assert await run_sync(parallel_map, call, list(range(8)), max_workers=limit) == list(range(8))
        return time.monotonic() - started

    assert asyncio.run(go(None)) < 0.3 and peak[0] == 8
    peak[0] = 0
    assert asyncio.run(go(2)) >= 0.2 and peak[0] == 2


def test_background_calls_are_tasks_of_the_loop_collected_in_any_order():
    def slow(x: int) -> int:
        await_only(asyncio.sleep(0.05))
        return x

    def deliberation() -> list[int]:
        with Background() as bg:
            futures = [bg.start(slow, x) for x in range(5)]
            return [bg.result(f) for f in reversed(futures)]

    started = time.monotonic()
    assert asyncio.run(run_sync(deliberation)) == [4, 3, 2, 1, 0]
    assert time.monotonic() - started < 0.2  # side by side, not one after another


def test_context_follows_the_work_and_changes_inside_stay_inside():
    def inner() -> str:
        seen = _VAR.get()
        _VAR.set("changed inside")
        return seen

    def outer() -> tuple[str, list[str], str]:
        assert bridged()
        seen = _VAR.get()
        items = parallel_map(lambda _: inner(), [1, 2])
        return seen, items, _VAR.get()

    async def go():  # type: ignore[no-untyped-def]
        _VAR.set("caller")
        result = await run_sync(outer)
        return result, _VAR.get()

    (seen, items, after), caller_after = asyncio.run(go())
    assert seen == "caller" and items == ["caller", "caller"] and after == "caller"
    assert caller_after == "caller"
    assert not bridged()


def test_await_only_outside_run_sync_is_refused_with_a_message():
    async def nothing() -> None:
        return None

    with pytest.raises(RuntimeError, match="outside run_sync"):
        await_only(nothing())


def test_cancelling_an_acall_stops_it_and_the_calls_it_started_beside_it_at_once():
    """``asyncio.wait_for`` around a deliberation whose server hangs once round 2 is in, while the
    leader's facts, report and grades run side by side: the caller gets its timeout at once and no
    task of the deliberation is left running."""
    from tests import schema_fake
    from tests.test_transport_http import _lm

    config = TeamworkConfig(n_agents=3, leadership=True, shared_mental_model=True, team_orientation=True,
                            trust=True)

    async def go(lm) -> tuple[float, set[asyncio.Task]]:  # type: ignore[no-untyped-def,type-arg]
        started = time.monotonic()
        with dspy.context(lm=lm, adapter=SchemaAdapter()):
            program = TeamworkProgram(config)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(program.acall(question="q? Key: A", options={"A": "a", "B": "b"}), 1.5)
        took = time.monotonic() - started
        await asyncio.sleep(0.05)
        return took, {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}

    def handler(n, body):  # type: ignore[no-untyped-def]
        return schema_fake.handler(n, body) if n <= 5 else 30.0  # recruitment and round 2 answer

    with FakeOpenAI(handler) as server:
        took, left = asyncio.run(go(_lm(server.api_base, timeout_s=60.0)))
        assert len(server.requests) == 8  # the leader's three calls were in flight side by side
    assert took < 3.0, took
    assert not left


def test_an_error_under_acall_keeps_the_frames_where_it_was_raised():
    import traceback

    def deep() -> None:
        raise ValueError("raised deep inside")

    async def failing() -> None:
        await asyncio.sleep(0)
        deep()

    def body() -> None:
        await_only(failing())

    with pytest.raises(ValueError) as caught:
        asyncio.run(run_sync(body))
    frames = [f.name for f in traceback.extract_tb(caught.value.__traceback__)]
    assert "deep" in frames and "body" in frames


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


def test_a_deliberation_still_waiting_when_asyncio_run_ends_is_unwound():
    import gc

    from teammed.async_bridge import _Bridged

    cleaned: list[str] = []

    def body() -> None:
        try:
            await_only(asyncio.sleep(30))
        finally:
            cleaned.append("finally ran")

    async def main() -> None:
        asyncio.get_running_loop().create_task(run_sync(body))  # left pending: asyncio.run cancels it
        await asyncio.sleep(0.05)

    asyncio.run(main())
    gc.collect()
    assert cleaned == ["finally ran"]
    assert not any(isinstance(o, _Bridged) and not o.dead for o in gc.get_objects())


def test_cancelling_an_acall_while_it_waits_for_its_side_calls_after_an_error_stops_them():
    """The report and grades hang, the facts call fails at once (HTTP 400): the deliberation waits
    for its side calls, and a cancellation then (``wait_for``) stops them too."""
    from teammed.backends.retry import RetryPolicy
    from tests import schema_fake
    from tests.test_transport_http import _lm

    config = TeamworkConfig(n_agents=3, leadership=True, shared_mental_model=True, team_orientation=True,
                            trust=True)

    def handler(n, body):  # type: ignore[no-untyped-def]
        name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
        if name == "ConsensusFacts":
            return 400, {}, {"error": {"message": "bad request", "type": "invalid_request_error"}}
        if name in ("FormalReport", "AssessmentQuality"):
            return 30.0
        return schema_fake.handler(n, body)

    async def go(lm) -> tuple[float, int]:  # type: ignore[no-untyped-def]
        started = time.monotonic()
        with dspy.context(lm=lm, adapter=SchemaAdapter()), pytest.raises(TimeoutError):
            await asyncio.wait_for(TeamworkProgram(config).acall(question="q? Key: A", options={"A": "a", "B": "b"}),
                                   1.5)
        took = time.monotonic() - started
        await asyncio.sleep(0.1)
        return took, len([t for t in asyncio.all_tasks() if t is not asyncio.current_task()])

    with FakeOpenAI(handler) as server:
        took, left = asyncio.run(go(_lm(server.api_base, timeout_s=60.0, retry=RetryPolicy(attempts=1))))
    assert took < 3.0 and left == 0, (took, left)


def test_an_lm_called_synchronously_inside_a_bridged_forward_awaits_its_async_client(monkeypatch):
    """A module that calls teammed's LM directly (not through a behaviour) under ``acall``: the call
    waits on the event loop through the backend's async client, never on a thread or the sync client."""
    from teammed import interrupts
    from teammed.backends import openai_http
    from tests import schema_fake
    from tests.test_transport_http import _lm

    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("a worker thread or the sync client was used under the bridge")

    with FakeOpenAI(schema_fake.handler) as server:
        lm = _lm(server.api_base)
        monkeypatch.setattr(interrupts.Workers, "submit", refuse)
        monkeypatch.setattr(openai_http.OpenAICompatibleClient, "complete", refuse)
        with usage.track() as u:
            outputs = asyncio.run(run_sync(lambda: lm(messages=[{"role": "user", "content": "hi"}])))
    assert outputs and len(server.requests) == 1 and u.calls == 1
