"""Progress of a long piece of work as typed events: one channel for run, compile, search, tune and reproduce.

The experiment layer (`teammed.experiments`) opens a `Tracker` around a command's work and
hands it a callback; every event it sends is a frozen `Progress`: what finished (a question,
a trial, a cell, a stage, or just an LM call), done/total of the current unit, what was spent
so far (calls, billable tokens, $ where the backend prices them) against the budget, and an ETA.

Library code deep in the optimizers says only what finished, through `step`; it needs no
callback argument and costs nothing when no tracker is open. LM calls are counted through a
`teammed.usage` listener (cache hits are calls, not spend). The CLI renders the events
(`teammed.progress.EventDisplay`); a Python caller passes its own callback or none.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict

from teammed import usage as usage_mod

__all__ = ["Spend", "Limits", "Progress", "ProgressCallback", "Tracker", "step", "tracking", "current"]

# start/finish: the whole work; begin: a unit of it begins (a run cell, a stage); question, trial, cell,
# stage: a unit finished; call: an LM call finished
Kind = Literal["start", "begin", "call", "question", "trial", "cell", "stage", "finish"]


class Spend(BaseModel):
    """Billable calls, tokens and dollars (None: a backend without a price answered)."""

    model_config = ConfigDict(frozen=True)

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float | None = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Limits(BaseModel):
    """A budget's limits (None: not limited in that unit)."""

    model_config = ConfigDict(frozen=True)

    calls: int | None = None
    tokens: int | None = None
    usd: float | None = None


class Progress(BaseModel):
    """One progress event."""

    model_config = ConfigDict(frozen=True)

    command: str
    kind: Kind
    label: str  # what is being done: "trial 3 of 10", "stage 2-components", a cell's name
    done: int | None = None  # units of the current work finished (questions, trials, cells)
    total: int | None = None
    spent: Spend = Spend()
    budget: Limits | None = None
    elapsed_s: float = 0.0
    eta_s: float | None = None
    accuracy: float | None = None  # so far, where the unit is a question
    failed: int = 0
    phase: str | None = None  # the behaviour whose LM call started last


ProgressCallback = Callable[[Progress], None] | None  # a command's ``progress=``: every event, or None (silent)


