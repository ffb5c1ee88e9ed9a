"""`tune`: prompts and components designed together, and proven on questions tuning never saw.

The four stages (behaviours, components, the winner's compile, the held-out proof) and the budget
plan are described in docs/commands/tune.md. Every unit of work is a cell of one Optuna study
(`teammed.optimizers.tune_queue`), so a resumed run or another worker continues where it stopped.
Every figure is billable (a memo or cache hit costs what the call would have cost); the memo's reuse
rate is reported on its own.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy
import optuna

from teammed import usage
from teammed.backends.base import MeteredLM
from teammed.components import COMPONENTS, TABLE, completed, satisfied
from teammed.config import PRESETS, TeamworkConfig, config_from_components
from teammed.errors import ConfigError, DataError, WorkFailed
from teammed.events import step
from teammed.optimizers._evaluated import pareto_front
from teammed.optimizers._scoring import cell_result, score_questions, tokens_of
from teammed.optimizers._space import SearchSpace, subset_label, valid_subsets
from teammed.optimizers.compile import MAX_DEMOS, compile_program, examples_from_questions
from teammed.optimizers.special_set import FORMAT
from teammed.optimizers.tune_memo import MemoLM
from teammed.optimizers.tune_plan import (
    PLANNED_OPTIMIZERS,
    BelowMinimum,
    TunePlan,
    calls_equivalent,
    limits_text,
    plan_tune,
    upper_calls,
)
from teammed.optimizers.tune_queue import Budget, BudgetSpent, WorkQueue, cell_key
from teammed.optimizers.tune_race import incumbent, race
from teammed.optimizers.tune_rate import CallRate, estimate_rate, measured_rate
from teammed.records import write_atomic
from teammed.types import Question

__all__ = ["TuneSettings", "TuneOutcome", "tune", "open_tune_study", "check_disjoint", "FORMAT", "first_rate",
           "make_plan", "opening_plan"]

logger = logging.getLogger(__name__)

# each component's own preset (it with its companions, from the component table), and that preset without it
_OWN_PRESET = {c.name: PRESETS[c.presets[0]].components for c in TABLE}
_WITHOUT = {c: tuple(x for x in comps if x != c) for c, comps in _OWN_PRESET.items()}


@dataclass(frozen=True)
class TuneSettings:
    """What a tune run does; stored on the study so a resume cannot silently change it."""

    dataset: str
    model: str
    server: str = ""  # where the answers come from besides the model's name (`experiments._backend.server_of`)
    optimizer: str = "bootstrap"
    seed: int = 111
    batch_size: int = 10
    stage1_batches: int = 3
    pool_size: int = 8
    alpha: float = 0.05
    min_rounds: int = 2
    compile_train: int = 10
    n_turns: int = 2
    n_agents: Any = "auto"


class TuneAborted(WorkFailed):
    """Every question of a cell failed: tuning on failures would pick a configuration by accident."""


@dataclass
class TuneOutcome:
    status: str  # "done" or "budget"
    stage: str
    report: dict[str, Any]
    special_set_path: Path | None = None
    report_path: Path | None = None
    message: str = ""


def check_disjoint(tune_questions: Sequence[Question], eval_questions: Sequence[Question]) -> None:
    overlap = {q.id for q in tune_questions} & {q.id for q in eval_questions}
    if overlap:
        raise DataError(f"{len(overlap)} questions are both tuning and held-out (e.g. {sorted(overlap)[0]!r}); "
                        f"draw them from teammed.data.splits.partition parts 'tune' and 'eval'")


def _digest(questions: Sequence[Question]) -> str:
    return hashlib.sha256("\n".join(q.id for q in questions).encode()).hexdigest()


def open_tune_study(storage: str | None, study_name: str, out_dir: Path) -> tuple[optuna.Study, str]:
    """The study (created if missing) on ``storage``: None = SQLite in ``out_dir``, ``:memory:``, a journal
    file or a database URL."""
    from teammed.optimizers._storage import open_storage

    backend, reference = ((optuna.storages.InMemoryStorage(), ":memory:") if storage == ":memory:"
                          else open_storage(storage, out_dir))
    study = optuna.create_study(storage=backend, study_name=study_name, load_if_exists=True,
                                direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    return study, reference


def _config_json(components: Sequence[str], s: TuneSettings) -> dict[str, Any]:
    return config_from_components(list(components), n_turns=s.n_turns, n_agents=s.n_agents).model_dump(mode="json")


def _label(config: Mapping[str, Any] | None) -> str:
    return "single" if config is None else subset_label(_components(config))


def _atomic_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, default=str))


def stage1_configs(s: TuneSettings) -> dict[str, dict[str, Any]]:
    """Label -> config of base, every component's preset and the preset without the component."""
    configs = {"base": _config_json((), s)}
    configs.update({subset_label(x): _config_json(x, s) for c in COMPONENTS for x in (_OWN_PRESET[c], _WITHOUT[c])})
    return configs


def compile_cells(s: TuneSettings) -> list[dict[str, Any]]:
    """Stage 1's compile cells: base, then each component's preset (none without an optimizer)."""
    if s.optimizer == "none":
        return []
    return [{"kind": "compile", "stage": 1, "name": name, "config": _config_json(own, s), "train": s.compile_train,
             "start": "none", "without": None if without is None else _config_json(without, s)}
            for name, own, without in [("base", (), None), *((c, _OWN_PRESET[c], _WITHOUT[c]) for c in COMPONENTS)]]


def needs_rate(s: TuneSettings, budget: Budget | None) -> bool:
    """Whether ``budget`` has a tokens= or usd= limit to plan (with an optimizer whose calls are bounded)."""
    return (budget is not None and (budget.tokens is not None or budget.usd is not None)
            and s.optimizer in PLANNED_OPTIMIZERS)


