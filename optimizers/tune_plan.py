"""A ``calls=`` budget planned before the first call: stage sizes that end with a Special Set.

Every figure is an upper bound on billable calls (`upper_calls`: `teammed.programs.accounting.expected_calls`
with the largest team, a tie and no early consensus; the single agent answers in one call; a ``bootstrap``
compile runs its teacher on at most every training question; ``labeled`` and ``none`` call nothing). Below
the minimum (stage 1 on one batch, a race of two for ``min_rounds`` rounds, the winner's compile on two
questions) `plan_tune` refuses, naming it. Above it the held-out proof is planned when the budget covers it,
then the stages grow (`_sized`), and racing runs while its next round fits beside the reserve (stage 3 and
the proof). A ``tokens=`` or ``usd=`` budget is planned in calls at a rate (`teammed.optimizers.tune_rate`),
and re-planned at the rate stage 1's first batch measures; with several limits, the tightest one plans.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from teammed.config import TeamworkConfig
from teammed.errors import ConfigError
from teammed.optimizers.tune_queue import Budget
from teammed.optimizers.tune_rate import CallRate
from teammed.programs.accounting import expected_calls

__all__ = ["TunePlan", "plan_tune", "upper_calls", "PLANNED_OPTIMIZERS", "BelowMinimum", "calls_equivalent",
           "limits_text"]

PLANNED_OPTIMIZERS = ("none", "labeled", "bootstrap")
_MAX_AGENTS = 4
_MIN_TRAIN = 2


class BelowMinimum(ConfigError):
    """The budget cannot cover the smallest tune; ``minimum``, ``proof_calls`` and ``first_batch`` (stage 1's
    first batch and its compiles, what runs before a tokens=/usd= plan is made again) are in calls."""

    def __init__(self, message: str, *, minimum: int, proof_calls: int, first_batch: int = 0):
        super().__init__(message)
        self.minimum, self.proof_calls, self.first_batch = minimum, proof_calls, first_batch


@dataclass(frozen=True)
class TunePlan:
    """What a tune does within its budget (all calls are upper bounds)."""

    budget_calls: int | None  # the budget in calls (a tokens=/usd= limit converted at ``rate``)
    stage1_batches: int
    pool_size: int
    compile_train: int
    proof: bool
    minimum: int
    proof_calls: int
    reserve: int  # kept for the winner's compile and, when planned, the proof
    budget: Budget | None = None
    rate: CallRate | None = None  # tokens and dollars per call, for tokens= and usd= limits
    # below the minimum at the estimated (worst-case) rate, but stage 1's first batch fits at the cheapest a call
    # can be: the smallest tune's sizes, until the first batch measures the rate and the rest is planned again
    provisional: bool = False

    def fits(self, spent: Mapping[str, float], upper: int) -> bool:
        """Whether ``upper`` more calls leave the reserve within every limit, given what was ``spent``."""
        if self.budget_calls is None or self.budget is None:
            return True
        need = upper + self.reserve
        if self.budget.calls is not None and spent.get("calls", 0) + need > self.budget.calls:
            return False
        if (self.rate is not None and self.budget.tokens is not None
                and spent.get("tokens", 0) + need * self.rate.tokens > self.budget.tokens):
            return False
        if (self.rate is not None and self.rate.usd is not None and self.budget.usd is not None
                and spent.get("cost_usd", 0) + need * self.rate.usd > self.budget.usd):
            return False
        return True

    def text(self) -> str:
        if self.budget_calls is None:
            stop = (f"; {limits_text(self.budget)} is not planned for this optimizer (its calls have no bound): it "
                    f"stops the tune where it is reached" if self.budget is not None else "")
            return f"no planned budget: every stage at its configured size, held-out proof included{stop}"
        proof = ("held-out proof included" if self.proof else
                 f"held-out proof NOT run (it needs up to {self.proof_calls:,} calls more than the minimum)")
        given = (f"calls={self.budget_calls:,}" if self.rate is None else
                 f"{limits_text(self.budget)} = {self.budget_calls:,} calls at {self.rate.tokens:,.0f} tokens a call "
                 f"({self.rate.source})")
        if self.provisional:
            assert self.rate is not None
            return (f"plan for {limits_text(self.budget)}: below the smallest tune ({self.minimum:,} calls) at "
                    f"{self.rate.tokens:,.0f} tokens a call ({self.rate.source}, a worst case), so the tune starts at "
                    f"the smallest tune's sizes; stage 1's first batch measures the rate, and the rest is planned at "
                    f"it (or the tune stops there, resumable, naming the budget it needs)")
        return (f"plan for {given} (minimum {self.minimum:,} calls): stage 1 on {self.stage1_batches} "
                f"batch(es), a pool of {self.pool_size}, compile on {self.compile_train} questions, {proof}")


def limits_text(budget: Budget | None) -> str:
    if budget is None:
        return "no budget"
    parts = [f"calls={budget.calls:,}" if budget.calls is not None else "",
             f"tokens={budget.tokens:,.0f}" if budget.tokens is not None else "",
             f"usd={budget.usd:g}" if budget.usd is not None else ""]
    return ",".join(p for p in parts if p)


def calls_equivalent(budget: Budget | None, rate: CallRate | None,
                     spent: Mapping[str, float] | None = None) -> int | None:
    """The calls ``budget`` allows in all: its calls= limit, and what is left of its tokens= and usd= limits
    at ``rate`` on top of the calls already ``spent`` (the tightest wins; None: no limit)."""
    if budget is None:
        return None
    spent = spent or {}
    done = float(spent.get("calls", 0))
    limits: list[float] = []
    if budget.calls is not None:
        limits.append(budget.calls)
    for name, limit, key, per_call in (("tokens", budget.tokens, "tokens", rate.tokens if rate else None),
                                       ("usd", budget.usd, "cost_usd", rate.usd if rate else None)):
        if limit is None:
            continue
        if per_call is None:
            raise ConfigError(f"a {name}= budget needs the cost of a call to be planned; give --budget calls=N "
                              f"instead")
        limits.append(done + max(0.0, limit - float(spent.get(key, 0))) / max(per_call, 1e-12))
    return int(min(limits)) if limits else None


def upper_calls(config: Mapping[str, Any] | None) -> int:
    """The most calls one question can take under ``config`` (None: the single agent)."""
    if config is None:
        return 1
    cfg = TeamworkConfig.build(**config)
    n = cfg.n_agents if isinstance(cfg.n_agents, int) else _MAX_AGENTS
    return expected_calls(cfg, n, tie=True)


def plan_tune(*, optimizer: str, budget_calls: int | None, batch_size: int, rounds: int, n_eval: int,
              stage1_configs: Sequence[Mapping[str, Any]], compile_configs: Sequence[Mapping[str, Any]],
              all_config: Mapping[str, Any], base_config: Mapping[str, Any], stage1_batches: int, pool_size: int,
              compile_train: int, min_rounds: int, budget: Budget | None = None,
              rate: CallRate | None = None, train: int | None = None) -> TunePlan:
    """The plan (see the module docstring); `BelowMinimum` when ``budget_calls`` is below the minimum.

    ``budget`` and ``rate`` are carried for `TunePlan.fits` (without ``budget``: calls=``budget_calls``).
    ``train`` fixes the compile's training questions (stage 1 already compiled on that many: a plan
    made again, or a resume with another budget, must keep them, or every compile cell would change)."""
    if budget_calls is not None:
        budget = Budget(calls=budget_calls) if budget is None else budget
        if optimizer not in PLANNED_OPTIMIZERS:
            raise ConfigError(f"a calls= budget is planned for the optimizers {', '.join(PLANNED_OPTIMIZERS)}; "
                              f"{optimizer} has no call bound to plan with. Use one of those, or give tokens= or "
                              f"usd= (which stop the run when reached, without a plan)")
    compiles = optimizer == "bootstrap"
    widest = max(upper_calls(c) for c in [*stage1_configs, all_config])  # any configuration's bound
    costs = _Costs(compiles=compiles, batch_size=batch_size, rounds=rounds, min_rounds=min_rounds, widest=widest,
                   stage1_configs=stage1_configs, compile_configs=compile_configs)
    proof_calls = n_eval * (widest + upper_calls(base_config) + upper_calls(all_config) + 1
                            + (widest if optimizer != "none" else 0))
    max_train = max(_MIN_TRAIN, compile_train) if train is None else train
    least_train = min(_MIN_TRAIN, max_train) if train is None else train
    minimum = costs.total(1, 2, least_train)
    if budget_calls is None:
        return TunePlan(None, stage1_batches, pool_size, compile_train, True, minimum, proof_calls,
                        costs.stage3(compile_train) + proof_calls, budget, rate)
    if budget_calls < minimum:
        raise BelowMinimum(f"the budget calls={budget_calls:,} is below the {minimum:,} calls the smallest tune "
                           f"can take (stage 1 on one batch of {batch_size}, a race of two for {min_rounds} rounds, "
                           f"the winner's compile); the held-out proof needs up to {proof_calls:,} more. Raise the "
                           f"budget, or use a smaller batch size or fewer held-out questions", minimum=minimum,
                           proof_calls=proof_calls, first_batch=costs.stage1(1, least_train))
    proof = budget_calls >= minimum + proof_calls
    batches, pool, train = _sized(costs, budget_calls - (proof_calls if proof else 0), train=train,
                                  compile_train=compile_train, max_train=max_train, stage1_batches=stage1_batches,
                                  pool_size=pool_size)
    return TunePlan(budget_calls, batches, pool, train, proof, minimum, proof_calls,
                    costs.stage3(train) + (proof_calls if proof else 0), budget, rate)


def _sized(costs: _Costs, left: int, *, train: int | None, compile_train: int, max_train: int, stage1_batches: int,
           pool_size: int) -> tuple[int, int, int]:
    """Stage 1's batches, the pool raced and the compile's training questions: the most that fit in
    ``left`` calls, the training questions first (fixed when ``train`` is given), then the batches, then
    the pool."""
    def fits(batches: int, pool: int, train: int) -> bool:
        return costs.total(batches, pool, train) <= left

    if not costs.compiles:
        train = compile_train
    elif train is None:
        train = max(t for t in range(_MIN_TRAIN, max_train + 1) if fits(1, 2, t))
    batches = max(b for b in range(1, max(1, min(stage1_batches, costs.rounds)) + 1) if fits(b, 2, train))
    pool = max(p for p in range(2, max(2, pool_size) + 1) if fits(batches, p, train))
    return batches, pool, train


@dataclass(frozen=True)
class _Costs:
    """The most calls each tuning stage can take: stage 1 on ``batches`` batches (with its compiles on
    ``train`` questions), a race of ``pool`` configurations, and the winner's compile."""

    compiles: bool
    batch_size: int
    rounds: int
    min_rounds: int
    widest: int  # the most calls one question can take under any configuration
    stage1_configs: Sequence[Mapping[str, Any]]
    compile_configs: Sequence[Mapping[str, Any]]

    def stage1(self, batches: int, train: int) -> int:
        evaluated = sum(batches * self.batch_size * upper_calls(c) for c in self.stage1_configs)
        return evaluated + (sum(train * upper_calls(c) for c in self.compile_configs) if self.compiles else 0)

    def race(self, pool: int) -> int:
        return pool * min(self.min_rounds, self.rounds) * self.batch_size * self.widest

    def stage3(self, train: int) -> int:
        return train * self.widest if self.compiles else 0

    def total(self, batches: int, pool: int, train: int) -> int:
        return self.stage1(batches, train) + self.race(pool) + self.stage3(train)