class Tracker:
    """Counts spend live and turns `step` calls into `Progress` events for ``callback``.

    The ETA is calls-based: the calls left (``unit_calls`` expected per unit of work, observed
    ones once units finish; or ``planned_calls`` for the whole work) over the call rate. Until a
    unit finishes, the rate is ``concurrency`` calls per mean call latency (right from the first
    calls, however unevenly workers started); afterwards, the observed rate since every worker had
    finished a call, which includes the time between calls. Without either, units left over the
    unit rate.
    """

    def __init__(self, command: str, callback: ProgressCallback, *,
                 budget: Limits | None = None, planned_calls: float | None = None, unit_calls: float | None = None,
                 concurrency: int = 1, priced: bool = True) -> None:
        self.command, self.callback, self.budget = command, callback, budget
        self.planned_calls, self.unit_calls, self.concurrency = planned_calls, unit_calls, max(1, concurrency)
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._calls = self._prompt = self._completion = 0
        self._usd: float | None = 0.0 if priced else None  # None: the backend has no price
        self._latency_sum, self._latency_n = 0.0, 0
        self._first_latency: float | None = None
        self._ramp_at: float | None = None
        self._ramp_calls = 0
        self._label = command
        self._done: int | None = None
        self._total: int | None = None
        self._accuracy: float | None = None
        self._failed = 0
        self._phase: str | None = None
        self._units = 0  # units finished in this session
        self._unit_calls_done = 0  # calls of the units finished in this session
        self._prev_calls: int | None = None  # the work's own count of its finished units' calls
        self._begun_at_calls = 0  # the command's calls when the current group of units began (a grid's cell)

    # ------------------------------------------------------------ a teammed.usage.CallListener
    def call_started(self, signature: str) -> None:
        self._phase = signature

    def call_finished(self, signature: str, *, tokens: int, latency_s: float, prompt_tokens: int = 0,
                      completion_tokens: int = 0, cost_usd: float = 0.0, cache_hit: bool = False) -> None:
        with self._lock:
            self._calls += 1
            if self._first_latency is None:
                self._first_latency = latency_s
            else:  # the first (warm-up) call is left out of the mean
                self._latency_sum += latency_s
                self._latency_n += 1
            if self._ramp_at is None and self._calls >= self.concurrency:
                self._ramp_at, self._ramp_calls = time.monotonic(), self._calls
            # billable, as the calls are: a call the response cache answered counts what it billed when it was
            # made (the README's basis, and the budgets'), so calls and tokens never mix two bases on one line
            self._prompt += prompt_tokens
            self._completion += completion_tokens
            if self._usd is not None:
                self._usd += cost_usd
        self._send("call")

    # ------------------------------------------------------------ what the work says
    def step(self, kind: Kind, label: str | None = None, *, done: int | None = None, total: int | None = None,
             accuracy: float | None = None, failed: int | None = None, calls: int | None = None) -> None:
        """A unit finished (or, ``begin``, began). ``calls``: the calls of every finished unit so far, as
        the work counts them (resumed units included), which makes the observed calls per unit."""
        with self._lock:
            if label is not None:
                self._label = label
            if kind == "begin":  # a new group of units (a grid's next cell): nothing of the last one carries over
                self._units, self._unit_calls_done, self._prev_calls = 0, 0, None
                self._accuracy, self._failed, self._begun_at_calls = None, 0, self._calls
            if done is not None or total is not None:
                self._done, self._total = done, total
            if accuracy is not None:
                self._accuracy = accuracy
            if failed is not None:
                self._failed = failed
            if calls is not None and done:
                if self._prev_calls is None:  # units of an earlier session (resume): their share, estimated
                    self._prev_calls = round(calls * (done - 1) / done) if done > 1 else 0
                self._unit_calls_done += calls - self._prev_calls
                self._prev_calls = calls
                self._units += 1
        self._send(kind)

    def spent(self) -> Spend:
        with self._lock:
            return Spend(calls=self._calls, prompt_tokens=self._prompt, completion_tokens=self._completion,
                         usd=self._usd)

    def eta_s(self) -> float | None:
        now = time.monotonic()
        with self._lock:
            calls, done, total, units = self._calls, self._done, self._total, self._units
            per_unit = self._unit_calls_done / units if units and self._unit_calls_done else self.unit_calls
            if per_unit and total is not None and done is not None:
                in_flight = max(0, calls - self._begun_at_calls - self._unit_calls_done)
                remaining = max(0.0, per_unit * (total - done) - in_flight)
                workers = max(1, min(self.concurrency, total - done))
            elif self.planned_calls:
                remaining, workers = max(0.0, self.planned_calls - calls), self.concurrency
            else:
                remaining = None
            if remaining is not None and calls:
                if units and self._ramp_at is not None and calls > self._ramp_calls and now > self._ramp_at:
                    return remaining / ((calls - self._ramp_calls) / (now - self._ramp_at))
                latency = self._latency_sum / self._latency_n if self._latency_n else self._first_latency
                return remaining * latency / workers if latency is not None else None
        if done and total is not None and total >= done:
            return (now - self.started) / done * (total - done)
        return None

    def event(self, kind: Kind) -> Progress:
        with self._lock:
            label, done, total = self._label, self._done, self._total
            accuracy, failed, phase = self._accuracy, self._failed, self._phase
        return Progress(command=self.command, kind=kind, label=label, done=done, total=total, spent=self.spent(),
                        budget=self.budget, elapsed_s=time.monotonic() - self.started, eta_s=self.eta_s(),
                        accuracy=accuracy, failed=failed, phase=phase)

    def _send(self, kind: Kind) -> None:
        if self.callback is not None:
            self.callback(self.event(kind))


_current: contextvars.ContextVar[Tracker | None] = contextvars.ContextVar("teammed_tracker", default=None)
# a worker thread that did not copy the context reaches the one tracker open in the process, if one is
_open: list[Tracker] = []


@contextlib.contextmanager
def tracking(command: str, callback: ProgressCallback, *, budget: Limits | None = None,
             planned_calls: float | None = None, unit_calls: float | None = None, concurrency: int = 1,
             priced: bool = True) -> Iterator[Tracker]:
    """Open a `Tracker` for the work inside the block: `step` reaches it; LM calls are counted.
    Sends a ``start`` event on entry and a ``finish`` event on a normal exit."""
    tracker = Tracker(command, callback, budget=budget, planned_calls=planned_calls, unit_calls=unit_calls,
                      concurrency=concurrency, priced=priced)
    token = _current.set(tracker)
    _open.append(tracker)
    try:
        with usage_mod.listen(tracker):
            tracker.step("start")
            yield tracker
            tracker.step("finish")
    finally:
        _open.remove(tracker)
        _current.reset(token)


def current() -> Tracker | None:
    """The tracker open around this work: this context's, else the one open in the process."""
    return _current.get() or (_open[0] if len(_open) == 1 else None)


def step(kind: Kind, label: str | None = None, *, done: int | None = None, total: int | None = None,
         accuracy: float | None = None, failed: int | None = None, calls: int | None = None) -> None:
    """Tell the open tracker (if any) that a unit of work finished (or, ``begin``, began)."""
    tracker = current()
    if tracker is not None:
        tracker.step(kind, label, done=done, total=total, accuracy=accuracy, failed=failed, calls=calls)