def first_rate(s: TuneSettings, budget: Budget | None, tune_questions: Sequence[Question], *,
               max_tokens: int | None, prices: tuple[float, float] | None,
               eval_questions: Sequence[Question] = (), model: str = "gpt-4o",
               api_base: str | None = None) -> CallRate | None:
    """The rate a tokens=/usd= budget is planned at before the first call (`teammed.optimizers.tune_rate`),
    on the longest of the tuning and held-out questions."""
    if not needs_rate(s, budget):
        return None
    assert budget is not None
    if budget.usd is not None and prices is None:
        raise ConfigError(f"--budget usd={budget.usd:g} cannot be planned without the model's prices per token; "
                          f"give calls=N or tokens=N instead")
    if not max_tokens:
        raise ConfigError("a tokens= or usd= budget is planned with each answer's bound, and this backend has no "
                          "max_tokens; set --max-tokens, or give --budget calls=N")
    demos = 0 if s.optimizer == "none" else MAX_DEMOS
    return estimate_rate(_config_json(COMPONENTS, s), tune_questions, max_tokens=max_tokens, demos=demos,
                         prices=prices, held_out=eval_questions, model=model, api_base=api_base)


def make_plan(s: TuneSettings, budget: Budget | None, *, n_tune: int, n_eval: int, rate: CallRate | None = None,
              spent: Mapping[str, float] | None = None, train: int | None = None) -> TunePlan:
    """Plan the stages from ``budget`` (`teammed.optimizers.tune_plan`), a tokens=/usd= limit in calls at ``rate``
    on top of what was ``spent``; ``train`` keeps the training questions stage 1 already compiled on."""
    if needs_rate(s, budget) and rate is None:
        raise ConfigError("a tokens= or usd= budget is planned at a rate per call: pass `first_rate(...)`")
    planned = s.optimizer in PLANNED_OPTIMIZERS
    budget_calls = calls_equivalent(budget, rate, spent) if planned else (budget.calls if budget else None)
    try:
        return plan_tune(optimizer=s.optimizer, budget_calls=budget_calls,
                         batch_size=s.batch_size, rounds=max(0, n_tune // s.batch_size), n_eval=n_eval,
                         stage1_configs=list(stage1_configs(s).values()),
                         compile_configs=[c["config"] for c in compile_cells(s)],
                         all_config=_config_json(COMPONENTS, s), base_config=_config_json((), s),
                         stage1_batches=s.stage1_batches, pool_size=s.pool_size, compile_train=s.compile_train,
                         min_rounds=s.min_rounds, budget=budget, rate=rate if needs_rate(s, budget) else None,
                         train=train)
    except BelowMinimum as exc:
        if rate is None or budget is None:
            raise
        raise BelowMinimum(_short_of(budget, rate, exc.minimum, exc.proof_calls, s) + ". Raise the budget, or use "
                           "a smaller batch size or fewer held-out questions", minimum=exc.minimum,
                           proof_calls=exc.proof_calls, first_batch=exc.first_batch) from None


def opening_plan(s: TuneSettings, budget: Budget | None, *, n_tune: int, n_eval: int,
                 rate: CallRate | None, train: int | None = None) -> TunePlan:
    """The plan before the first call (`make_plan` at `first_rate`). A tokens=/usd= budget below the minimum at
    the estimated (worst-case) rate starts at the smallest tune's sizes when stage 1's first batch fits at the
    cheapest a call can be (`CallRate.cheapest`); the first batch's re-plan decides (docs/commands/tune.md)."""
    try:
        return make_plan(s, budget, n_tune=n_tune, n_eval=n_eval, rate=rate, train=train)
    except BelowMinimum as exc:
        if rate is None or budget is None or rate.source != "estimated" or (
                budget.calls is not None and budget.calls < exc.minimum):
            raise
        floor = rate.cheapest()
        if (calls_equivalent(dataclasses.replace(budget, calls=None), floor) or 0) < exc.first_batch:
            raise BelowMinimum(f"{exc}; even at the cheapest a call can be here ({floor.tokens:,.0f} tokens: no "
                               f"demos, one-token answers), stage 1's first batch ({exc.first_batch:,} calls) does not "
                               f"fit", minimum=exc.minimum, proof_calls=exc.proof_calls,
                               first_batch=exc.first_batch) from None
        smallest = make_plan(s, Budget(calls=exc.minimum), n_tune=n_tune, n_eval=n_eval, train=train)
        return dataclasses.replace(smallest, budget=budget, rate=rate, provisional=True)


def _short_of(budget: Budget, rate: CallRate, minimum: int, proof_calls: int, s: TuneSettings) -> str:
    """Why a tokens=/usd= budget is below the smallest tune, in its own units."""
    needs = []
    if budget.calls is not None and budget.calls < minimum:
        needs.append(f"calls={minimum:,}")
    if budget.tokens is not None:
        needs.append(f"tokens={math.ceil(minimum * rate.tokens):,}")
    if budget.usd is not None and rate.usd is not None:
        needs.append(f"usd={_usd_covering(minimum, rate)}")
    return (f"the budget {limits_text(budget)} is below the smallest tune: {minimum:,} calls (stage 1 on one batch "
            f"of {s.batch_size}, a race of two for {s.min_rounds} rounds, the winner's compile) at "
            f"{rate.tokens:,.0f} tokens a call, {rate.source} ({rate.detail}), need {', '.join(needs)}; "
            f"the held-out proof needs up to {proof_calls:,} calls more")


def _usd_covering(calls: int, rate: CallRate) -> str:
    """The smallest round amount of dollars that plans ``calls`` at ``rate`` (never one rounded below it)."""
    assert rate.usd is not None
    need = calls * rate.usd
    step = 0.01 if need >= 1 else 10 ** (math.floor(math.log10(max(need, 1e-12))) - 3)
    value = math.ceil(need / step) * step
    while (calls_equivalent(Budget(usd=value), rate) or 0) < calls:
        value += step
    return f"{value:.10g}"


def replan_thresholds(rate: CallRate, spent: Mapping[str, float], budget: Budget, buys: int | None, minimum: int,
                      proof_calls: int) -> dict[str, Any]:
    """What the re-plan after stage 1's first batch decided on: limits, measured rate, spend, the calls the budget
    buys at that rate, and the two thresholds (the smallest tune, and with the proof; upper bounds on calls)."""
    return {"limits": {"calls": budget.calls, "tokens": budget.tokens, "usd": budget.usd},
            "rate": {"tokens": rate.tokens, "usd": rate.usd},
            "spent": {"calls": int(spent.get("calls", 0)), "tokens": float(spent.get("tokens", 0)),
                      "usd": float(spent.get("cost_usd", 0))},
            "budget_calls": buys, "minimum": minimum, "with_proof": minimum + proof_calls}


class _Pipeline:
    def __init__(self, *, tune_questions: Sequence[Question], eval_questions: Sequence[Question],
                 lm: dspy.BaseLM, settings: TuneSettings, queue: WorkQueue, plan: TunePlan,
                 replan: Callable[..., TunePlan] | None = None):  # `make_plan` but for rate, spent and train
        self.s, self.queue = settings, queue
        self.lm = lm if isinstance(lm, MemoLM) or not isinstance(lm, MeteredLM) else MemoLM(lm)
        ordered = sorted(tune_questions, key=lambda q: q.id)
        random.Random(settings.seed).shuffle(ordered)
        self.tune_q, self.eval_q = ordered, list(eval_questions)
        b = settings.batch_size
        self.rounds = [[q.id for q in ordered[i:i + b]] for i in range(0, len(ordered) - b + 1, b)]
        self.eval_batches = [[q.id for q in self.eval_q[i:i + b]] for i in range(0, len(self.eval_q), b)]
        self.by_id = {q.id: q for q in [*ordered, *self.eval_q]}
        self.compiled: dict[str, dict[str, Any]] = {}
        self.prompts1 = "stage1" if settings.optimizer != "none" else "none"
        self.prompts3 = "stage3" if settings.optimizer != "none" else self.prompts1
        self.plan = plan
        self.plans = [plan]
        self.replan = replan
        self.replanned: dict[str, Any] | None = None  # the re-plan's thresholds (`replan_thresholds`)
        self.racing_stopped: str | None = None

    def _program(self, config: Mapping[str, Any] | None, prompts: str) -> dspy.Module:
        if config is None:
            from teammed.programs.peers import build_system

            return build_system("zero_shot")
        from teammed.programs.teamwork import TeamworkProgram

        program = TeamworkProgram(TeamworkConfig.build(**config))
        if prompts == "stage1":
            program.load_state(self._compose(program, config))
        elif prompts == "stage3":
            program.load_state(self.compiled["stage3"]["state"])
        return program

    def _compose(self, program: dspy.Module, config: Mapping[str, Any]) -> dict[str, Any]:
        """The stage-1 prompts for ``config``: each predictor from the component owning it, else from base."""
        state = program.dump_state()
        sources = [self.compiled.get("base", {}).get("state", {})]
        sources += [{k: v for k, v in self.compiled[c]["state"].items() if k in self.compiled[c]["own"]}
                    for c in COMPONENTS if config.get(c) and c in self.compiled]
        for source in sources:
            state.update({k: v for k, v in source.items() if k in state})
        return state

    def execute(self, cell: dict[str, Any]) -> dict[str, Any]:
        before = self.lm.stats() if isinstance(self.lm, MemoLM) else {"requests": 0, "hits": 0}
        result = self._compile(cell) if cell["kind"] == "compile" else self._evaluate(cell)
        after = self.lm.stats() if isinstance(self.lm, MemoLM) else before
        result.update({f"memo_{k}": after[k] - before[k] for k in ("requests", "hits")})
        return result

    def _evaluate(self, cell: dict[str, Any]) -> dict[str, Any]:
        batches = self.rounds if cell["part"] == "tune" else self.eval_batches
        ids = batches[cell["batch"]]
        program = self._program(cell["config"], cell["prompts"])
        rows = score_questions(program, [self.by_id[i] for i in ids], self.lm)
        if rows and all(r.failed for r in rows):  # a failure is never scored as 0%
            kinds = {r.error_kind for r in rows}
            what = (f"the same fatal backend error ({rows[0].error_kind})" if len(kinds) == 1 and None not in kinds
                    else "errors")
            raise TuneAborted(f"every question of a {cell['part']} cell failed with {what}: {rows[0].error} "
                              f"(no Special Set was written; rerun the same command to resume once this is fixed)")
        return {**cell_result(rows), "tokens_each": [tokens_of(r) for r in rows]}

    def _compile(self, cell: dict[str, Any]) -> dict[str, Any]:
        from teammed.programs.teamwork import TeamworkProgram

        student = self._program(cell["config"], cell["start"])  # "none", or "stage1": the stage-1 prompts
        n = self.s.compile_train
        train = examples_from_questions(self.tune_q[:n])
        val = examples_from_questions(self.tune_q[n:2 * n]) or train
        with usage.track() as used:  # what DSPy prints is the caller's (the command line: progress.quiet_libraries)
            compiled = compile_program(student, optimizer=self.s.optimizer, trainset=train, valset=val, lm=self.lm,
                                       seed=self.s.seed)
        state = json.loads(json.dumps(compiled.dump_state(), default=str))
        own = sorted(state)
        if cell.get("without") is not None:
            others = {n for n, _ in TeamworkProgram(TeamworkConfig.build(**cell["without"])).named_predictors()}
            own = [k for k in own if k not in others]
        return {"state": state, "own": own, "value": 0.0, "calls": used.calls,
                "tokens": used.prompt_tokens + used.completion_tokens, "cost_usd": used.cost_usd}

    def stage1(self) -> dict[str, float]:
        if self.s.optimizer != "none":
            cells = compile_cells(self.s)
            done = self.queue.run(cells, self.execute)
            self.compiled.update((cell["name"], done[cell_key(cell)]) for cell in cells)
        configs = stage1_configs(self.s)
        if self.replan is not None:  # a tokens=/usd= plan: the first batch measures the rate, the rest is re-planned
            first = [self._eval_cell(cfg, self.prompts1, "tune", 0) for cfg in configs.values()]
            done = self.queue.run(first, self.execute)
            self._replan([done[cell_key(c)] for c in first] + [self.compiled[c["name"]] for c in compile_cells(self.s)])
        n1 = min(self.s.stage1_batches, len(self.rounds))
        cells = [self._eval_cell(cfg, self.prompts1, "tune", b) for cfg in configs.values() for b in range(n1)]
        done = self.queue.run(cells, self.execute)
        acc = {}
        for label, cfg in configs.items():
            results = [done[cell_key(self._eval_cell(cfg, self.prompts1, "tune", b))] for b in range(n1)]
            flat = [x for r in results for x in r["correct"]]
            acc[label] = sum(flat) / len(flat) if flat else 0.0
        influence = {c: round(acc[subset_label(_OWN_PRESET[c])] - acc[subset_label(_WITHOUT[c])], 6)
                     for c in COMPONENTS}
        self.stage1_accuracy = acc
        return influence

    def _replan(self, results: Sequence[Mapping[str, Any]]) -> None:
        """Plan the rest of the tune again at the rate the finished cells measured."""
        assert self.replan is not None and self.plan.rate is not None
        rate = measured_rate(results, fallback=self.plan.rate)
        # what these cells spent, not the study's total: a resumed run plans exactly as the first one did
        spent = {key: sum(float(r.get(key, 0) or 0) for r in results) for key in ("calls", "tokens", "cost_usd")}
        assert self.plan.budget is not None
        buys = calls_equivalent(self.plan.budget, rate, spent)
        try:
            plan = self.replan(rate=rate, spent=spent, train=self.s.compile_train)
        except BelowMinimum as exc:
            self.replanned = replan_thresholds(rate, spent, self.plan.budget, buys, exc.minimum, exc.proof_calls)
            raise BudgetSpent(f"stage 1's first batch measured {rate.tokens:,.0f} tokens a call (estimated "
                              f"{self.plan.rate.tokens:,.0f} before the first call): "
                              f"{_short_of(self.plan.budget, rate, exc.minimum, exc.proof_calls, self.s)}. Rerun "
                              f"the same command with that budget to resume: the finished cells are kept") from None
        logger.info("tune: re-planned at the measured rate: %s", plan.text())
        self.replanned = replan_thresholds(rate, spent, self.plan.budget, buys, plan.minimum, plan.proof_calls)
        self.plans.append(plan)
        self.plan = plan
        self.s = dataclasses.replace(self.s, stage1_batches=plan.stage1_batches, pool_size=plan.pool_size,
                                     compile_train=plan.compile_train)

    def _eval_cell(self, config: Mapping[str, Any] | None, prompts: str, part: str, batch: int) -> dict[str, Any]:
        return {"kind": "eval", "config": dict(config) if config is not None else None, "prompts": prompts,
                "part": part, "batch": batch}

    def stage2(self, pool: list[dict[str, Any]],
               influence: Mapping[str, float] | None = None) -> tuple[str, Any]:
        """Screen the pool on the first third of the tuning rounds, then climb from its leader one
        one-change neighbour at a time (docs/commands/tune.md, stage 2)."""
        by_label = {_label(c): c for c in pool}
        entrants = list(by_label)
        self.races: list[dict[str, Any]] = []
        current, state = self._race(entrants, by_label, screen_rounds(len(self.rounds), self.s.min_rounds))
        settled = {h["dropped"] for h in state.history}
        if state.rounds >= len(self.rounds):
            settled.update(entrants)
        p_on = on_probabilities(influence) if influence else {}
        while self.racing_stopped is None:
            settled.add(current)
            here = by_label[current]
            untried = [n for n in neighbours(here, self.s) if _label(n) not in settled]
            untried.sort(key=lambda n: -_promise(here, n, p_on))  # stable: ties stay in component order
            moved = False
            for config in untried:
                label = _label(config)
                by_label.setdefault(label, config)
                winner, state = self._race([current, label], by_label)
                settled.add(label)
                if self.racing_stopped is not None or winner != current:
                    current, moved = winner, winner != current
                    break
            if not moved:
                break
        return current, by_label

    def _race(self, labels: list[str], by_label: Mapping[str, Any], limit: int | None = None) -> tuple[str, Any]:
        """Race ``labels`` round by round up to ``limit`` rounds (all of them by default), logged in ``races``."""
        limit = len(self.rounds) if limit is None else min(limit, len(self.rounds))
        while True:
            scores, tokens = self._scores({c: by_label[c] for c in labels})
            state = race(labels, self.rounds[:limit], scores, tokens, alpha=self.s.alpha,
                         min_rounds=self.s.min_rounds)
            if len(state.alive) > 1 and state.rounds < limit:  # the race goes on while its next round fits
                cells = [self._eval_cell(by_label[c], self.prompts1, "tune", state.rounds) for c in state.alive]
                if self._round_fits(cells, state.rounds):
                    self.queue.run(cells, self.execute)
                    continue
            winner = incumbent(state.alive, scores, tokens, labels)
            self.races.append({"entrants": labels, "winner": winner, "rounds": state.rounds,
                               "survivors": state.alive, "history": state.history,
                               "stopped_by_budget": self.racing_stopped is not None})
            return winner, state

    def _round_fits(self, cells: Sequence[Mapping[str, Any]], round_index: int) -> bool:
        """Whether the next racing round fits in the plan beside its reserve; if not, racing stops here."""
        if self.plan.budget_calls is None:
            return True
        done = self.queue.results()
        missing = [c for c in cells if cell_key(c) not in done]
        upper = sum(len(self.rounds[round_index]) * upper_calls(c["config"]) for c in missing)
        spent = self.queue.spent(done)
        if self.plan.fits(spent, upper):
            return True
        self.racing_stopped = (f"racing stopped by the budget before round {round_index + 1} (spent "
                               f"{spent['calls']:,.0f} calls, {spent['tokens']:,.0f} tokens; the round could take "
                               f"{upper:,} calls, and {self.plan.reserve:,} are kept for stages 3-4, of "
                               f"{limits_text(self.plan.budget)})")
        logger.warning("tune: %s; the leading configuration wins", self.racing_stopped)
        return False

    def _scores(self, by_label: Mapping[str, Mapping[str, Any]]) -> tuple[dict, dict]:
        done = self.queue.results()
        scores: dict[str, dict[str, bool]] = {}
        tokens: dict[str, float] = {}
        for label, cfg in by_label.items():
            keys = [cell_key(self._eval_cell(cfg, self.prompts1, "tune", b)) for b in range(len(self.rounds))]
            results = [done[k] for k in keys if k in done]
            scores[label] = {i: c for r in results for i, c in zip(r["ids"], r["correct"], strict=True)}
            spent = [t for r in results for t in r["tokens_each"]]
            tokens[label] = sum(spent) / len(spent) if spent else 0.0
        return scores, tokens

    def stage3(self, winner_config: Mapping[str, Any]) -> None:
        if self.s.optimizer == "none":
            return
        cell = {"kind": "compile", "stage": 3, "name": "winner", "config": dict(winner_config), "start": "stage1",
                "train": self.s.compile_train, "without": None}
        self.compiled["stage3"] = self.queue.run([cell], self.execute)[cell_key(cell)]

    def stage4(self, winner_config: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
        arms = {"winner": (dict(winner_config), self.prompts3), "base": (_config_json((), self.s), "none"),
                "all": (_config_json(COMPONENTS, self.s), "none"), "single": (None, "none")}
        if self.prompts3 != "none":  # like with like: the winner's components without its compiled prompts
            arms["winner_uncompiled"] = (dict(winner_config), "none")
        cells = [self._eval_cell(cfg, p, "eval", b) for cfg, p in arms.values() for b in range(len(self.eval_batches))]
        done = self.queue.run(cells, self.execute)
        by_arm = {arm: [done[cell_key(self._eval_cell(cfg, p, "eval", b))] for b in range(len(self.eval_batches))]
                  for arm, (cfg, p) in arms.items()}
        return {arm: [{"seed": 0, "id": i, "correct": c, "failed": f, "tokens": t} for r in results
                      for i, c, f, t in zip(r["ids"], r["correct"], r["failed"], r["tokens_each"], strict=True)]
                for arm, results in by_arm.items()}


class _InfluenceSampler(optuna.samplers.RandomSampler):
    """Switches each component on with probability ``p_on[name]``; other parameters uniformly."""

    def __init__(self, p_on: Mapping[str, float], seed: int):
        super().__init__(seed=seed)
        self.p_on, self._draws = dict(p_on), random.Random(seed)

    def sample_independent(self, study, trial, param_name, param_distribution):  # type: ignore[no-untyped-def]
        if param_name in self.p_on and isinstance(param_distribution, optuna.distributions.CategoricalDistribution):
            on = self._draws.random() < self.p_on[param_name]
            return on if True in param_distribution.choices else param_distribution.choices[0]
        return super().sample_independent(study, trial, param_name, param_distribution)


def on_probabilities(influence: Mapping[str, float]) -> dict[str, float]:
    """0.5 for no influence, towards 0.9 (0.1) for the most helpful (harmful) component."""
    scale = max([abs(v) for v in influence.values()] + [0.02])
    return {c: round(min(0.9, max(0.1, 0.5 + 0.4 * v / scale)), 4) for c, v in influence.items()}


def screen_rounds(rounds: int, min_rounds: int) -> int:
    """The first third of the tuning rounds (at least ``min_rounds``): the screen only chooses where the climb
    starts, and the climb's races use every round."""
    return min(rounds, max(min_rounds, -(-rounds // 3)))


def _promise(config: Mapping[str, Any], neighbour: Mapping[str, Any], p_on: Mapping[str, float]) -> float:
    """How promising the change from ``config`` to ``neighbour`` looks from stage 1: the mean on-probability
    of the components it switches on and off-probability of those it switches off (0.5 without influence)."""
    changed = [c for c in COMPONENTS if bool(config.get(c)) != bool(neighbour.get(c))]
    if not changed:
        return 0.0
    return sum(p_on.get(c, 0.5) if neighbour.get(c) else 1 - p_on.get(c, 0.5) for c in changed) / len(changed)


def neighbours(config: Mapping[str, Any], settings: TuneSettings) -> list[dict[str, Any]]:
    """Valid configurations one component away from ``config`` (switching leadership off takes mutual
    monitoring with it; switching monitoring on brings leadership)."""
    on = {c for c in COMPONENTS if config.get(c)}
    found = []
    for c in COMPONENTS:
        other = on ^ {c}
        try:
            found.append(_config_json(completed(other) if c in other else satisfied(other), settings))
        except ConfigError:  # not valid with these settings (e.g. one turn)
            continue
    return found


def sample_pool(influence: Mapping[str, float], *, settings: TuneSettings) -> list[dict[str, Any]]:
    """Distinct valid configurations: every positive-influence component together, then draws from
    `SearchSpace`'s conditional space with on-probabilities from `on_probabilities` (deterministic)."""
    greedy = satisfied([c for c in COMPONENTS if influence.get(c, 0) > 0])
    pool = {subset_label(greedy): _config_json(greedy, settings)}
    space = SearchSpace(base=TeamworkConfig.build(n_turns=settings.n_turns, n_agents=settings.n_agents))
    size = min(settings.pool_size, len(valid_subsets(min_turns=settings.n_turns)))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=_InfluenceSampler(on_probabilities(influence), settings.seed))
    for _ in range(50 * size):
        if len(pool) >= size:
            break
        trial = study.ask()
        config = space.suggest(trial)
        study.tell(trial, 0.0)
        pool.setdefault(subset_label(config.components), config.model_dump(mode="json"))
    return list(pool.values())


def _summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    return {"n": n, "accuracy": round(sum(bool(r["correct"]) for r in rows) / n, 4) if n else None,
            "tokens_per_question": round(sum(r["tokens"] for r in rows) / n, 2) if n else None}


def _finished(queue: WorkQueue) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every finished cell and its result."""
    return [(json.loads(key), result) for key, result in queue.results().items()]


def _tuning_evals(queue: WorkQueue) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(c, r) for c, r in _finished(queue) if c.get("kind") == "eval" and c.get("part") == "tune"]


def _tried(queue: WorkQueue) -> list[dict[str, Any]]:
    """Every configuration evaluated on tuning questions: questions seen, accuracy, billable cost."""
    table: dict[tuple[str, str], dict[str, Any]] = {}
    for cell, result in _tuning_evals(queue):
        row = table.setdefault((_label(cell["config"]), cell["prompts"]),
                               {"config": _label(cell["config"]), "prompts": cell["prompts"], "n": 0, "correct": 0,
                                "calls": 0, "tokens": 0, "cost_usd": 0.0})
        row["n"] += len(result["ids"])
        row["correct"] += sum(result["correct"])
        for k in ("calls", "tokens", "cost_usd"):
            row[k] += result[k]
    for row in table.values():
        row["accuracy"] = round(row.pop("correct") / row["n"], 4) if row["n"] else None
        row["tokens_per_question"] = round(row["tokens"] / row["n"], 2) if row["n"] else None
    return sorted(table.values(), key=lambda r: (-r["n"], -(r["accuracy"] or 0)))


def _runner_up(queue: WorkQueue, winner: str) -> dict[str, Any] | None:
    """The winner against the most accurate other configuration evaluated with the same prompts on the
    tuning questions: paired (exact McNemar) on the questions both answered. None without a runner-up."""
    from teammed.evals.stats import versus_runner_up

    outcomes: dict[tuple[str, str], dict[str, bool]] = {}
    for cell, result in _tuning_evals(queue):
        outcomes.setdefault((_label(cell["config"]), cell["prompts"]), {}).update(
            zip(result["ids"], map(bool, result["correct"]), strict=True))
    mine = [(prompts, seen) for (label, prompts), seen in outcomes.items() if label == winner]
    if not mine:
        return None
    prompts, won = max(mine, key=lambda item: len(item[1]))
    others = {label: seen for (label, p), seen in outcomes.items() if p == prompts and label != winner and seen}
    if not others:
        return None
    # the strongest rival measured on at least half the winner's questions (one dropped after 4 questions is not a
    # runner-up whose accuracy means much); any rival when none was
    raced = {label: seen for label, seen in others.items() if 2 * len(seen) >= len(won)} or others
    runner = max(raced, key=lambda label: (sum(raced[label].values()) / len(raced[label]), len(raced[label])))
    seen = raced[runner]
    return {"runner_up": runner, "runner_up_accuracy": round(sum(seen.values()) / len(seen), 4),
            "runner_up_se": None, "runner_up_n": len(seen), "winner_n": len(won), "prompts": prompts,
            **versus_runner_up(won, seen)}


def _spent(queue: WorkQueue) -> dict[str, Any]:
    results = queue.results()
    totals = queue.spent(results)
    requests = sum(r.get("memo_requests", 0) for r in results.values())
    hits = sum(r.get("memo_hits", 0) for r in results.values())
    tuning = queue.spent({k: r for k, r in results.items() if json.loads(k).get("part") != "eval"})
    return {"calls": int(totals["calls"]), "tokens": int(totals["tokens"]), "cost_usd": round(totals["cost_usd"], 6),
            "tuning_calls": int(tuning["calls"]), "tuning_tokens": int(tuning["tokens"]),
            "proof_calls": int(totals["calls"] - tuning["calls"]), "memo_requests": requests, "memo_hits": hits,
            "reuse_rate": round(hits / requests, 4) if requests else 0.0, "cells": len(results)}


def tune(*, tune_questions: Sequence[Question], eval_questions: Sequence[Question], lm: dspy.BaseLM,
         settings: TuneSettings, budget: Budget | None, storage: str | None, study_name: str,
         out_dir: Path | str, tuning: Mapping[str, Any] | None = None, max_tokens: int | None = None,
         prices: tuple[float, float] | None = None, tokenizer_model: tuple[str, str | None] | None = None,
         ) -> TuneOutcome:
    """Run (or resume) the four stages; write the report and, when done, the special set and program.

    ``tuning`` is the record of the questions tuned on (`teammed.experiments._data.tuning_record`: dataset,
    dataset_sha256, split, question_ids); the Special Set and the program carry it, so that
    ``run --config/--program`` leaves those questions out of any evaluation. A tokens= or usd= budget is
    planned from ``max_tokens`` (default: the backend's) and ``prices`` (USD per prompt and per answer
    token; needed for usd=), see `teammed.optimizers.tune_rate`, prompts counted with the tokenizer of
    ``tokenizer_model`` ((model string, api_base); default: the LM's model).
    """
    out_dir = Path(out_dir)
    tuned_on = _tuning_record(tuning, settings, tune_questions)
    _check_questions(tune_questions, eval_questions, settings)
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # tune reports its own progress, not Optuna's
    # the plan comes first: a budget below the minimum is refused before the study or any call exists
    if max_tokens is None:
        max_tokens = (getattr(lm, "kwargs", None) or {}).get("max_tokens")
    model, api_base = tokenizer_model or (str(getattr(lm, "model", "") or "gpt-4o"), None)
    rate = first_rate(settings, budget, tune_questions, max_tokens=max_tokens, prices=prices,
                      eval_questions=eval_questions, model=model, api_base=api_base)
    plan = opening_plan(settings, budget, n_tune=len(tune_questions), n_eval=len(eval_questions), rate=rate)
    study, reference = open_tune_study(storage, study_name, out_dir)
    _check_identity(study, study_name, settings, tune_questions, eval_questions)
    queue = WorkQueue(study, budget=budget)
    # the training questions stage 1's finished compiles used (None: none finished yet)
    compiled_on = next((int(c["train"]) for c, _ in _finished(queue)
                        if c.get("kind") == "compile" and c.get("stage") == 1), None)
    if compiled_on is not None and compiled_on != plan.compile_train:  # resumed with another budget
        plan = opening_plan(settings, budget, n_tune=len(tune_questions), n_eval=len(eval_questions), rate=rate,
                            train=compiled_on)
    planned = dataclasses.replace(settings, stage1_batches=plan.stage1_batches, pool_size=plan.pool_size,
                                  compile_train=plan.compile_train)
    replan = functools.partial(make_plan, settings, budget, n_tune=len(tune_questions), n_eval=len(eval_questions))
    p = _Pipeline(tune_questions=tune_questions, eval_questions=eval_questions, lm=lm, settings=planned,
                  queue=queue, plan=plan, replan=replan if rate is not None else None)
    report: dict[str, Any] = {"format": "teammed-tune-report/1", "dataset": settings.dataset, "model": settings.model,
                              "server": settings.server, "settings": dataclasses.asdict(settings),
                              "budget": dataclasses.asdict(budget) if budget else None,
                              "plan": dataclasses.asdict(plan), "plan_text": plan.text(), "plans": [plan.text()],
                              "study": {"storage": reference, "study_name": study_name},
                              "tuning": tuned_on, "held_out_ids": [q.id for q in p.eval_q]}
    state_path = out_dir / "tune_state.json"
    begun = ["1-behaviours"]
    try:
        winner, winner_config, rows = _run_stages(p, report, begun)
    except BudgetSpent as exc:
        message = _budget_message(exc, p, queue)
        report.update(status="budget", stage=begun[-1], message=message, tried=_tried(queue), spent=_spent(queue),
                      replanned=p.replanned)
        _finish(study, state_path, report, out_dir)
        return TuneOutcome("budget", begun[-1], report, None, out_dir / "tune_report.json", message)
    held_out, compare, components_only = _proof(rows)
    report.update(status="done", stage="done", winner=winner, winner_config=winner_config, held_out=held_out,
                  held_out_comparison=compare, held_out_components_only=components_only,
                  stages_completed=_stages_completed(p), tried=_tried(queue), spent=_spent(queue))
    report["pareto_front"] = pareto_front([r for r in report["tried"] if r["accuracy"] is not None])
    report["runner_up"] = _runner_up(queue, winner)
    program_path = _save_winner(p, winner_config, out_dir, settings, tuned_on)
    special_path = out_dir / f"{settings.dataset}.json"
    _atomic_json(special_path, _special_set(report, p, winner_config, program_path, settings, tuned_on))
    report["special_set"] = str(special_path)
    report["program"] = str(program_path)
    _finish(study, state_path, report, out_dir)
    return TuneOutcome("done", "done", report, special_path, out_dir / "tune_report.json")


def _check_questions(tune_questions: Sequence[Question], eval_questions: Sequence[Question],
                     settings: TuneSettings) -> None:
    """Refuse overlapping questions, too few to tune on, or none held out for the proof."""
    check_disjoint(tune_questions, eval_questions)
    if len(tune_questions) < settings.batch_size * 2:
        raise ConfigError(f"tune needs at least {2 * settings.batch_size} tuning questions (got "
                          f"{len(tune_questions)}); use more questions or a smaller --batch-size")
    if not eval_questions:
        raise ConfigError("tune needs held-out questions for its proof (stage 4); none were given")


def _check_identity(study: optuna.Study, study_name: str, settings: TuneSettings,
                    tune_questions: Sequence[Question], eval_questions: Sequence[Question]) -> None:
    """Record the settings and questions on a new study; refuse to resume one tuned with others."""
    identity = {"settings": dataclasses.asdict(settings),
                "tune": {"n": len(tune_questions), "sha256": _digest(tune_questions)},
                "eval": {"n": len(eval_questions), "sha256": _digest(eval_questions)}}
    previous = study.user_attrs.get("tune")
    if previous is None:
        study.set_user_attr("tune", identity)
    elif previous != json.loads(json.dumps(identity, default=str)):
        raise ConfigError(f"study {study_name!r} tuned with {json.dumps(previous, sort_keys=True, default=str)}, "
                          f"not this run's settings and questions; repeat them to resume or choose a new --study")


def _run_stages(p: _Pipeline, report: dict[str, Any],
                begun: list[str]) -> tuple[str, dict[str, Any], dict[str, list[dict[str, Any]]] | None]:
    """The four stages, each one's findings into ``report`` and its name onto ``begun`` as it starts:
    the winner's label and config, and the held-out rows (None: the plan left the proof out)."""
    step("begin", "tune: stage 1 of 4, behaviours' influence")
    influence = p.stage1()
    report.update(plan=dataclasses.asdict(p.plan), plan_text=p.plan.text(), plans=[x.text() for x in p.plans],
                  replanned=p.replanned, influence=influence, stage1_accuracy=p.stage1_accuracy)
    begun.append("2-components")
    step("begin", "tune: stage 2 of 4, racing component sets")
    pool = sample_pool(influence, settings=p.s)
    report.update(pool=[_label(c) for c in pool], on_probabilities=on_probabilities(influence))
    winner, by_label = p.stage2(pool, influence)
    report["racing"] = {"winner": winner, "races": p.races, "rounds": sum(r["rounds"] for r in p.races),
                        "history": [{"race": i + 1, **h} for i, r in enumerate(p.races) for h in r["history"]],
                        "stopped_by_budget": p.racing_stopped}
    winner_config = by_label[winner]
    begun.append("3-winner")
    step("begin", f"tune: stage 3 of 4, compiling the winner ({winner})")
    p.stage3(winner_config)
    begun.append("4-proof")
    step("begin", "tune: stage 4 of 4, the held-out proof")
    rows = p.stage4(winner_config) if p.plan.proof else None
    return winner, winner_config, rows


def _budget_message(exc: BudgetSpent, p: _Pipeline, queue: WorkQueue) -> str:
    """Why tune stopped, with the planned and the measured tokens a call when the budget ran out."""
    message = str(exc)
    used = queue.spent()
    if p.plan.rate is not None and used["calls"] and message.startswith("budget reached"):
        message += (f" (planned at {p.plan.rate.tokens:,.0f} tokens a call, {p.plan.rate.source}; the calls so "
                    f"far cost {used['tokens'] / used['calls']:,.0f} a call)")
    return message


def _special_set(report: Mapping[str, Any], p: _Pipeline, winner_config: Mapping[str, Any], program_path: Path,
                 settings: TuneSettings, tuned_on: Mapping[str, Any]) -> dict[str, Any]:
    """The Special Set file: the winner's components and config, its program and its held-out proof."""
    held_out = report["held_out"]
    return {"format": FORMAT, "dataset": settings.dataset, "components": _components(winner_config),
            "config": winner_config, "program": str(program_path), "model": settings.model, "server": settings.server,
            "tuning": tuned_on,
            "held_out": ({"ids": [q.id for q in p.eval_q], **held_out["winner"], "vs": report["held_out_comparison"]}
                         if held_out is not None else {"ids": [], "proof": "not run: the budget did not cover it"}),
            "plan": report["plan"], "stages_completed": report["stages_completed"],
            "influence": report["influence"], "spent": report["spent"], "tuned_by": "teammed tune",
            "study": report["study"]}


def _proof(rows: Mapping[str, list[dict[str, Any]]] | None) -> tuple[dict | None, dict | None, dict | None]:
    """The held-out summaries and paired comparisons (None when the plan left the proof out)."""
    if rows is None:
        return None, None, None
    from teammed.evals.stats import paired_comparison

    held_out = {arm: _summary(r) for arm, r in rows.items()}
    compare = {arm: paired_comparison(rows["winner"], rows[arm]) for arm in rows if arm != "winner"}
    # the components' effect alone: every arm with the same (uncompiled) prompts
    uncompiled = rows.get("winner_uncompiled", rows["winner"])
    components_only = {arm: paired_comparison(uncompiled, rows[arm]) for arm in ("base", "all", "single")}
    return held_out, compare, components_only


def _stages_completed(p: _Pipeline) -> list[str]:
    racing = "2 (racing stopped by the budget)" if p.racing_stopped else "2"
    compiled = "3" if p.s.optimizer != "none" else "3 (no prompt optimizer: nothing to compile)"
    proof = "4" if p.plan.proof else "4 not run (the budget did not cover the held-out proof)"
    return ["1", racing, compiled, proof]


def _components(config: Mapping[str, Any]) -> list[str]:
    return [c for c in COMPONENTS if config.get(c)]


def _tuning_record(given: Mapping[str, Any] | None, settings: TuneSettings,
                   questions: Sequence[Question]) -> dict[str, Any]:
    """The one record of tuning questions that `teammed.experiments._data.tuned_on` reads back."""
    ids = [q.id for q in questions]
    record: dict[str, Any] = (dict(given) if given else
                              {"dataset": settings.dataset, "dataset_sha256": None, "split": "tune"})
    if record.get("question_ids") not in (None, ids):
        raise ConfigError("the tuning record names other questions than the ones tuned on")
    record["question_ids"] = ids
    from teammed.records import question_fingerprint

    prints = [question_fingerprint(q) for q in questions]
    if record.get("question_sha256") not in (None, prints):
        raise ConfigError("the tuning record's fingerprints are not those of the questions tuned on")
    record["question_sha256"] = prints  # run matches overlap by content, never by id alone
    return record


def _save_winner(p: _Pipeline, config: Mapping[str, Any], out_dir: Path, s: TuneSettings,
                 tuned_on: Mapping[str, Any]) -> Path:
    from teammed.programs.persist import save_program

    return save_program(p._program(config, p.prompts3), out_dir / f"{s.dataset}.program.json", system="teamwork",
                        config=TeamworkConfig.build(**config),
                        meta={"optimizer": s.optimizer, "dataset": s.dataset, "model": s.model, "server": s.server,
                              "tuned_by": "tune", "tuned_on": dict(tuned_on)})


def _finish(study: optuna.Study, state_path: Path, report: dict[str, Any], out_dir: Path) -> None:
    state = {k: report.get(k) for k in ("status", "stage", "message", "spent", "winner")}
    try:
        study.set_user_attr("state", state)
    except Exception as exc:  # a read-only or vanished storage must not hide the report
        logger.warning("could not store the tune state on the study: %s", exc)
    _atomic_json(state_path, state)
    _atomic_json(out_dir / "tune_report.json", report)
    write_atomic(out_dir / "tune_report.md", render_markdown(report))


def render_markdown(report: Mapping[str, Any]) -> str:
    lines = [f"# tune report: {report.get('dataset')} ({report.get('model')})", "",
             f"status: {report.get('status')} (stage {report.get('stage')}) {report.get('message', '')}", ""]
    spent = report.get("spent") or {}
    lines += [f"spent (billable, as if uncached): {spent.get('calls')} calls, {spent.get('tokens')} tokens, "
              f"${spent.get('cost_usd')}; memo reuse rate {spent.get('reuse_rate')} "
              f"({spent.get('memo_hits')} of {spent.get('memo_requests')} requests)", ""]
    if report.get("influence"):
        probs = report.get("on_probabilities") or {}
        lines += ["## influence (preset accuracy minus the preset without the component)", "",
                  "| component | influence | P(on) |", "|---|---|---|"]
        lines += [f"| {c} | {v:+.3f} | {probs.get(c, '')} |" for c, v in report["influence"].items()]
        lines.append("")
    if report.get("racing"):
        lines += _racing_lines(report["racing"])
    if report.get("runner_up"):
        from teammed.optimizers.report import noise_text

        lines += [noise_text(report["runner_up"]), ""]
    lines += ["## configurations tried (tuning questions)", "",
              "| config | prompts | n | accuracy | tokens/q | calls | cost |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['config']} | {r['prompts']} | {r['n']} | {r['accuracy']} | {r['tokens_per_question']} | "
              f"{r['calls']} | {r['cost_usd']:.4f} |" for r in report.get("tried") or []]
    if report.get("pareto_front"):
        lines += ["", "## Pareto front (accuracy vs tokens per question)", ""]
        lines += [f"- {r['config']}: {r['accuracy']} at {r['tokens_per_question']} tokens/q (n={r['n']})"
                  for r in report["pareto_front"]]
    if report.get("held_out"):
        lines += ["", "## held-out proof", "", "| arm | n | accuracy | tokens/q | winner − arm [95% CI] | McNemar p |",
                  "|---|---|---|---|---|---|"]
        for arm, s in report["held_out"].items():
            c = (report.get("held_out_comparison") or {}).get(arm)
            diff = f"{c['diff']:+.3f} [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}]" if c else ""
            pval = f"{c['p_mcnemar']:.4f}" if c else ""
            lines.append(f"| {arm} | {s['n']} | {s['accuracy']} | {s['tokens_per_question']} | {diff} | {pval} |")
        if "winner_uncompiled" in report["held_out"]:
            lines += ["", "The winner's prompts were compiled and the other arms' were not, so *winner − arm* mixes "
                      "the components' effect with the prompts'. With the same uncompiled prompts everywhere "
                      "(the components alone):", "", "| arm | winner_uncompiled − arm [95% CI] | McNemar p |",
                      "|---|---|---|"]
            for arm, c in (report.get("held_out_components_only") or {}).items():
                if c:
                    lines.append(f"| {arm} | {c['diff']:+.3f} [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}] | "
                                 f"{c['p_mcnemar']:.4f} |")
    return "\n".join(lines) + "\n"


def _racing_lines(r: Mapping[str, Any]) -> list[str]:
    lines = [f"## racing: winner {r['winner']} after {len(r['races'])} races", ""]
    lines += [f"- race {i + 1}: {len(x['entrants'])} entrants, {x['rounds']} rounds, winner {x['winner']}, "
              f"survivors {', '.join(x['survivors'])}" for i, x in enumerate(r["races"])]
    lines += ["", "A configuration is dropped when its e-value (evidence it is worse, valid under every "
              "look) reaches the threshold 1/alpha; *fixed-n p* is the one-sided sign test's p for reference "
              "only.", "",
              "| race | round | dropped | incumbent | n | wins | losses | e-value | threshold | fixed-n p |",
              "|---|---|---|---|---|---|---|---|---|---|"] if r["history"] else ["No configuration was dropped: every "
                                                                              "race ran to its end."]
    lines += [f"| {h['race']} | {h['round']} | {h['dropped']} | {h['incumbent']} | {h['n']} | {h['wins']} | "
              f"{h['losses']} | {h['e_value']:.1f} | {h['threshold']:.0f} | {h['p_fixed_n']:.4f} |"
              for h in r["history"]]
    lines.append("")
    return lines
