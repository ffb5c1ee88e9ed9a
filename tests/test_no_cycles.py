"""A call leaves no reference cycles behind: what it made is freed when it ends, not by the garbage collector.

At 256 questions in flight the collector ran every few calls, holding the GIL; each httpx response
was a cycle (the response and its stream), with its request, pool entry, event and locks hanging
off it, and every schema sent was a recursive closure. ``gc.DEBUG_SAVEALL`` keeps what a
collection would free: after a deliberation there must be nothing of teammed's, DSPy's or httpx's.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import dspy
import pytest

from teammed.adapter import SchemaAdapter
from teammed.backends.litellm_backend import LiteLLMBackend
from teammed.backends.openai_http import OpenAICompatibleClient
from teammed.programs import TeamworkProgram, preset
from teammed.schema import dialect_schema, output_schema
from teammed.signatures import InitialAssessment
from tests.fake_openai import FakeOpenAI
from tests.schema_fake import handler

OURS = ("teammed", "programs", "signatures", "dspy", "httpx", "httpcore", "h11")
OPTIONS = {"A": "Myocardial infarction", "B": "Pulmonary embolism", "C": "Aortic dissection", "D": "Pericarditis"}


def _origin(obj: object) -> str:
    module = getattr(obj, "__module__", None) if callable(obj) and not isinstance(obj, type) else None
    return str(module or type(obj).__module__ or "")


@pytest.fixture
def saved_garbage() -> Iterator[list[object]]:
    """Collects, then keeps in ``gc.garbage`` whatever a collection would free until the test ends.

    What an earlier test left to finish in the background (an ended event loop's async clients, a
    worker's last task) can still drop its cycles a moment later: the collection is repeated until
    a quarter second passes with nothing to collect, so only this test's garbage is counted."""
    import time

    quiet_since = time.monotonic()
    deadline = quiet_since + 5.0
    while time.monotonic() < deadline:
        if gc.collect():
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 0.25:
            break
        time.sleep(0.05)
    enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.garbage.clear()
    try:
        yield gc.garbage
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()


def _cycles_of_ours(garbage: list[object], origins: tuple[str, ...] = OURS) -> list[str]:
    """What a collection now frees that was made by code of ``origins`` (module prefixes)."""
    gc.collect()
    return sorted({f"{type(o).__module__}.{type(o).__qualname__} ({_origin(o)}.{getattr(o, '__qualname__', '')})"
                   for o in garbage if _origin(o).split(".")[0] in origins or _origin(o).startswith(origins)})


def test_a_request_of_the_direct_client_leaves_no_cycle(saved_garbage):
    with FakeOpenAI(handler, keep_alive=True) as server:
        client = OpenAICompatibleClient(server.api_base, api_key="k", timeout_s=10)
        try:
            client.complete(model="openai/fake", messages=[{"role": "user", "content": "connect"}])
            gc.collect()
            saved_garbage.clear()
            for _ in range(5):
                client.complete(model="openai/fake", messages=[{"role": "user", "content": "Key: A"}])
            assert _cycles_of_ours(saved_garbage) == []
        finally:
            client.close()


def test_the_schema_sent_is_built_without_cycles(saved_garbage):
    schema = output_schema(InitialAssessment, {"options": OPTIONS})
    gc.collect()
    saved_garbage.clear()
    for profile in ("openai", "gemini", "vllm", "llamacpp"):
        dialect_schema(schema, profile)
    output_schema(InitialAssessment, {"options": {"A": "a", "B": "b"}})  # a shape not built yet
    assert _cycles_of_ours(saved_garbage, ("teammed.schema",)) == []


def test_a_deliberation_on_the_direct_transport_leaves_no_cycle(saved_garbage):
    with FakeOpenAI(handler, keep_alive=True) as server:
        lm = LiteLLMBackend("openai/fake", api_base=server.api_base, api_key="k", transport="auto")
        team = TeamworkProgram(preset("all"))
        try:
            with dspy.context(lm=lm, adapter=SchemaAdapter()):
                team(question="Crushing chest pain radiating to the left arm. Key: A", options=OPTIONS)  # warm-up
                gc.collect()
                saved_garbage.clear()
                for _ in range(2):
                    prediction = team(question="Crushing chest pain radiating to the left arm. Key: A",
                                      options=OPTIONS)
            assert prediction.answer == "A"
            assert _cycles_of_ours(saved_garbage) == []
        finally:
            lm.close()
