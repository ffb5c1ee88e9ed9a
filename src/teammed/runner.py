"""Run a system over questions: concurrent, durable, resumable, accounted, one identity per directory.

Each question is answered by `teammed.answering.answer`, as the optimizers score it; each
finished one is appended to ``results.jsonl`` as a typed `ResultRow` and fsync'd at once, so a
run killed at any point (even ``kill -9``) loses at most the questions in flight. A run
directory has one `RunIdentity` (``run.json``): ``resume`` continues only the
same identity and refuses otherwise, naming every differing field. One process at a time
writes into a directory (an exclusive ``flock`` on ``DIR/.lock``; a second one is refused at
once, naming the holder). On resume a torn last line (crash mid-write, full disk) is cut
before appending, so every question ends exactly once. ``retry_failed`` drops the failed
rows (atomic rewrite) and answers those questions again. After ``max_consecutive_failures``
questions in a row fail with the same error of any kind (a bad key, a dead server, a server
still failing or timing out after its retries, answers that name no option) the run stops: the
rest are not attempted and `RunStopped` names the error and the fix. A run in which every
question failed raises `RunFailed` (whatever its size): it measured nothing.

This layer computes only counts and accounting; richer metrics are passed in by the caller
(``metrics=``), so the runner never imports `teammed.evals`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

import dspy

from teammed import answer_stats, interrupts
from teammed.answer_stats import CONSTANT_MIN_N, CONSTANT_SHARE
from teammed.answering import answer
from teammed.backends.resolve import Deployment
from teammed.errors import DataError, FatalBackendError, TeammedError, TransientBackendError, WorkFailed, cause_of
from teammed.records import redacted_argv, write_atomic
from teammed.results import ResultRow, RunIdentity, identity_differences, iter_rows
from teammed.types import Question

__all__ = [
    "RunSettings",
    "RunStopped",
    "RunFailed",
    "RunLocked",
    "run_questions",
    "read_results",
    "iter_results",
    "summarize_rows",
    "RowDigest",
    "RowSummarizer",
    "answer_spread",
    "environment",
    "CONSTANT_SHARE",
    "CONSTANT_MIN_N",
]

logger = logging.getLogger(__name__)

class RunStopped(WorkFailed):
    """The run stopped early: questions kept failing with the same error."""


class RunFailed(RunStopped):
    """Every question of the run failed: it measured nothing (the summary is written first)."""


class RunLocked(TeammedError):
    """Another process is writing into the same run directory."""


@dataclass(frozen=True)
class RunSettings:
    """Where and as what a run is written. ``identity`` defines the run; the rest is how."""

    out_dir: Path
    identity: RunIdentity
    resume: bool = False
    retry_failed: bool = False
    max_consecutive_failures: int = 5
    extra_meta: dict[str, Any] = field(default_factory=dict)


def backend_settings(deployments: Sequence[Deployment]) -> list[dict[str, Any]]:
    """What ``run.json`` records of each deployment: its model, server (redacted), temperature,
    max_tokens, and the structured-output dialect it uses now (with the degradations that led there)."""
    from teammed.redact import redact

    out = []
    for d in deployments:
        lm = d.lm
        kwargs = getattr(lm, "kwargs", None) or {}
        base = getattr(lm, "api_base", None) or kwargs.get("api_base")  # a dspy.LM keeps it in its kwargs
        schema = bool(getattr(lm, "takes_schema", False))  # a teammed backend picks the dialect
        out.append({"deployment": d.spec, "model": getattr(lm, "model", None),
                    "api_base": redact(str(base).rstrip("/")) if base and not str(getattr(lm, "backend_id", "") or
                                                                                   "").startswith("local:") else None,
                    "transport": getattr(lm, "transport", None),
                    "temperature": kwargs.get("temperature"), "max_tokens": kwargs.get("max_tokens"),
                    "structured_output": getattr(lm, "structured_output", None) if schema else None,
                    "degradations": [list(step) for step in getattr(lm, "degradations", [])] if schema else []})
        members = getattr(lm, "router_members", None)  # the deployments a Router spreads this one's calls over
        if members:
            out[-1]["members"] = [{"model": m, "api_base": b} for m, b in members]
    return out


# ---------------------------------------------------------------- files
def iter_results(path: Path) -> Iterator[tuple[ResultRow, bytes]]:
    """Each row of a results file with its stored line, one at a time (`teammed.records.iter_rows`;
    nothing when the file does not exist)."""
    if path.exists():
        yield from iter_rows(path, fix="the file was damaged: remove that line and run again with --resume")


def read_results(path: Path) -> list[ResultRow]:
    """The rows of a results file (see `iter_results`)."""
    return [row for row, _ in iter_results(path)]


def _complete_length(path: Path, *, chunk: int = 1 << 16) -> tuple[int, int]:
    """The file's size and the length of its complete lines (up to and including its last newline),
    found by reading backwards from the end, never the whole file."""
    with path.open("rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        end = size
        while end > 0:
            start = max(0, end - chunk)
            handle.seek(start)
            found = handle.read(end - start).rfind(b"\n")
            if found >= 0:
                return size, start + found + 1
            end = start
        return size, 0


def _cut_torn_tail(path: Path) -> int:
    """Truncate a trailing fragment (no final newline); return how many bytes were cut. A last line
    that is a whole JSON value lacks only its newline (another tool wrote it): it gets one and stays,
    as `teammed.results.iter_rows` reads it."""
    if not path.exists():
        return 0
    size, end = _complete_length(path)
    cut = size - end
    if not cut:
        return 0
    with path.open("r+b") as handle:
        handle.seek(end)
        tail = handle.read(cut)
        try:
            json.loads(tail)
        except ValueError:
            handle.truncate(end)
        else:
            handle.seek(size)
            handle.write(b"\n")
            cut = 0
        handle.flush()
        os.fsync(handle.fileno())
    if cut:
        logger.warning("cut a torn last line (%d bytes) from %s before resuming", cut, path)
    return cut


@contextlib.contextmanager
def run_lock(out_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``out_dir/.lock`` or raise `RunLocked` naming the holder."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / ".lock"
    handle = path.open("a+")
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise RunLocked(f"{out_dir} is being written by {holder}; wait for it to finish (or stop it), "
                            f"or choose another --out") from None
        handle.seek(0)
        handle.truncate()
        command = " ".join(redacted_argv(sys.argv))[:300]
        handle.write(f"pid {os.getpid()} on {socket.gethostname()} ({command})\n")
        handle.flush()
        yield
    finally:
        handle.close()  # releases the lock


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


# ---------------------------------------------------------------- summary
class RowSummarizer(Protocol):
    """Richer metrics computed as rows stream by (``metrics=`` of `run_questions`; `teammed run`
    passes `teammed.evals.Summarizer`): ``add`` each row once, then ``result``."""

    def add(self, row: ResultRow) -> None: ...

    def result(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class RowDigest:
    """What a run's summary reads of a row: its answer and its counters. A run keeps this per
    question (about half a kilobyte), never the row, whose transcript and record are on disk."""

    id: str
    labeled: bool
    gold: str | None
    prediction: str | None
    correct: bool | None
    failed: bool
    error: str | None
    error_type: str | None
    calls: int
    prompt_tokens: int
    cached_prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_s: float
    cache_hits: int
    retries: int
    parse_failures: int
    repaired: int
    ranking_repairs: int
    fallbacks: int
    spent_prompt_tokens: int | None
    spent_completion_tokens: int | None
    spent_cost_usd: float | None

    @classmethod
    def of(cls, row: ResultRow) -> RowDigest:
        return cls(**{name: getattr(row, name) for name in cls.__dataclass_fields__})


Summarized = ResultRow | RowDigest


def answer_spread(rows: Sequence[Summarized]) -> dict[str, Any]:
    """`teammed.answer_stats.answer_spread` as ``summary.json`` stores it (rounded; empty fields when
    nothing was answered)."""
    spread = answer_stats.answer_spread(rows)
    if spread is None:
        return {"n_answered": 0, "top": None, "share": None, "constant": False}
    return {"n_answered": spread.n_answered, "top": spread.top, "share": round(spread.share, 4),
            "constant": spread.constant}


def majority_baseline(rows: Sequence[Summarized]) -> dict[str, Any]:
    """`teammed.answer_stats.majority_baseline` as ``summary.json`` stores it."""
    base = answer_stats.majority_baseline(rows)
    if base is None:
        return {"letter": None, "accuracy": None}
    return {"letter": base.letter, "accuracy": round(base.accuracy, 4)}


def summarize_rows(rows: Sequence[Summarized]) -> dict[str, Any]:
    """Counts, accuracy and accounting over rows (or their `RowDigest`).

    Failed questions stay in the accuracy denominator; unlabeled ones (no gold) are left out
    of it and counted in ``n_unlabeled``. Tokens and cost per question are billable (the same
    whether or not the cache answered); ``spent_*`` is what was actually paid, when known.
    ``cached_prompt_tokens`` (a total, and per question) is the part of the prompt tokens the
    provider read from its prompt cache, ``cached_prompt_share`` its share of the prompt tokens.
    """
    n = len(rows)
    labeled = [r for r in rows if r.labeled and r.gold is not None]
    calls = sum(r.calls for r in rows)
    prompt, cached = sum(r.prompt_tokens for r in rows), sum(r.cached_prompt_tokens for r in rows)

    def mean(key: str) -> float:
        return round(sum(float(getattr(r, key, 0) or 0) for r in rows) / n, 4) if n else 0.0

    summary: dict[str, Any] = {
        "n": n,
        "n_failed": sum(r.failed for r in rows),
        "n_unlabeled": n - len(labeled),
        "n_labeled": len(labeled),
        "accuracy": round(sum(bool(r.correct) for r in labeled) / len(labeled), 4) if labeled else None,
        "majority_baseline": majority_baseline(labeled),
        "answer_spread": answer_spread(rows),
        "calls_per_question": mean("calls"),
        "prompt_tokens_per_question": mean("prompt_tokens"),
        "cached_prompt_tokens_per_question": mean("cached_prompt_tokens"),
        "completion_tokens_per_question": mean("completion_tokens"),
        "latency_s_per_question": mean("latency_s"),
        "cost_usd_per_question": mean("cost_usd"),
        "calls": calls,
        "prompt_tokens": prompt,
        "cached_prompt_tokens": cached,
        "cached_prompt_share": round(cached / prompt, 4) if prompt else None,
        "cache_hits": sum(r.cache_hits for r in rows),
        "retries": sum(r.retries for r in rows),
        "parse_failures": sum(r.parse_failures for r in rows),
        "repaired": sum(r.repaired for r in rows),
        "ranking_repairs": sum(r.ranking_repairs for r in rows),
        "fallbacks": sum(r.fallbacks for r in rows),
    }
    if any(r.spent_prompt_tokens is not None for r in rows):
        for key in ("spent_prompt_tokens", "spent_completion_tokens", "spent_cost_usd"):
            summary[f"{key}_per_question"] = mean(key)
    summary["fallback_rate"] = round((summary["parse_failures"] + summary["repaired"]) / calls, 4) if calls else 0.0
    return summary


# ---------------------------------------------------------------- the run
# What to do about an error that keeps coming back, by its type (a fatal error carries its own fix).
_STREAK_FIXES = {
    "TransientBackendError": "the server keeps failing or not answering in time: check that it runs and is not "
                             "overloaded (its log), or raise --timeout / --retry-attempts",
    "NoAnswerError": "the model's answers name no option: try another --model or --structured-output",
    "InvalidOption": "the model's answers name no option: try another --model or --structured-output",
}


class _Streak:
    """Consecutive questions failing with the same error (in completion order): a fatal backend
    error of one kind, a transient one still failing after its retries (an erroring or hung
    server), or the same other failure (answers naming no option, ...)."""

    def __init__(self, limit: int):
        self.limit, self.count = limit, 0
        self.key: tuple[str, ...] | None = None
        self.last: BaseException | None = None
        self.error: str | None = None

    def add(self, row: ResultRow, failure: BaseException | None) -> bool:
        if not row.failed:
            self.key, self.count, self.last, self.error = None, 0, None, None
            return False
        fatal = cause_of(failure, FatalBackendError)
        transient = cause_of(failure, TransientBackendError)
        if fatal is not None:
            key: tuple[str, ...] = (type(fatal).__name__, fatal.kind)
        elif transient is not None:
            key = ("TransientBackendError",)
        else:
            key = (row.error_type or "error",)
        self.count = self.count + 1 if key == self.key else 1
        self.key, self.error = key, row.error
        self.last = fatal or transient or failure
        return self.limit > 0 and self.count >= self.limit

    def stopped(self) -> RunStopped:
        """The error that stopped the run: what failed, its message and the fix."""
        fatal = cause_of(self.last, FatalBackendError)
        if fatal is not None:
            what = f"{type(fatal).__name__} ({fatal.kind}): {fatal}"
            fix = "" if fatal.fix else " Fix the backend."  # str(fatal) ends with its fix
        else:
            assert self.key is not None
            what = f"{self.key[0]}: {str(self.last) if self.last is not None else self.error}"
            fix = f" Fix: {_STREAK_FIXES.get(self.key[0], 'remove its cause (rerun with -v to see the calls)')}."
        return RunStopped(f"stopped after {self.count} consecutive questions failed with the same {what}{fix} The "
                          f"questions not attempted remain: run again with --resume --retry-failed to continue")


def _all_failed(rows: Sequence[Summarized]) -> RunFailed | None:
    """`RunFailed` naming the commonest error when every row failed (an evaluation that measured nothing)."""
    if not rows or not all(r.failed for r in rows):
        return None
    kinds = Counter(r.error_type or "error" for r in rows)
    kind, n = kinds.most_common(1)[0]
    example = next(r.error for r in reversed(rows) if (r.error_type or "error") == kind)
    fix = _STREAK_FIXES.get(kind, "" if kind == "FatalBackendError" else "remove its cause (rerun with -v to see "
                            "the calls)")  # a fatal error's message ends with its fix
    return RunFailed(f"every one of the {len(rows)} questions failed ({n} with {example}); nothing was measured. "
                     f"{f'Fix: {fix}; then run' if fix else 'Run'} again with --resume --retry-failed")


def _check_identity(out: Path, identity: RunIdentity) -> None:
    manifest = out / "run.json"
    if not manifest.exists():
        results = out / "results.jsonl"
        if results.exists() and results.stat().st_size:
            raise DataError(f"{out} holds results but no run.json, so its identity is unknown; it cannot be "
                            f"resumed safely: choose another --out")
        return
    try:
        data = json.loads(manifest.read_text())
    except json.JSONDecodeError as exc:
        raise DataError(f"{manifest} is not valid JSON ({exc.msg}); it cannot be resumed safely: choose "
                        f"another --out") from None
    recorded = data.get("identity")
    if recorded is None:
        raise DataError(f"{manifest} was written by an older teammed without a run identity; it cannot be "
                        f"resumed safely: choose another --out")
    old = RunIdentity.model_validate(recorded)
    differences = identity_differences(old, identity)
    if differences:
        raise TeammedError(f"--resume refused: {out} holds a different run; " + "; ".join(differences)
                           + ". Repeat the original flags to continue it, or choose another --out")


def run_questions(
    questions: Sequence[Question],
    *,
    program_factory: Callable[[], dspy.Module],
    deployments: Sequence[Deployment],
    settings: RunSettings,
    progress: Callable[[dict[str, Any]], None] | None = None,
    metrics: Callable[[], RowSummarizer] | None = None,
    questions_in_flight: int | None = None,
    on_start: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Answer every question not already in ``results.jsonl``; write rows, run.json and summary.json.

    The summary is computed as rows stream by: the run keeps a `RowDigest` of each row (and
    ``metrics()``, when given, a summarizer that sees every row once: `RowSummarizer`), never
    the rows themselves, so memory grows by well under a kilobyte per question.

    ``questions_in_flight`` questions run at once (default: the deployments' question limits
    summed); requests in flight are bounded by each deployment's LM (its request slots,
    ``max_parallel_requests``), not here. A question's calls that do not depend on each other run
    side by side on the process's workers (`teammed.programs.parallel`), whatever is in flight.

    Raises `RunLocked` when another process writes into the directory, `TeammedError` when
    ``resume`` meets a different identity (nothing is appended then), `RunStopped` after
    ``max_consecutive_failures`` questions in a row failed with the same error, and `RunFailed` when
    every question failed (the summary is written first in both cases).
    ``on_start`` is called once the directory is locked and its identity accepted, just before
    the first question (the CLI prints its header there, so a refusal prints only the refusal).
    """
    out = settings.out_dir
    identity = settings.identity
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        raise DataError("question ids must be unique within a run; deduplicate the data set")
    if list(identity.question_ids) != ids:
        raise TeammedError("the run identity's question_ids must list the questions being run, in order")
    with run_lock(out):
        results_path = out / "results.jsonl"
        resuming = settings.resume or settings.retry_failed
        if resuming:
            _check_identity(out, identity)
            _cut_torn_tail(results_path)
        elif results_path.exists() and results_path.stat().st_size:
            raise FileExistsError(f"{results_path} already holds results; pass --resume to continue that "
                                  f"run or choose another --out")
        existing, summarizer, retried = _scan_existing(results_path, ids, retry_failed=settings.retry_failed,
                                                       metrics=metrics)
        done_ids = {r.id for r in existing}
        todo = [q for q in questions if q.id not in done_ids]
        manifest = {"identity": identity.model_dump(mode="json"), "system": identity.system,
                    "label": identity.label, "config": identity.config, "dataset": identity.dataset,
                    "seed": identity.seed, "model": identity.model, "deployments": list(identity.deployments),
                    "temperature": identity.temperature, "backends": backend_settings(deployments),
                    "n_questions": len(questions), "question_ids": ids, **environment(), **settings.extra_meta}
        write_atomic(out / "run.json", json.dumps(manifest, indent=2, default=str))
        if on_start is not None:
            on_start()
        rows, stopped = _execute(todo, program_factory=program_factory, deployments=deployments,
                                 questions_in_flight=questions_in_flight,
                                 settings=settings, results_path=results_path, existing=existing,
                                 summarizer=summarizer, progress=progress, total=len(questions))
        order = {qid: i for i, qid in enumerate(ids)}
        rows.sort(key=lambda r: order[r.id])
        summary = {
            **summarize_rows(rows),
            "n_planned": len(questions),
            "complete": len(rows) == len(questions),
            "retried_failed": retried,
            "stopped": str(stopped) if stopped else None,
            "system": identity.system, "label": identity.label, "config": identity.config,
            "dataset": identity.dataset, "dataset_sha256": identity.dataset_sha256, "split": identity.split,
            "seed": identity.seed, "model": identity.model, "program_sha256": identity.program_sha256,
            **environment(),
        }
        if summarizer is not None:
            summary["metrics"] = summarizer.result()
        write_atomic(out / "summary.json", json.dumps(summary, indent=2, default=str))
        # the dialect each deployment ended on (a refused response_format degrades it during the run)
        ended = backend_settings(deployments)
        if ended != manifest["backends"]:
            manifest["backends"] = ended
            write_atomic(out / "run.json", json.dumps(manifest, indent=2, default=str))
    if stopped:
        raise stopped
    failed = _all_failed(rows)
    if failed:
        raise failed
    return summary


