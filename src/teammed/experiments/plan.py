"""``--dry-run`` as a library call: `plan(spec) -> Plan`, what a command would spend, with no request sent.

Each command's questions are drawn exactly as the command draws them, and its programs are run
on them against a stand-in LM that sends nothing (`teammed.estimate`), so the prompts counted
are the rendered prompts the backend would get, tokenized with the model's tokenizer;
answers are the measured answer lengths of the behaviours. What the command decides while it
runs (which configurations a search samples, how far a compile's optimizer goes, where a tune
stops) is planned from its settings; each part says how.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from teammed.errors import ConfigError
from teammed.estimate import ANSWER_LENGTHS_SOURCE

if TYPE_CHECKING:
    from teammed.experiments.specs import BackendSpec, CompileSpec, ReproduceSpec, RunSpec, SearchSpec, TuneSpec
    from teammed.types import Question

__all__ = ["plan", "Plan", "PlanPart"]


class PlanPart(BaseModel):
    """One part of the work: what it is, how often it runs, and what it costs."""

    model_config = ConfigDict(frozen=True)

    what: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    usd: float | None
    # where the path depends on the model's answers: (calls, billable tokens) at the cheapest and the dearest
    # path, and expected with each option of each choice equally likely; None where it was not priced
    low: tuple[int, int] | None = None
    high: tuple[int, int] | None = None
    expected: tuple[int, int] | None = None

    @property
    def branches(self) -> bool:
        return self.low is not None and self.high is not None and (
            self.low[0] != self.high[0] or self.high[1] > 1.02 * self.low[1])

    def branch_text(self) -> str:
        if self.low is None or self.high is None or self.expected is None:
            return ""
        if not self.branches:
            return " (one path: the model's answers do not change what is called)"
        return (f" (the figure takes each choice's first option; paths range {self.low[0]:,}–{self.high[0]:,} calls, "
                f"{self.low[1]:,}–{self.high[1]:,} tokens; expected with equal shares: {self.expected[0]:,} calls, "
                f"{self.expected[1]:,} tokens)")


class Plan(BaseModel):
    """What a command would spend: billable calls, prompt and completion tokens, and $ (None: no price)."""

    model_config = ConfigDict(frozen=True)

    command: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    usd: float | None
    price_note: str | None  # why there is no $ (a self-hosted server, the embedded model, an unpriced model)
    tokenizer: str
    parts: tuple[PlanPart, ...]
    notes: tuple[str, ...] = ()

    @classmethod
    def of(cls, command: str, parts: Sequence[PlanPart], *, price_note: str | None, tokenizer: str,
           notes: Sequence[str] = ()) -> Plan:
        usd = None if any(p.usd is None for p in parts) else sum(p.usd or 0.0 for p in parts)
        return cls(command=command, calls=sum(p.calls for p in parts),
                   prompt_tokens=sum(p.prompt_tokens for p in parts),
                   completion_tokens=sum(p.completion_tokens for p in parts), usd=usd, price_note=price_note,
                   tokenizer=tokenizer, parts=tuple(parts), notes=tuple(notes))

    def text(self) -> str:
        price = f"${self.usd:.4f}" if self.usd is not None else f"no price ({self.price_note})"
        lines = [f"{self.command} would spend about {self.calls:,} calls, {self.prompt_tokens:,} prompt + "
                 f"{self.completion_tokens:,} completion tokens, {price} (tokens counted with {self.tokenizer}); "
                 f"no request was sent"]
        lines += [f"  {p.what}: {p.calls:,} calls, {p.prompt_tokens:,}+{p.completion_tokens:,} tokens{p.branch_text()}"
                  for p in self.parts]
        lines += [f"  note: {note}" for note in self.notes]
        if any(p.branches for p in self.parts):
            lines.append(f"  note: {BRANCH_NOTE}")
        lines.append(f"  note: {ANSWER_LENGTHS_SOURCE}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


BRANCH_NOTE = ("a system whose path depends on the model's answers (a route, a confidence, a yes/no) is priced on "
               "up to 5 of its questions under each way of answering them (teammed.estimate.BRANCH_POLICIES) for the "
               "range, and with each option equally likely for the expectation: no measured shares (no pilot yet)")
AUTO_TEAM = ("a team of size auto is priced as a team of 3 (the model chooses 2 to 4: the embedded model chose 2, "
             "which billed 31% fewer tokens on base); --n-agents fixes it")


def _part(what: str, estimate: Any, *, times: float = 1.0, branch: Any = None) -> PlanPart:
    """``estimate`` (a `teammed.estimate.CostEstimate`) ``times`` over, with its `BranchRange` scaled to it."""
    n = estimate.questions * times

    def scaled(pair: tuple[float, float]) -> tuple[int, int]:
        return round(pair[0] * n), round(pair[1] * n)

    ranges = {} if branch is None else {"low": scaled(branch.low), "high": scaled(branch.high),
                                        "expected": scaled(branch.expected)}
    return PlanPart(what=what, calls=round(estimate.calls * times), prompt_tokens=round(estimate.prompt_tokens * times),
                    completion_tokens=round(estimate.completion_tokens * times),
                    usd=None if estimate.usd is None else estimate.usd * times, **ranges)


def _estimator(backend: BackendSpec, *, branches: bool = False) -> Callable[..., Any]:
    """``estimate(program_factory, questions)`` for the model ``backend`` calls (the first, for several);
    with ``branches``, ``(estimate, its BranchRange)``."""
    from teammed.estimate import branch_range, estimate_program
    from teammed.experiments._backend import model_specs

    model, api_base, params = model_specs(backend)[0]
    max_tokens = int(params.get("max_tokens") or backend.max_tokens)

    def estimate(factory: Callable[[], Any], questions: Sequence[Question]) -> Any:
        found = estimate_program(factory, list(questions), model=model, api_base=api_base, max_tokens=max_tokens)
        if not branches:
            return found
        return found, branch_range(factory, list(questions), model=model, api_base=api_base, max_tokens=max_tokens)

    return estimate


def plan(spec: Any) -> Plan:
    """What ``spec``'s command would spend; sends no request and writes nothing."""
    from teammed.experiments import specs

    planners: dict[type, Callable[[Any], Plan]] = {specs.RunSpec: _plan_run, specs.CompileSpec: _plan_compile,
                                                   specs.SearchSpec: _plan_search, specs.TuneSpec: _plan_tune,
                                                   specs.ReproduceSpec: _plan_reproduce}
    planner = planners.get(type(spec))
    if planner is None:
        raise ConfigError(f"plan() prices run, compile, search, tune and reproduce specs, not {type(spec).__name__}")
    return planner(spec)


