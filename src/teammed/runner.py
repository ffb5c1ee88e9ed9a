"""Run a system over questions: concurrent, durable, resumable, accounted.

Each finished question is appended to ``results.jsonl`` and fsync'd at once, so a run
killed at any point (even ``kill -9``) loses at most the questions in flight; ``resume``
skips every id already written. ``run.json`` records how the run was made.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import dspy
from pydantic import BaseModel

from teammed import usage as usage_mod
from teammed.adapter import SchemaAdapter
from teammed.backends.resolve import Deployment
from teammed.types import Question

__all__ = ["RunSettings", "answer_question", "run_questions", "read_results", "summarize_rows", "environment"]

logger = logging.getLogger(__name__)

BINARY_POSITIVE = {"yes", "true", "present"}


@dataclass(frozen=True)
class RunSettings:
    out_dir: Path
    system: str
    label: str
    config: dict[str, Any] | None
    dataset: str
    seed: int | None
    model: str
    resume: bool = False


def _binary_positive(options: dict[str, str]) -> str | None:
    if len(options) == 2 or {v.strip().lower() for v in options.values()} <= {"yes", "no", "maybe"}:
        for letter, text in options.items():
            if text.strip().lower() in BINARY_POSITIVE:
                return letter
    return None


def answer_question(program: dspy.Module, question: Question, lm: dspy.BaseLM, *,
                    settings: RunSettings, deployment: str) -> dict[str, Any]:
    """One result row: the program's answer and record, its accounting, or its error."""
    started = time.perf_counter()
    prediction = None
    error = None
    # No DSPy history or shared trace: a long run would otherwise keep every call's messages and
    # response in memory (this question's trace lives only while it runs).
    with dspy.context(lm=lm, adapter=SchemaAdapter(), disable_history=True, trace=[]), usage_mod.track() as used:
        try:
            inputs = {"question": question.question, "options": dict(question.options), "context": question.context}
            if question.image:
                inputs["image"] = question.image
            prediction = program(**inputs)
        except Exception as exc:  # recorded, counted as incorrect, never dropped
            error = f"{type(exc).__name__}: {exc}"
            logger.warning("question %s failed: %s", question.id, error)
    answer = getattr(prediction, "answer", None) if prediction is not None else None
    if answer not in question.options:
        answer = None
        error = error or "the system returned no valid option"
    record = getattr(prediction, "record", None)
    record = record.model_dump(mode="json") if isinstance(record, BaseModel) else dict(record or {})
    agents = record.get("agents") or []
    trust = record.get("trust")
    return {
        "id": question.id,
        "dataset": settings.dataset,
        "seed": settings.seed,
        "system": settings.system,
        "label": settings.label,
        "deployment": deployment,
        "gold": question.answer_idx,
        "prediction": answer,
        "correct": bool(error is None and answer is not None and answer == question.answer_idx),
        "failed": error is not None,
        "error": error,
        "confidence": getattr(prediction, "confidence", None) if prediction is not None else None,
        "question": question.question,  # the viewer shows the stem
        "context": question.context,
        "options": dict(question.options),
        "binary_positive": _binary_positive(question.options),
        **used.as_dict(),
        "latency_s": round(time.perf_counter() - started, 4),
        "lm_latency_s": round(used.latency_s, 4),
        "n_agents": len(agents) or None,
        "roles": [a.get("role") for a in agents],
        "trust": trust,
        "config": settings.config,
        "rationale": getattr(prediction, "rationale", None) if prediction is not None else None,
        "record": record,
        "transcript": getattr(prediction, "transcript", None) or [],
        "meta": question.meta,
    }


