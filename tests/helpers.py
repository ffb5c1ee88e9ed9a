"""Shared test helpers: a scripted clinical team whose behaviour each test can plant."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import dspy
from pydantic import BaseModel

from teammed import usage
from teammed.adapter import SchemaAdapter
from teammed.backends import ScriptedCall, ScriptedLM

OPTIONS = {"A": "Myocardial infarction", "B": "Pulmonary embolism", "C": "Aortic dissection", "D": "Pericarditis"}
QUESTION = "A 58-year-old man has crushing chest pain radiating to the left arm. Most likely diagnosis?"


def agent_of(call: ScriptedCall) -> str:
    """Which agent an InitialAssessment / discussion call is for (from its role text)."""
    role = str(call.inputs.get("role", ""))
    return role


def run(program: dspy.Module, responder: Callable[[ScriptedCall], Any] | None = None, **inputs: Any):
    """Run ``program`` once under a scripted LM; return (prediction, usage, lm)."""
    lm = ScriptedLM(responder)
    inputs = {"question": QUESTION, "options": OPTIONS, **inputs}
    with dspy.context(lm=lm, adapter=SchemaAdapter()), usage.track() as u:
        prediction = program(**inputs)
    record = getattr(prediction, "record", None)
    # the stored form of the record, as the runner writes it
    prediction.json_record = record.model_dump(mode="json") if isinstance(record, BaseModel) else record
    return prediction, u, lm


def still_running(pids: list[str], *, within_s: float = 10.0) -> list[str]:
    """The processes of ``pids`` still alive (zombies count as gone) after waiting up to ``within_s``."""
    import time

    def alive(pid: str) -> bool:
        try:
            with open(f"/proc/{pid}/status") as status:
                return "zombie" not in status.read().lower()
        except OSError:
            return False

    deadline = time.monotonic() + within_s
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def fake_server_module() -> ModuleType:
    """``benchmarks/fake_server.py`` as a module (the benchmarks are not a package), loaded once."""
    name = "teammed_benchmark_fake_server"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "benchmarks" / "fake_server.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