def _finish(command: str, parts: list[PlanPart], estimates: Sequence[Any], notes: Sequence[str] = ()) -> Plan:
    first = estimates[0]
    return Plan.of(command, parts, price_note=first.price_note, tokenizer=first.tokenizer, notes=notes)


# ---------------------------------------------------------------- run
def _plan_run(spec: RunSpec) -> Plan:
    from teammed.experiments._team import program_factory
    from teammed.experiments.run import plan_run
    from teammed.run_plan import few_shot_pool

    cells, choice, _ = plan_run(spec)
    estimate = _estimator(spec.backend, branches=True)
    parts, estimates = [], []
    for cell in cells:
        pool = few_shot_pool(choice.source, cell.sampled or cell.questions)
        factory = program_factory(spec.team, cell.config, pool=pool, seed=cell.seed,
                                  vision=any(q.image for q in cell.questions))
        found, branch = estimate(factory, cell.questions)
        estimates.append(found)
        parts.append(_part(f"{cell.label} seed {cell.seed}, {len(cell.questions)} questions", found, branch=branch))
    auto = any(cell.config is not None and cell.config.n_agents == "auto" for cell in cells)
    return _finish("run", parts, estimates, notes=[AUTO_TEAM] if auto else [])


# ---------------------------------------------------------------- compile
# passes over the training (and validation) questions each optimizer makes, at most, with teammed's
# settings (`teammed.optimizers.compile`): bootstrap traces each training question once; random search
# bootstraps 4 candidate programs and scores 7 on the validation questions; GEPA's budget is four passes
# over train and val; MIPROv2 "light" bootstraps its candidates and scores its trials on validation
_PASSES = {"labeled": (0, 0), "bootstrap": (1, 0), "random-search": (4, 7), "mipro": (6, 10), "gepa": (4, 4)}