def read_results(path: Path) -> list[dict[str, Any]]:
    """Rows of a results file; a torn last line (a crash mid-write) is ignored."""
    rows: list[dict[str, Any]] = []
    if not path.exists():
        return rows
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            logger.warning("ignoring a torn line in %s", path)
    return rows


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def environment() -> dict[str, Any]:
    """Package versions, Python and git commit: what a run must record to be reproduced."""
    versions: dict[str, str | None] = {}
    for name in ("teammed", "dspy", "litellm", "pydantic", "optuna", "datasets", "llama_cpp_python"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {"python": platform.python_version(), "packages": versions, "git_commit": _git_commit()}


def summarize_rows(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy and accounting over rows; failed questions stay in the denominator."""
    n = len(rows)
    n_failed = sum(bool(r.get("failed")) for r in rows)
    calls = sum(r.get("calls", 0) for r in rows)

    def mean(key: str) -> float:
        return round(sum(float(r.get(key) or 0) for r in rows) / n, 4) if n else 0.0

    summary: dict[str, Any] = {
        "n": n,
        "n_failed": n_failed,
        "accuracy": round(sum(bool(r.get("correct")) for r in rows) / n, 4) if n else 0.0,
        "calls_per_question": mean("calls"),
        "prompt_tokens_per_question": mean("prompt_tokens"),
        "completion_tokens_per_question": mean("completion_tokens"),
        "latency_s_per_question": mean("latency_s"),
        "cost_usd_per_question": mean("cost_usd"),
        "calls": calls,
        "cache_hits": sum(r.get("cache_hits", 0) for r in rows),
        "retries": sum(r.get("retries", 0) for r in rows),
        "parse_failures": sum(r.get("parse_failures", 0) for r in rows),
        "repaired": sum(r.get("repaired", 0) for r in rows),
    }
    summary["fallback_rate"] = round((summary["parse_failures"] + summary["repaired"]) / calls, 4) if calls else 0.0
    try:
        from teammed.evals.metrics import summarize as eval_summarize
    except ImportError:  # the metrics package is optional at this layer
        return summary
    summary["metrics"] = eval_summarize(list(rows))
    return summary


def _in_memory(row: dict[str, Any]) -> dict[str, Any]:
    """What the summary needs of a written row: its transcript and rationale stay on disk only."""
    return {k: v for k, v in row.items() if k not in ("transcript", "rationale")}


def _collect(pool, work, todo, results_path, lock, rows, progress, started, total) -> None:  # type: ignore[no-untyped-def]
    """Submit every question, append each finished row durably, report progress."""
    with results_path.open("a") as sink:
        futures = [pool.submit(work, i, q) for i, q in enumerate(todo)]
        for finished, future in enumerate(as_completed(futures), start=1):
            row = future.result()
            with lock:
                sink.write(json.dumps(row, default=str) + "\n")
                sink.flush()
                os.fsync(sink.fileno())
                rows.append(_in_memory(row))
            if progress is not None:
                elapsed = time.monotonic() - started
                progress({
                    "done": len(rows), "total": total,
                    "accuracy": sum(r["correct"] for r in rows) / len(rows),
                    "calls": sum(r.get("calls", 0) for r in rows), "failed": sum(r["failed"] for r in rows),
                    "eta_s": elapsed / finished * (len(todo) - finished),
                })


def run_questions(
    questions: Sequence[Question],
    *,
    program_factory: Callable[[], dspy.Module],
    deployments: Sequence[Deployment],
    settings: RunSettings,
    progress: Callable[[dict[str, Any]], None] | None = None,
    extra_meta: dict[str, Any] | None = None,
    questions_in_flight: int | None = None,
) -> dict[str, Any]:
    """Answer every question not already in ``results.jsonl``; write rows, run.json and summary.json.

    ``questions_in_flight`` questions run at once (default: the deployments' request slots
    summed); requests in flight are bounded by each deployment's LM, not here, so one
    question's parallel calls (round 2) run together even with one question in flight.
    """
    out = settings.out_dir
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.jsonl"
    existing = read_results(results_path)
    if existing and not settings.resume:
        raise FileExistsError(f"{results_path} already holds {len(existing)} results; pass --resume to continue "
                              f"that run or choose another --out")
    done_ids = {r["id"] for r in existing}
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        raise ValueError("question ids must be unique within a run")
    todo = [q for q in questions if q.id not in done_ids]
    (out / "run.json").write_text(json.dumps({
        "system": settings.system, "label": settings.label, "config": settings.config, "dataset": settings.dataset,
        "seed": settings.seed, "model": settings.model, "deployments": [d.spec for d in deployments],
        "n_questions": len(questions), "question_ids": ids, **environment(), **(extra_meta or {}),
    }, indent=2))

    lock = threading.Lock()
    rows = [_in_memory(r) for r in existing if r["id"] in set(ids)]
    started = time.monotonic()
    program = program_factory()

    def work(index: int, question: Question) -> dict[str, Any]:
        k = index % len(deployments)  # round-robin over deployments
        return answer_question(program, question, deployments[k].lm, settings=settings,
                               deployment=deployments[k].spec)

    workers = max(1, questions_in_flight or sum(d.concurrency for d in deployments))
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        _collect(pool, work, todo, results_path, lock, rows, progress, started, len(questions))
    except BaseException:
        # Ctrl-C, SIGTERM or an error: queued questions are dropped (resume picks them up) and
        # nothing waits for the ones in flight; closing the backends makes them give up.
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    order = {qid: i for i, qid in enumerate(ids)}

    rows.sort(key=lambda r: order[r["id"]])
    summary = {
        **summarize_rows(rows), "system": settings.system, "label": settings.label, "config": settings.config,
        "dataset": settings.dataset, "seed": settings.seed, "model": settings.model, **environment(),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    return summary
