"""Optuna trials as a work queue: cells are enqueued trials, workers pull them with ``study.ask()``.

A *cell* is one unit of work described by a JSON dict, keyed by its canonical JSON. `WorkQueue.run`
makes sure every cell has a COMPLETE trial holding its result: it enqueues the missing ones, pulls WAITING
trials (the storage hands each to exactly one worker), runs them and tells the result, so several processes
on one study share the cells and a resumed one runs only the rest. A budget, checked before each cell,
stops every worker cleanly. A RUNNING trial whose worker is gone (`teammed.optimizers._storage.worker_gone`;
on another host after ``stale_s``) is failed, and its cell enqueued again. Nothing here depends on what a
cell means.
"""

from __future__ import annotations

import json
import logging
import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import TrialState

from teammed.errors import ConfigError, TeammedError
from teammed.events import step
from teammed.optimizers._storage import UNCLAIMED_S, WORKER, fail_gone

__all__ = ["WorkQueue", "Budget", "BudgetSpent", "cell_key", "parse_budget", "WORKER"]

logger = logging.getLogger(__name__)

_BILLABLE = ("calls", "tokens", "cost_usd")


def cell_key(cell: Mapping[str, Any]) -> str:
    return json.dumps(cell, sort_keys=True, separators=(",", ":"))


class BudgetSpent(TeammedError):
    """The budget ran out before the cells were done; resume with a larger budget."""


@dataclass(frozen=True)
class Budget:
    """Limits on what a run may spend (billable, as if nothing came from a cache); None means no limit."""

    calls: int | None = None
    tokens: float | None = None
    usd: float | None = None

    def spent(self, used: Mapping[str, float]) -> str | None:
        """The first limit ``used`` reached, as text, or None."""
        limits = (("calls", self.calls, "calls"), ("tokens", self.tokens, "tokens"), ("usd", self.usd, "cost_usd"))
        return next((f"{name}={used.get(key, 0):g} of {limit:g}" for name, limit, key in limits
                     if limit is not None and used.get(key, 0) >= limit), None)


def parse_budget(text: str) -> Budget:
    """``"calls=2000"``, ``"tokens=2e6"``, ``"usd=5"`` or several joined by commas."""
    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, raw = part.partition("=")
        name = name.strip().lower()
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if not sep or name not in ("calls", "tokens", "usd") or not math.isfinite(value) or value <= 0:
            raise ConfigError(f"cannot read budget {part!r}; use calls=N, tokens=N or usd=X with a positive, "
                              f"finite number, e.g. --budget calls=2000")
        if name in values:
            raise ConfigError(f"budget {text!r} gives {name} twice; give each of calls, tokens and usd once, "
                              f"e.g. --budget {name}={raw.strip()}")
        values[name] = value
    if not values:
        raise ConfigError("the budget is empty; give e.g. --budget calls=2000, tokens=2e6 or usd=5")
    return Budget(calls=int(values["calls"]) if "calls" in values else None, tokens=values.get("tokens"),
                  usd=values.get("usd"))