def _plan_compile(spec: CompileSpec) -> Plan:
    from teammed.experiments._data import load_for
    from teammed.experiments._team import takes_config, team_config
    from teammed.experiments.optimize import labeled
    from teammed.optimizers import split_questions

    config = team_config(spec.team) if takes_config(spec.team.system) else None
    choice = load_for(spec.data, purpose="tune")
    train, val, test = split_questions(labeled(choice.questions, "compile"), train=spec.train, val=spec.val,
                                       test=spec.test, seed=spec.seed)
    estimate = _estimator(spec.backend)
    factory = _student(spec, config)
    parts, estimates = [], []
    if test:
        held_out = estimate(factory, test)
        estimates.append(held_out)
        parts.append(_part(f"held-out accuracy before and after, {len(test)} questions", held_out, times=2))
    on_train, on_val = _PASSES[spec.optimizer]
    if on_train:
        trained = estimate(factory, train)
        estimates.append(trained)
        parts.append(_part(f"{spec.optimizer}: {on_train} pass(es) over {len(train)} training questions", trained,
                           times=on_train))
    if on_val and val:
        validated = estimate(factory, val)
        estimates.append(validated)
        parts.append(_part(f"{spec.optimizer}: {on_val} pass(es) over {len(val)} validation questions", validated,
                           times=on_val))
    if not estimates:
        raise ConfigError("nothing to price: give --test or training questions")
    return _finish("compile", parts, estimates, notes=(
        f"the optimizer's passes are an upper bound of teammed's settings for {spec.optimizer}; a bootstrap that "
        f"finds its demonstrations early stops early",))


def _student(spec: Any, config: Any) -> Callable[[], Any]:
    if spec.team.system == "teamwork":
        from teammed.programs.teamwork import TeamworkProgram

        return lambda: TeamworkProgram(config)
    from teammed.programs.peers import build_system

    return lambda: build_system(spec.team.system)


# ---------------------------------------------------------------- search
def _plan_search(spec: SearchSpec) -> Plan:
    from teammed.config import preset
    from teammed.data import sample_questions
    from teammed.experiments._data import load_for
    from teammed.experiments.optimize import labeled
    from teammed.programs.teamwork import TeamworkProgram

    choice = load_for(spec.data, purpose="tune")
    questions = sample_questions(labeled(choice.questions, "search"), n=spec.n, seed=spec.seed)
    estimate = _estimator(spec.backend)
    cheapest = estimate(lambda: TeamworkProgram(preset("base")), questions)
    dearest = estimate(lambda: TeamworkProgram(preset("all")), questions)
    merged = _merged(f"{spec.trials} trials on {len(questions)} questions, at the mean of base and all",
                     _part("", cheapest, times=spec.trials / 2), _part("", dearest, times=spec.trials / 2))
    notes = [f"a trial costs between base ({cheapest.calls / max(1, len(questions)):.1f} calls a question) and all "
             f"({dearest.calls / max(1, len(questions)):.1f}); pruned trials cost less"]
    if not spec.adaptive:
        return _finish("search", [merged], [cheapest], notes=notes)
    adaptive = _plan_adaptive(spec, questions, estimate, dearest)
    notes.append("--adaptive: the Special Set priced as the preset all; the chosen policy at most the Special Set "
                 "and one call more")
    return _finish("search", [merged, *adaptive], [cheapest], notes=notes)


def _plan_adaptive(spec: SearchSpec, tuning: list[Any], estimate: Callable[..., Any], team: Any) -> list[PlanPart]:
    """``search --adaptive``: stage 1 and the Special Set on the tuning questions, then the choice, the
    Special Set and the single agent on ``n_eval`` held-out questions."""
    from teammed.config import preset
    from teammed.experiments.optimize import adaptive_held_out
    from teammed.programs.peers.adaptive import AdaptiveTeam
    from teammed.programs.teamwork import TeamworkProgram

    held_out = adaptive_held_out(spec)
    single = estimate(lambda: AdaptiveTeam(threshold=0.0), tuning)
    single_eval = estimate(lambda: AdaptiveTeam(threshold=0.0), held_out)
    team_eval = estimate(lambda: TeamworkProgram(preset("all")), held_out)
    return [_merged(f"adaptive front: the single agent and the Special Set on {len(tuning)} tuning questions",
                    _part("", single), _part("", team)),
            _merged(f"adaptive proof on {len(held_out)} held-out questions: the choice, the Special Set, the single "
                    "agent", _part("", team_eval, times=2), _part("", single_eval, times=2))]


def _merged(what: str, *parts: PlanPart) -> PlanPart:
    """One line of the plan for several parts priced together."""
    usd = None if any(p.usd is None for p in parts) else sum(p.usd or 0.0 for p in parts)
    return PlanPart(what=what, calls=sum(p.calls for p in parts), prompt_tokens=sum(p.prompt_tokens for p in parts),
                    completion_tokens=sum(p.completion_tokens for p in parts), usd=usd)


