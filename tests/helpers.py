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


# ---------------------------------------------------------------- a MedAgentsBench data folder
MEDAGENTSBENCH_FOLDERS = ("medqa", "medqa_5options", "pubmedqa", "medmcqa", "mmlu", "mmlu-pro", "medbullets",
                          "afrimedqa")
_STEM = ("A {age}-year-old patient (case {i} of {folder}) presents with fever, weight loss and night sweats "
         "for three weeks; examination shows cervical lymphadenopathy and the chest film shows hilar widening. ")


def _mab_row(folder: str, i: int) -> dict[str, Any]:
    """One row in MedAgentsBench's schema, shaped as that benchmark's folder holds it."""
    stem = _STEM.format(age=20 + i, i=i, folder=folder) * 3 + "Which is the most likely diagnosis?"
    if folder == "pubmedqa":
        options = {"A": "yes", "B": "no", "C": "maybe"}
        gold = "ABC"[i % 3]
        return {"realidx": str(10_000_000 + i), "question": stem, "answer": options[gold],
                "answer_rationale": "the abstract says so", "options": options, "answer_idx": gold}
    n = {"mmlu-pro": 10, "medqa_5options": 5, "medbullets": 5, "afrimedqa": 5}.get(folder, 4)
    options = {"ABCDEFGHIJ"[k]: f"Diagnosis {k + 1} for case {i}" for k in range(n)}
    if folder in ("mmlu-pro", "afrimedqa") and i % 2:
        options["ABCDEFGHIJ"[n - 1]] = "N/A"  # MedAgentsBench pads short option lists
    gold = "ABCD"[i % 4]
    row: dict[str, Any] = {"question": stem, "options": options, "answer_idx": gold, "answer": options[gold]}
    row["realidx"] = 6000 + i if folder == "mmlu-pro" else f"{folder}-{i:04d}"
    if folder.startswith("medqa"):
        row["meta_info"] = "step1"
    if folder == "mmlu-pro":
        row.update(category="health", src="ori_mmlu-anatomy")
    if folder == "medbullets":
        row["reason"] = "Bullet Summary: the explanation"
    return row


def write_medagentsbench(root: Path, *, n_test: int = 24, folders: tuple[str, ...] = MEDAGENTSBENCH_FOLDERS) -> Path:
    """A small copy of MedAgentsBench's ``data/`` folder: ``<folder>/test.jsonl`` (``n_test`` rows),
    ``test_hard.jsonl`` (the first 6), ``sampled_50.jsonl`` (the first 5), PubMedQA's
    ``train.jsonl`` and MedQA's stray ``test_hard.json``; returns ``root``."""
    import json

    for folder in folders:
        target = root / folder
        target.mkdir(parents=True, exist_ok=True)
        rows = [_mab_row(folder, i) for i in range(n_test)]
        splits = {"test": rows, "test_hard": rows[:6], "sampled_50": rows[:5]}
        if folder == "pubmedqa":
            splits["train"] = [dict(_mab_row(folder, 1000 + i)) for i in range(8)]
        for split, chosen in splits.items():
            (target / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chosen), encoding="utf-8")
        if folder == "medqa":
            (target / "test_hard.json").write_text(json.dumps(rows[:6]), encoding="utf-8")
    return root


def wordy_team(factor: int, answers: dict[str, str], seed: int) -> Any:
    """A simulated team whose calls bill ``factor`` times their prompt tokens: a tokenizer no estimate foresaw."""
    from teammed.backends.simulated import SimulatedTeamLM

    class Wordy(SimulatedTeamLM):
        def complete(self, messages, **kwargs):  # type: ignore[no-untyped-def]
            response, info = super().complete(messages, **kwargs)
            response.usage.prompt_tokens = (response.usage.prompt_tokens or 0) * factor
            return response, info

    return Wordy(answers, seed=seed)


# ---------------------------------------------------------------- the viewer of rows held in memory
def transcripts_pages(runs: Any, *, page_size: int = 1000) -> list[str]:
    """The viewer pages of rows held in memory (`ResultRow` values or their stored form), as
    `teammed.evals._html.paged_transcripts` writes them from disk."""
    from teammed.evals._html import paged_transcripts
    from teammed.evals._rows import typed

    held = [(title, [typed(row) for row in rows]) for title, rows in runs]

    def rows_of(index: int, ids: set[str]) -> list[Any]:
        return [row for row in held[index][1] if row.id in ids]

    return ["".join(page) for page in paged_transcripts(held, rows_of, page_size=page_size)]


def transcripts_html(runs: Any) -> str:
    """The viewer of rows held in memory as one page."""
    return transcripts_pages(runs, page_size=max(1, sum(len(rows) for _, rows in runs)))[0]


def read_rows(run: Any) -> list[Any]:
    """All of a loaded run's (`teammed.evals._runs.Run`) full, typed rows, read from its ``results.jsonl``."""
    return run.rows_of({row.id for row in run.rows})