class WorkQueue:
    """The cells of one study; ``execute(cell) -> result`` (a JSON dict, billable counts included)."""

    def __init__(self, study: optuna.Study, *, budget: Budget | None = None, poll_s: float = 0.5,
                 stale_s: float = 1800.0, unclaimed_s: float = UNCLAIMED_S):
        self.study, self.budget, self.poll_s, self.stale_s = study, budget, poll_s, stale_s
        self.unclaimed_s = unclaimed_s

    def results(self) -> dict[str, dict[str, Any]]:
        """Every finished cell's result by key (the first finisher wins a duplicate)."""
        return _by_state(self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))[0]

    def spent(self, done: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, float]:
        """Billable calls, tokens and cost of every finished cell."""
        done = self.results() if done is None else done
        return {key: sum((float(r.get(key, 0) or 0) for r in done.values()), 0.0) for key in _BILLABLE}

    def run(self, cells: Sequence[Mapping[str, Any]],
            execute: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Every cell's result by key; runs the missing ones (and any other worker's enqueued cells)."""
        wanted = {cell_key(c): dict(c) for c in cells}
        told = -1
        while True:
            trials = self.study.get_trials(deepcopy=False)
            done, pending, running = _by_state(trials)
            missing = [k for k in wanted if k not in done]
            if len(wanted) - len(missing) != told:  # progress: cells done (by any worker) of this batch
                told = len(wanted) - len(missing)
                step("cell", done=told, total=len(wanted))
            if not missing:
                return {k: done[k] for k in wanted}
            self._check_budget(done, left=len(missing))
            for key in missing:
                if key not in pending:
                    self.study.enqueue_trial({}, user_attrs={"cell_key": key, "cell": wanted[key]})
            if not any(t.state == TrialState.WAITING for t in trials) and all(k in pending for k in missing):
                fail_gone(self.study, running, "holds a stale cell; failing it so it runs again",
                          stale_s=self.stale_s, unclaimed_s=self.unclaimed_s, now=time.time())
                time.sleep(self.poll_s)  # other workers are running the rest
                continue
            self._pull(execute)

    def _check_budget(self, done: Mapping[str, Mapping[str, Any]], *, left: int) -> None:
        if self.budget is not None:
            reached = self.budget.spent(self.spent(done))
            if reached:
                raise BudgetSpent(f"budget reached ({reached}) with {left} cells left; "
                                  f"run again with a larger --budget to continue")

    def _twin(self, number: int, key: str | None) -> int | None:
        """A finished trial of the same cell, or a running one with a smaller number."""
        trials = self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING))
        return next((t.number for t in trials if t.number != number and t.user_attrs.get("cell_key") == key
                     and (t.state == TrialState.COMPLETE or t.number < number)), None)

    def _pull(self, execute: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        # RDB storages have heartbeats, which only Study.optimize sends
        with warnings.catch_warnings(action="ignore", category=UserWarning):
            trial = self.study.ask()
        # recorded first thing: a trial killed before this is reaped by its start time (see `worker_gone`)
        trial.set_user_attr("worker", WORKER)
        trial.set_user_attr("started", time.time())
        cell = trial.user_attrs.get("cell")
        if cell is None:  # the queue emptied under us: Optuna made a fresh trial instead
            self.study.tell(trial, state=TrialState.FAIL)
            return
        twin = self._twin(trial.number, trial.user_attrs.get("cell_key"))
        if twin is not None:  # two workers enqueued the same cell: the earlier trial does it
            trial.set_user_attr("duplicate_of", twin)
            self.study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
            return
        try:
            result = execute(dict(cell))
        except BaseException:
            self.study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
            raise
        try:
            trial.set_user_attr("result", result)
            self.study.tell(trial, float(result.get("value", 0.0)), skip_if_finished=True)
        except (RuntimeError, ValueError) as exc:  # failed as stale by another worker meanwhile
            logger.warning("trial %d finished after being failed as stale (%s)", trial.number, exc)


def _by_state(trials: Sequence[optuna.trial.FrozenTrial]
              ) -> tuple[dict[str, dict[str, Any]], set[str], list[optuna.trial.FrozenTrial]]:
    """The cells' trials: each finished cell's result by key, the keys waiting or running, and the
    running trials."""
    done: dict[str, dict[str, Any]] = {}
    pending: set[str] = set()
    running = []
    for t in trials:
        key = t.user_attrs.get("cell_key")
        if key is None:
            continue
        if t.state == TrialState.COMPLETE and "result" in t.user_attrs:
            done.setdefault(key, t.user_attrs["result"])
        elif t.state in (TrialState.WAITING, TrialState.RUNNING):
            pending.add(key)
            if t.state == TrialState.RUNNING:
                running.append(t)
    return done, pending, running