# ---------------------------------------------------------------- tune
def _plan_tune(spec: TuneSpec) -> Plan:
    from teammed.config import preset
    from teammed.experiments.tune import _max_tokens, _settings, prices, tune_questions
    from teammed.optimizers.tune import first_rate, make_plan
    from teammed.optimizers.tune_queue import parse_budget
    from teammed.programs.teamwork import TeamworkProgram

    budget = parse_budget(spec.budget)
    tune_q, eval_q, choice = tune_questions(spec)
    settings = _settings(spec, choice.name, "")
    priced = prices(spec.backend)[0] if budget.usd is not None else None
    model = spec.backend.models[0] if spec.backend.models else "gpt-4o"
    rate = first_rate(settings, budget, tune_q, max_tokens=_max_tokens(spec.backend), prices=priced,
                      eval_questions=eval_q, model=model, api_base=spec.backend.api_base)
    tune_plan = make_plan(settings, budget, n_tune=len(tune_q), n_eval=len(eval_q), rate=rate)
    estimate = _estimator(spec.backend)
    sample = tune_q[: max(1, min(len(tune_q), 10))]
    per_call = estimate(lambda: TeamworkProgram(preset("all")), sample)
    calls = tune_plan.budget_calls or tune_plan.minimum
    scale = calls / max(1, per_call.calls)
    part = _part(f"tune within {spec.budget}: {tune_plan.text()}", per_call, times=scale)
    return _finish("tune", [part], [per_call], notes=(
        "an upper bound: a tune spends at most its budget (tokens per call as in the preset all on the tuning "
        "questions); racing usually stops earlier",))


# ---------------------------------------------------------------- reproduce
def _plan_reproduce(spec: ReproduceSpec) -> Plan:
    if spec.protocol == "medagentsbench":
        return _plan_medagentsbench(spec)
    from teammed.config import preset
    from teammed.data.sampling import sample_questions
    from teammed.data.splits import partition
    from teammed.optimizers.reproduce import DATASETS_001, DEFAULT_ROWS_001, ROWS_001, load_paper_datasets, row_program
    from teammed.programs.teamwork import TeamworkProgram

    datasets = load_paper_datasets(list(spec.datasets or DATASETS_001), data_dir=spec.data_dir, split=spec.split)
    estimate = _estimator(spec.backend, branches=True)
    parts, estimates = [], []
    for code, questions in datasets.items():
        if isinstance(questions, str):
            continue
        held_out = partition(list(questions), part="eval")
        pool = [q for q in partition(list(questions), part="tune") if q.answer_idx]
        for row in spec.rows or DEFAULT_ROWS_001:
            for seed in spec.seeds:
                cell = sample_questions(held_out, n=spec.n or 50, seed=seed)
                # tuned later: priced as the preset all (the adaptive row: at most that, and one call more)
                if ROWS_001[row][1] in ("special", "adaptive"):
                    found, branch = estimate(lambda: TeamworkProgram(preset("all")), cell)
                else:
                    found, branch = estimate(lambda row=row, seed=seed, pool=pool: row_program(row, pool, seed), cell)
                estimates.append(found)
                parts.append(_part(f"{code} {row} seed {seed}, {len(cell)} questions", found, branch=branch))
    if not estimates:
        raise ConfigError("none of the data sets is available locally; give --data-dir or --datasets")
    notes = []
    if "TeamMed (tuned)" in (spec.rows or DEFAULT_ROWS_001):
        notes.append(f"each data set's special set is tuned first, within --tune-budget {spec.tune_budget} (not "
                     f"included above; `teammed tune --dry-run` prices one)")
    return _finish("reproduce", parts, estimates, notes=notes)


def _plan_medagentsbench(spec: ReproduceSpec) -> Plan:
    """Each measured row of the medagentsbench table on its data set's questions (the published rows cost nothing)."""
    from teammed.data.sampling import sample_questions
    from teammed.experiments.tune import medagentsbench_inputs
    from teammed.optimizers.reproduce_mab import DEFAULT_ROWS_MAB, check_rows, row_program_mab

    rows = tuple(spec.rows or DEFAULT_ROWS_MAB)
    check_rows(rows)
    datasets, pools, split = medagentsbench_inputs(spec)
    estimate = _estimator(spec.backend, branches=True)
    parts, estimates = [], []
    for name, questions in datasets.items():
        if isinstance(questions, str):
            continue
        table, pool = sample_questions(list(questions), n=spec.n, seed=0), pools.get(name, [])
        for row in rows:
            found, branch = estimate(lambda row=row, pool=pool: row_program_mab(row, pool), table)
            estimates.append(found)
            parts.append(_part(f"{name} {split} {row}, {len(table)} questions", found, branch=branch))
    if not estimates:
        raise ConfigError("none of the data sets is available locally; give --data-dir or --datasets")
    return _finish("reproduce", parts, estimates,
                   notes=("the published rows are read from --published and cost nothing",))