class _Tally:
    """Running counts for the progress line (O(1) per finished question)."""

    def __init__(self) -> None:
        self.calls = self.failed = self.labeled = self.correct = 0

    def add(self, row: RowDigest) -> None:
        self.calls += row.calls
        self.failed += bool(row.failed)
        if row.correct is not None:
            self.labeled += 1
            self.correct += bool(row.correct)

    def accuracy(self) -> float:
        return self.correct / self.labeled if self.labeled else 0.0


def _scan_existing(results_path: Path, ids: Sequence[str], *, retry_failed: bool,
                   metrics: Callable[[], RowSummarizer] | None,
                   ) -> tuple[list[RowDigest], RowSummarizer | None, int]:
    """Read the rows already written, one at a time (one pass; a second only to rewrite the file):
    their digests and a summarizer that has seen them, and how many failed rows ``retry_failed``
    removed (the file rewritten without them)."""
    summarizer = metrics() if metrics is not None else None
    digests = []
    for row, _ in iter_results(results_path):
        digests.append(RowDigest.of(row))
        if summarizer is not None and not (retry_failed and row.failed):  # a retried row is dropped below
            summarizer.add(row)
    seen = Counter(d.id for d in digests)
    repeated = sorted(i for i, k in seen.items() if k > 1)
    if repeated:
        raise DataError(f"{results_path} holds {len(repeated)} questions more than once (e.g. {repeated[0]}); "
                        f"it was written by two runs at once: start a fresh --out")
    strangers = sorted(set(seen) - set(ids))
    if strangers:
        raise DataError(f"{results_path} holds questions outside this run (e.g. {strangers[0]}); start a "
                        f"fresh --out")
    retried = sum(d.failed for d in digests) if retry_failed else 0
    if retried:
        kept = (line.decode().rstrip("\n") + "\n" for row, line in iter_results(results_path) if not row.failed)
        write_atomic(results_path, kept)
        digests = [d for d in digests if not d.failed]
    return digests, summarizer, retried


