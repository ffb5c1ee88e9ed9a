"""A ``calls=`` budget planned before the first call: stage sizes that end with a Special Set.

Every figure is an upper bound on billable calls, from `teammed.programs.accounting.expected_calls`
with the largest team (4 agents, or the configured size), a tie, and no early consensus; the
single agent answers in one call. A ``bootstrap`` compile runs its teacher on at most every
training question; ``labeled`` and ``none`` call nothing. The plan:

1. the minimum: stage 1 on one batch, a race of two configurations for ``min_rounds`` rounds, and
   the winner's compile on two questions. Below it `plan_tune` refuses, naming it;
2. the held-out proof (stage 4, every arm on every held-out question) when the budget covers it
   on top of the minimum; otherwise the Special Set is written without it, and says so;
3. the rest, in order: the compile's training questions (demos, up to ``compile_train``), stage 1's
   batches (up to ``stage1_batches``), the race's pool (up to ``pool_size``);
4. racing then runs round by round while the next round's bound fits in what is left after the
   reserve (stage 3 and the proof), and stops with the leading configuration when it does not.

Only ``calls=`` is planned; ``tokens=`` and ``usd=`` still stop the run when reached.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from teammed.config import TeamworkConfig
from teammed.errors import ConfigError
from teammed.programs.accounting import expected_calls

__all__ = ["TunePlan", "plan_tune", "upper_calls", "PLANNED_OPTIMIZERS"]

PLANNED_OPTIMIZERS = ("none", "labeled", "bootstrap")
_MAX_AGENTS = 4
_MIN_TRAIN = 2


@dataclass(frozen=True)
class TunePlan:
    """What a tune does within its budget (all calls are upper bounds)."""

    budget_calls: int | None
    stage1_batches: int
    pool_size: int
    compile_train: int
    proof: bool
    minimum: int
    proof_calls: int
    reserve: int  # kept for the winner's compile and, when planned, the proof

    @property
    def racing_allowance(self) -> int | None:
        """Calls stages 1 and 2 may spend together (None: no calls= budget)."""
        return None if self.budget_calls is None else self.budget_calls - self.reserve

    def describe(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        if self.budget_calls is None:
            return "no calls= budget: every stage at its configured size, held-out proof included"
        proof = ("held-out proof included" if self.proof else
                 f"held-out proof NOT run (it needs up to {self.proof_calls:,} calls more than the minimum)")
        return (f"plan for calls={self.budget_calls:,} (minimum {self.minimum:,}): stage 1 on {self.stage1_batches} "
                f"batch(es), a pool of {self.pool_size}, compile on {self.compile_train} questions, {proof}")


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
              compile_train: int, min_rounds: int) -> TunePlan:
    """The plan (see the module docstring); `ConfigError` when ``budget_calls`` is below the minimum."""
    compiles = optimizer == "bootstrap"
    if budget_calls is not None and optimizer not in PLANNED_OPTIMIZERS:
        raise ConfigError(f"a calls= budget is planned for the optimizers {', '.join(PLANNED_OPTIMIZERS)}; "
                          f"{optimizer} has no call bound to plan with. Use one of those, or give tokens= or usd= "
                          f"(which stop the run when reached, without a plan)")
    widest = max(upper_calls(c) for c in [*stage1_configs, all_config])  # any configuration's bound

    def compile_cost(config: Mapping[str, Any], train: int) -> int:
        return train * upper_calls(config) if compiles else 0

    def stage1(batches: int, train: int) -> int:
        evaluated = sum(batches * batch_size * upper_calls(c) for c in stage1_configs)
        return evaluated + sum(compile_cost(c, train) for c in compile_configs)

    def race(pool: int) -> int:
        return pool * min(min_rounds, rounds) * batch_size * widest

    proof_calls = n_eval * (widest + upper_calls(base_config) + upper_calls(all_config) + 1
                            + (widest if optimizer != "none" else 0))

    def stage3(train: int) -> int:
        return train * widest if compiles else 0

    max_train = max(_MIN_TRAIN, compile_train)
    minimum = stage1(1, min(_MIN_TRAIN, max_train)) + race(2) + stage3(min(_MIN_TRAIN, max_train))
    if budget_calls is None:
        return TunePlan(None, stage1_batches, pool_size, compile_train, True, minimum, proof_calls,
                        stage3(compile_train) + proof_calls)
    if budget_calls < minimum:
        raise ConfigError(f"--budget calls={budget_calls:,} is below the {minimum:,} calls the smallest tune "
                          f"can take (stage 1 on one batch of {batch_size}, a race of two for {min_rounds} rounds, "
                          f"the winner's compile); the held-out proof needs up to {proof_calls:,} more. Raise the "
                          f"budget, or lower --batch-size or --n-eval")
    proof = budget_calls >= minimum + proof_calls
    left = budget_calls - (proof_calls if proof else 0)

    def fits(batches: int, pool: int, train: int) -> bool:
        return stage1(batches, train) + race(pool) + stage3(train) <= left

    train = max(t for t in range(_MIN_TRAIN, max_train + 1) if fits(1, 2, t)) if compiles else compile_train
    batches = max(b for b in range(1, max(1, min(stage1_batches, rounds)) + 1) if fits(b, 2, train))
    pool = max(p for p in range(2, max(2, pool_size) + 1) if fits(batches, p, train))
    return TunePlan(budget_calls, batches, pool, train, proof, minimum, proof_calls,
                    stage3(train) + (proof_calls if proof else 0))