def _execute(todo: list[Question], *, program_factory, deployments, settings: RunSettings,  # type: ignore[no-untyped-def]
             results_path: Path, existing: list[RowDigest], summarizer: RowSummarizer | None, progress,
             total: int, questions_in_flight: int | None = None) -> tuple[list[RowDigest], RunStopped | None]:
    lock = threading.Lock()
    rows = list(existing)
    tally = _Tally()
    for digest in rows:
        tally.add(digest)
    streak = _Streak(settings.max_consecutive_failures)
    started = time.monotonic()
    stopping = threading.Event()
    program = program_factory() if todo else None

    stop: list[RunStopped] = []

    def work(index: int, question: Question) -> tuple[ResultRow, BaseException | None] | None:
        k = index % len(deployments)  # round-robin over deployments
        with answering:
            if stopping.is_set():
                return None  # not attempted: the run is stopping
            row, failure = answer(program, question, deployments[k].lm, identity=settings.identity,
                                  deployment=deployments[k].spec)
            with lock:  # decided here, before the next question begins in this one's place
                if not stop and streak.add(row, failure):
                    stopping.set()
                    stop.append(streak.stopped())
        return row, failure

    workers = max(1, questions_in_flight or sum(d.concurrency for d in deployments))
    answering = threading.BoundedSemaphore(workers)  # questions answered at once, on the process's workers
    try:
        with results_path.open("a") as sink:
            # questions are submitted as earlier ones are written (a window of twice the workers): a
            # finished question's row (transcript included) never waits in memory for the writer
            answered = interrupts.submitted_as_completed(lambda item: interrupts.workers().submit(work, *item),
                                                         enumerate(todo),
                                                         window=2 * workers, more=lambda: not stopping.is_set())
            for finished, future in enumerate(answered, start=1):
                if future.cancelled():
                    continue
                result = future.result()
                if result is None:
                    continue
                row, _ = result
                with lock:
                    sink.write(row.to_json() + "\n")
                    sink.flush()
                    os.fsync(sink.fileno())
                    # the row is on disk: the summary keeps its digest, the metrics what they read of it
                    digest = RowDigest.of(row)
                    rows.append(digest)
                    if summarizer is not None:
                        summarizer.add(row)
                tally.add(digest)
                if progress is not None:
                    elapsed = time.monotonic() - started
                    progress({
                        "done": len(rows), "total": total, "accuracy": tally.accuracy(),
                        "calls": tally.calls, "failed": tally.failed,
                        "eta_s": elapsed / finished * (len(todo) - finished),
                    })
    except BaseException:
        # Ctrl-C, SIGTERM or an error: questions not begun are dropped (resume picks them up) and
        # nothing waits for the ones in flight; closing the backends makes them give up.
        stopping.set()
        raise
    return rows, stop[0] if stop else None
