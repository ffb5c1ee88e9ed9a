"""``--dry-run`` as a library call: `plan(spec) -> Plan`, what a command would spend, with no request sent.

Each command's questions are drawn exactly as the command draws them, and its programs are run
on them against a stand-in LM that sends nothing (`teammed.estimate`), so the prompts counted
are the rendered prompts the backend would get, tokenized with the model's tokenizer;
answers are the measured answer lengths of the behaviours. What the command decides while it
runs (which configurations a search samples, how far a compile's optimizer goes, where a tune
stops) is planned from its settings; each part says how.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from teammed.errors import ConfigError
from teammed.experiments.pilot import Pilot

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
    # (calls, billable tokens) of the part at its cheapest and its dearest (`teammed.estimate.BranchRange`: the
    # paths, and without a pilot every answer length from one word to max_tokens), and expected with each option
    # of each choice equally likely; None where it was not priced
    low: tuple[int, int] | None = None
    high: tuple[int, int] | None = None
    expected: tuple[int, int] | None = None
    paths: bool = False  # the model's answers change what is called
    measured: bool = False  # the answer lengths were measured by a pilot
    # with a pilot: where its questions lay between the cheapest and the dearest path (0 to 1), and the
    # billable tokens of the part at the interval's ends (the headline figure is that share's)
    share: tuple[float, float, float] | None = None
    interval: tuple[int, int] | None = None

    draws: int = 0  # a whole command run this many times against the stand-in: the figure is their mean

    def branch_text(self) -> str:
        if self.low is None or self.high is None or self.expected is None:
            return ""
        span = f"{self.low[0]:,}–{self.high[0]:,} calls, {self.low[1]:,}–{self.high[1]:,} tokens"
        if self.draws:
            return f" (the mean of {self.draws} draws of the stand-in's random answers; they ranged {span})"
        if self.measured:
            if not self.paths:
                return " (one path: the model's answers do not change what is called)"
            if self.share is None or self.interval is None:
                return f" (paths range {span})"
            mean, lower, upper = self.share
            return (f" (expected at the pilot's share: {mean:.2f} of the way from the cheapest path to the dearest, "
                    f"95% interval {lower:.2f}–{upper:.2f}: {self.interval[0]:,}–{self.interval[1]:,} tokens; "
                    f"paths range {span})")
        figure = ("one path; at the answer lengths noted below" if not self.paths else
                  "expected with each option of each choice equally likely, at the answer lengths noted below")
        return f" ({figure}; range, assuming nothing of the model: {span})"


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
    lengths: str = ""  # where the answer lengths came from, without a pilot (`teammed.estimate.Verbosity.text`)
    parts: tuple[PlanPart, ...]
    notes: tuple[str, ...] = ()
    pilot: Pilot | None = None  # the questions run for real first (`plan(spec, pilot=K)`), not in the totals

    @classmethod
    def of(cls, command: str, parts: Sequence[PlanPart], *, price_note: str | None, tokenizer: str,
           notes: Sequence[str] = (), pilot: Pilot | None = None, lengths: str = "") -> Plan:
        total = _merged(command, *parts)
        return cls(command=command, calls=total.calls, prompt_tokens=total.prompt_tokens,
                   completion_tokens=total.completion_tokens, usd=total.usd, price_note=price_note,
                   tokenizer=tokenizer, parts=tuple(parts), notes=tuple(notes), pilot=pilot, lengths=lengths)

    def text(self) -> str:
        price = f"${self.usd:.4f}" if self.usd is not None else f"no price ({self.price_note})"
        sent = (f"only the pilot's {self.pilot.questions} questions were sent" if self.pilot is not None
                else "no request was sent")
        lines = [f"{self.command} would spend about {self.calls:,} calls, {self.prompt_tokens:,} prompt + "
                 f"{self.completion_tokens:,} completion tokens (billable), {price} (tokens counted with "
                 f"{self.tokenizer}); {sent}"]
        lines += [f"  {p.what}: {p.calls:,} calls, {p.prompt_tokens:,}+{p.completion_tokens:,} tokens{p.branch_text()}"
                  for p in self.parts]
        lines += [f"  note: {note}" for note in self.notes]
        if any(p.paths for p in self.parts):
            lines.append(f"  note: {BRANCH_NOTE if self.pilot is None else PILOT_BRANCH_NOTE}")
        if self.pilot is not None:
            lines += [f"  {self.pilot.cost_line()}", f"  note: {self.pilot.lengths_source()}"]
        else:
            if any(p.low is not None for p in self.parts):
                lines.append(f"  note: {RANGE_NOTE}")
            lines.append(f"  note: {self.lengths}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


BRANCH_NOTE = ("a system whose path depends on the model's answers (a route, a confidence, a yes/no) is priced on "
               "up to 5 of its questions under each way of answering them (teammed.estimate.BRANCH_POLICIES), and "
               "with each option equally likely for the expectation: no measured shares; --pilot K measures them")
RANGE_NOTE = ("each range assumes nothing of the model: from the cheapest path with one-word answers to the dearest "
              "with every answer at --max-tokens; --pilot K measures the model's lengths and narrows it")
PILOT_BRANCH_NOTE = ("a system whose path depends on the model's answers is priced between its cheapest and dearest "
                     "path on the stand-in (answers of the pilot's lengths), at the share of that way the pilot's "
                     "questions lay (their billable tokens), with an exact 95% interval from so few questions")
AUTO_TEAM = ("a team of size auto is priced as a team of 3 under each single way of answering, and each size from 2 to "
             "4 equally likely in the expectation (the embedded model chose 2, "
             "which billed 31% fewer tokens on base); --n-agents fixes it")


def _part(what: str, estimate: Any, *, times: float = 1.0, branch: Any = None,
          observed: Sequence[int] | None = None) -> PlanPart:
    """``estimate`` (a `teammed.estimate.CostEstimate`) ``times`` over, with its `BranchRange` scaled to it;
    with a pilot's ``observed`` billable tokens per question on a system with several paths, the figure
    is the pilot's share of the way from the cheapest path to the dearest."""
    from teammed.experiments.pilot import share_interval

    n = estimate.questions * times

    def scaled(pair: tuple[float, float]) -> tuple[int, int]:
        return round(pair[0] * n), round(pair[1] * n)

    part = PlanPart(what=what, calls=round(estimate.calls * times), prompt_tokens=round(estimate.prompt_tokens * times),
                    completion_tokens=round(estimate.completion_tokens * times),
                    usd=None if estimate.usd is None else estimate.usd * times,
                    low=None if branch is None else scaled(branch.low),
                    high=None if branch is None else scaled(branch.high),
                    expected=None if branch is None else scaled(branch.expected),
                    paths=branch is not None and branch.paths, measured=branch is not None and branch.measured)
    if branch is None or not part.paths:
        return part
    if not observed:  # no pilot: the figure is the expectation with each option of each choice equally likely
        calls, tokens = branch.expected
        measured: dict[str, Any] = {}
    else:
        # the stand-in's paths are the policies it tries; a pilot question dearer (or cheaper) than all of them
        # shows a path they missed, so the range reaches it
        low_t, high_t = min(branch.low[1], min(observed)), max(branch.high[1], max(observed))
        share = share_interval(observed, low_t, high_t)

        def at(x: float) -> tuple[float, float]:  # (calls, tokens) per question x of the way from low to high
            return branch.low[0] + x * (branch.high[0] - branch.low[0]), low_t + x * (high_t - low_t)

        calls, tokens = at(share[0])
        measured = {"share": share, "low": (part.low[0] if part.low else 0, round(low_t * n)),
                    "high": (part.high[0] if part.high else 0, round(high_t * n)),
                    "expected": (round(calls * n), round(tokens * n)),
                    "interval": (round(at(share[1])[1] * n), round(at(share[2])[1] * n))}
    ratio = tokens * n / max(1, part.prompt_tokens + part.completion_tokens)
    return part.model_copy(update={
        "calls": round(calls * n), "prompt_tokens": round(part.prompt_tokens * ratio),
        "completion_tokens": round(part.completion_tokens * ratio),
        "usd": None if part.usd is None else part.usd * ratio, **measured})


def _estimator(backend: BackendSpec, *, branches: bool = False, pilot: Pilot | None = None) -> Callable[..., Any]:
    """``estimate(program_factory, questions)`` for the model ``backend`` calls (the first, for several),
    answers as long as the ``pilot`` measured them; with ``branches``, ``(estimate, its BranchRange)``."""
    from teammed.estimate import branch_range, estimate_program
    from teammed.experiments._backend import model_specs

    model, api_base, params = model_specs(backend)[0]
    max_tokens = int(params.get("max_tokens") or backend.max_tokens)

    lengths = pilot.lengths if pilot is not None else None

    def estimate(factory: Callable[[], Any], questions: Sequence[Question]) -> Any:
        found = estimate_program(factory, list(questions), model=model, api_base=api_base, max_tokens=max_tokens,
                                 lengths=lengths)
        if not branches:
            return found
        return found, branch_range(factory, list(questions), model=model, api_base=api_base, max_tokens=max_tokens,
                                   lengths=lengths)

    return estimate


def plan(spec: Any, *, pilot: int | None = None) -> Plan:
    """What ``spec``'s command would spend; sends no request and writes nothing. With ``pilot=K``, the first
    K questions of each part are first run for real (billed; their answers kept in the response cache), and
    the plan is priced from what they measured (`teammed.experiments.pilot`)."""
    from teammed.experiments import specs

    planners: dict[type, Callable[..., Plan]] = {specs.RunSpec: _plan_run, specs.CompileSpec: _plan_compile,
                                                   specs.SearchSpec: _plan_search, specs.TuneSpec: _plan_tune,
                                                   specs.ReproduceSpec: _plan_reproduce}
    planner = planners.get(type(spec))
    if planner is None:
        raise ConfigError(f"plan() prices run, compile, search, tune and reproduce specs, not {type(spec).__name__}")
    if pilot is not None and pilot < 1:
        raise ConfigError(f"a pilot runs at least 1 question of each part (got pilot={pilot}); leave it out for none")
    return planner(spec, pilot=pilot)


def _finish(command: str, parts: list[PlanPart], estimates: Sequence[Any], notes: Sequence[str] = (),
            pilot: Pilot | None = None) -> Plan:
    first = estimates[0]
    return Plan.of(command, parts, price_note=first.price_note, tokenizer=first.tokenizer, notes=notes, pilot=pilot,
                   lengths=first.lengths)


def _pilot(backend: BackendSpec, parts: Sequence[tuple[str, Callable[[], Any], Sequence[Question]]],
           k: int | None) -> Pilot | None:
    """The pilot's measurements of ``parts`` (None without one)."""
    if k is None:
        return None
    from teammed.estimate import prices_for
    from teammed.experiments._backend import model_specs
    from teammed.experiments.pilot import run_pilot

    model, api_base, _ = model_specs(backend)[0]
    return run_pilot(backend, parts, k, price=prices_for(model, api_base)[0])


def _everything() -> Any:
    """The dearest team of the search space: every component of `teammed.components.TABLE` on (the
    preset all holds only the components whose record lists it)."""
    from teammed.components import COMPONENTS
    from teammed.config import config_from_components
    from teammed.programs.teamwork import TeamworkProgram

    return TeamworkProgram(config_from_components(list(COMPONENTS)))


def _dearest(questions: Sequence[Question]) -> list[tuple[str, Callable[[], Any], Sequence[Question]]]:
    """A pilot's one part where a command prices many configurations: every component on, which calls
    every behaviour of the deliberation."""
    return [("every component", _everything, questions)]


# ---------------------------------------------------------------- run
def _plan_run(spec: RunSpec, *, pilot: int | None = None) -> Plan:
    from teammed.experiments._team import program_factory
    from teammed.experiments.run import plan_run
    from teammed.run_plan import few_shot_pool

    cells, choice, _ = plan_run(spec)
    work: list[tuple[str, Callable[[], Any], Sequence[Question]]] = []
    for cell in cells:
        pool = few_shot_pool(choice.source, cell.sampled or cell.questions)
        factory = program_factory(spec.team, cell.config, pool=pool, seed=cell.seed,
                                  vision=any(q.image for q in cell.questions))
        work.append((f"{cell.label} seed {cell.seed}", factory, cell.questions))
    parts, estimates, measured = _priced_cells(spec.backend, work, pilot)
    auto = any(cell.config is not None and cell.config.n_agents == "auto" for cell in cells)
    return _finish("run", parts, estimates, notes=[AUTO_TEAM] if auto else [], pilot=measured)


# ---------------------------------------------------------------- compile
# passes over the training (and validation) questions each optimizer makes, at most, with teammed's
# settings (`teammed.optimizers.compile`): bootstrap traces each training question once; random search
# bootstraps 4 candidate programs and scores 7 on the validation questions; GEPA's budget is four passes
# over train and val; MIPROv2 "light" bootstraps its candidates and scores its trials on validation
_PASSES = {"labeled": (0, 0), "bootstrap": (1, 0), "random-search": (4, 7), "mipro": (6, 10), "gepa": (4, 4)}


def _plan_compile(spec: CompileSpec, *, pilot: int | None = None) -> Plan:
    from teammed.experiments._data import load_for
    from teammed.experiments._team import takes_config, team_config
    from teammed.experiments.optimize import labeled, student
    from teammed.optimizers import split_questions

    config = team_config(spec.team) if takes_config(spec.team.system) else None
    choice = load_for(spec.data, purpose="tune")
    train, val, test = split_questions(labeled(choice.questions, "compile"), train=spec.train, val=spec.val,
                                       test=spec.test, seed=spec.seed)
    factory = student(spec, config)
    measured = _pilot(spec.backend, [("student", factory, train or test)], pilot)
    estimate = _estimator(spec.backend, pilot=measured)
    on_train, on_val = _PASSES[spec.optimizer]
    runs = [(questions, times, what) for questions, times, what, priced in (
        (test, 2, f"held-out accuracy before and after, {len(test)} questions", test),
        (train, on_train, f"{spec.optimizer}: {on_train} pass(es) over {len(train)} training questions", on_train),
        (val, on_val, f"{spec.optimizer}: {on_val} pass(es) over {len(val)} validation questions", on_val and val),
    ) if priced]
    estimates = [estimate(factory, questions) for questions, _, _ in runs]
    parts = [_part(what, found, times=times) for (_, times, what), found in zip(runs, estimates, strict=True)]
    if not estimates:
        raise ConfigError("nothing to price: give --test or training questions")
    return _finish("compile", parts, estimates, notes=(
        f"the optimizer's passes are an upper bound of teammed's settings for {spec.optimizer}; a bootstrap that "
        f"finds its demonstrations early stops early",), pilot=measured)


# ---------------------------------------------------------------- search
def _plan_search(spec: SearchSpec, *, pilot: int | None = None) -> Plan:
    from teammed.config import preset
    from teammed.data import sample_questions
    from teammed.experiments._data import load_for
    from teammed.experiments.optimize import labeled
    from teammed.programs.teamwork import TeamworkProgram

    choice = load_for(spec.data, purpose="tune")
    questions = sample_questions(labeled(choice.questions, "search"), n=spec.n, seed=spec.seed)
    measured = _pilot(spec.backend, _dearest(questions), pilot)
    estimate = _estimator(spec.backend, pilot=measured)
    cheapest = estimate(lambda: TeamworkProgram(preset("base")), questions)
    dearest = estimate(_everything, questions)
    merged = _merged(f"{spec.trials} trials on {len(questions)} questions, at the mean of base and every component",
                     _part("", cheapest, times=spec.trials / 2), _part("", dearest, times=spec.trials / 2))
    notes = [f"a trial costs between base ({cheapest.calls / max(1, len(questions)):.1f} calls a question) and "
             "every component on "
             f"({dearest.calls / max(1, len(questions)):.1f}); pruned trials cost less"]
    if not spec.adaptive:
        return _finish("search", [merged], [cheapest], notes=notes, pilot=measured)
    adaptive = _plan_adaptive(spec, questions, estimate, dearest)
    notes.append("--adaptive: the Special Set priced as every component on; the chosen policy at most the Special Set "
                 "and one call more")
    return _finish("search", [merged, *adaptive], [cheapest], notes=notes, pilot=measured)


def _plan_adaptive(spec: SearchSpec, tuning: list[Any], estimate: Callable[..., Any], team: Any) -> list[PlanPart]:
    """``search --adaptive``: stage 1 and the Special Set on the tuning questions, then the choice, the
    Special Set and the single agent on ``n_eval`` held-out questions."""
    from teammed.experiments.optimize import adaptive_held_out
    from teammed.programs.peers.adaptive import AdaptiveTeam

    held_out = adaptive_held_out(spec)
    single = estimate(lambda: AdaptiveTeam(threshold=0.0), tuning)
    single_eval = estimate(lambda: AdaptiveTeam(threshold=0.0), held_out)
    team_eval = estimate(_everything, held_out)
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
def _plan_tune(spec: TuneSpec, *, pilot: int | None = None) -> Plan:
    """The tune itself, run offline against the billing stand-in (`teammed.estimate.billing_stand_in`): its
    plan, its re-plan at the rate its first batch measures, its races and whether its proof runs are the real
    tune's code; the answers are the stand-in's (at random, at the pilot's or the model family's lengths)."""
    import tempfile

    from teammed.estimate import billing_stand_in, prices_for, tokenizer_for, verbosity_for
    from teammed.experiments._backend import model_specs
    from teammed.experiments.tune import _max_tokens, _settings, prices, tune_questions
    from teammed.optimizers.tune import tune as run_tune
    from teammed.optimizers.tune_queue import parse_budget

    budget = parse_budget(spec.budget)
    tune_q, eval_q, choice = tune_questions(spec)
    settings = _settings(spec, choice.name, "")
    priced = prices(spec.backend)[0] if budget.usd is not None else None
    model, api_base, _ = model_specs(spec.backend)[0]
    max_tokens = _max_tokens(spec.backend)
    measured = _pilot(spec.backend, _dearest(tune_q), pilot)
    drawn = []  # (report, stand-in) of each draw of the stand-in's answers: chance decides races and demos
    for draw in range(TUNE_DRAWS):
        lm = billing_stand_in(model=model, api_base=api_base, max_tokens=max_tokens or spec.backend.max_tokens,
                              lengths=measured.lengths if measured else None, seed=settings.seed + draw)
        with tempfile.TemporaryDirectory(prefix="teammed-tune-dry-run-") as scratch:
            outcome = run_tune(tune_questions=tune_q, eval_questions=eval_q, lm=lm, settings=settings, budget=budget,
                               storage=None, study_name="dry-run", out_dir=scratch, max_tokens=max_tokens,
                               prices=priced, tokenizer_model=(model, api_base))
        drawn.append((outcome, lm))
    # each draw's spent (what the real tune's report says, on the same basis), split as its stand-in billed it
    spent = [o.report.get("spent") or {} for o, _ in drawn]
    each_calls, each_tokens = [int(x.get("calls", 0)) for x in spent], [int(x.get("tokens", 0)) for x in spent]
    calls, tokens = round(sum(each_calls) / len(drawn)), round(sum(each_tokens) / len(drawn))
    prompt = round(tokens * sum(lm.prompt_share for _, lm in drawn) / len(drawn))
    price, why = prices_for(model, api_base)
    usd = None if price is None else prompt * price[0] + (tokens - prompt) * price[1]
    ran = [("stopped at stage " + o.stage + " (" + (o.message or "budget") + ")" if o.status != "done"
            else "held-out proof " + ("run" if o.report.get("held_out") is not None else "NOT run")) for o, _ in drawn]
    outcomes = "; ".join(f"{what} in {ran.count(what)} of {len(ran)} draws" for what in dict.fromkeys(ran))
    report = drawn[0][0].report
    plans = report.get("plans") or ["none"]
    part = PlanPart(what=f"tune within {spec.budget}, run against the stand-in: {outcomes}; the first draw's last "
                         f"plan: {plans[-1]}", calls=calls, prompt_tokens=prompt, completion_tokens=tokens - prompt,
                    usd=usd, low=(min(each_calls), min(each_tokens)), high=(max(each_calls), max(each_tokens)),
                    expected=(calls, tokens), draws=len(drawn))
    edge = edge_note(report.get("replanned"))
    notes = (f"the plan before the first call: {plans[0]}", *([edge] if edge else []), TUNE_NOTE)
    name, _ = tokenizer_for(model)
    return Plan.of("tune", [part], price_note=why, tokenizer=name, notes=notes, pilot=measured,
                   lengths=verbosity_for(model).text())


TUNE_DRAWS = 3  # the tune is run this many times against the stand-in, its answers drawn anew each time


EDGE = 0.15  # a re-plan this close to a threshold (as a share of the rate a call) is named as an edge


def flip_factor(replanned: Mapping[str, Any], threshold: int) -> float | None:
    """The factor on the stand-in's rate a call (every call's, the first batch's too) at which the budget's
    tokens=/usd= limits just buy ``threshold`` calls: above it the tune cannot reach the threshold. None when
    no such limit is set, or the budget's calls= limit alone keeps it below the threshold."""
    limits, rate, spent = replanned["limits"], replanned["rate"], replanned["spent"]
    if limits["calls"] is not None and limits["calls"] < threshold:
        return None
    factors = [limits[k] / (rate[k] * (threshold - spent["calls"]) + spent[k])
               for k in ("tokens", "usd") if limits[k] is not None and rate[k]]
    return min(factors) if factors else None


def edge_note(replanned: Mapping[str, Any] | None, *, margin: float = EDGE) -> str | None:
    """The edges the stand-in's re-plan sits near (`teammed.optimizers.tune.replan_thresholds`): when a real rate
    a call within ``margin`` of the stand-in's would reach or miss the smallest tune, or the smallest with the
    proof, the rate that flips it and the other outcome. None when neither is that close."""
    if not replanned or replanned.get("budget_calls") is None:
        return None
    found = []
    for threshold, what, passes, misses in (
            (replanned["minimum"], "the smallest tune",
             f"the tune goes on past stage 1's first batch (the smallest tune: up to {replanned['minimum']:,} calls)",
             f"the tune stops after stage 1's first batch (about {replanned['spent']['calls']:,} calls)"),
            (replanned["with_proof"], "the smallest tune with the held-out proof", "the proof runs",
             "the proof is not run")):
        flips = flip_factor(replanned, threshold)
        if flips is None or abs(flips - 1) > margin:
            continue
        change = abs(1 - flips)  # above 1: the stand-in's rate reaches it, and a dearer one misses it
        share = f"{change:.1%}" if change < 0.01 else f"{change:.0%}"
        outcome = misses if flips > 1 else passes
        found.append(f"{what} needs up to {threshold:,} calls, and a real rate a call {share} "
                     f"{'higher' if flips > 1 else 'lower'} than the stand-in's means {outcome}")
    if not found:
        return None
    rate = replanned["rate"]
    at = f"{rate['tokens']:,.0f} tokens" + (f", ${rate['usd']:.4g}" if rate["usd"] is not None else "")
    return (f"near an edge: at the stand-in's {at} a call (stage 1's first batch) the budget buys about "
            f"{replanned['budget_calls']:,} calls; " + "; ".join(found))


TUNE_NOTE = ("the stand-in answers at random, so no configuration is better than another, but chance decides how long "
             "races run (on the demo set, 852 calls by the simulated team against 1,232 planned) and how many demos a "
             "bootstrap keeps (from the answers it got right by chance): hence the draws; a real model's differences "
             "may settle races sooner")


# ---------------------------------------------------------------- reproduce
def _plan_reproduce(spec: ReproduceSpec, *, pilot: int | None = None) -> Plan:
    if spec.protocol == "medagentsbench":
        return _plan_medagentsbench(spec, pilot=pilot)
    from teammed.data.sampling import sample_questions
    from teammed.data.splits import partition
    from teammed.optimizers.reproduce import DATASETS_001, DEFAULT_ROWS_001, ROWS_001, load_paper_datasets, row_program

    datasets = load_paper_datasets(list(spec.datasets or DATASETS_001), data_dir=spec.data_dir, split=spec.split)
    work: list[tuple[str, Callable[[], Any], Sequence[Question]]] = []
    for code, questions in datasets.items():
        if isinstance(questions, str):
            continue
        held_out = partition(list(questions), part="eval")
        pool = [q for q in partition(list(questions), part="tune") if q.answer_idx]
        for row in spec.rows or DEFAULT_ROWS_001:
            for seed in spec.seeds:
                cell = sample_questions(held_out, n=spec.n or 50, seed=seed)
                # tuned later: priced as every component on (the adaptive row: at most that, and one call more)
                tuned_later = ROWS_001[row][1] in ("special", "adaptive")
                factory = _everything if tuned_later else functools.partial(row_program, row, pool, seed)
                work.append((f"{code} {row} seed {seed}", factory, cell))
    parts, estimates, measured = _priced_cells(spec.backend, work, pilot)
    notes = []
    if "TeamMed (tuned)" in (spec.rows or DEFAULT_ROWS_001):
        notes.append(f"each data set's special set is tuned first, within --tune-budget {spec.tune_budget} (not "
                     f"included above; `teammed tune --dry-run` prices one)")
    return _finish("reproduce", parts, estimates, notes=notes, pilot=measured)


def _priced_cells(backend: BackendSpec, work: Sequence[tuple[str, Callable[[], Any], Sequence[Question]]],
                  pilot: int | None) -> tuple[list[PlanPart], list[Any], Pilot | None]:
    """Each ``(name, program factory, questions)`` cell priced with its paths (after a pilot, if asked); no
    cell at all (a reproduction's data sets none of them local) is refused."""
    if not work:
        raise ConfigError("none of the data sets is available locally; give --data-dir or --datasets")
    measured = _pilot(backend, work, pilot)
    estimate = _estimator(backend, branches=True, pilot=measured)
    parts, estimates = [], []
    for name, factory, questions in work:
        found, branch = estimate(factory, questions)
        estimates.append(found)
        parts.append(_part(f"{name}, {len(questions)} questions", found, branch=branch,
                           observed=measured.tokens.get(name) if measured else None))
    return parts, estimates, measured


def _plan_medagentsbench(spec: ReproduceSpec, *, pilot: int | None = None) -> Plan:
    """Each measured row of the medagentsbench table on its data set's questions (the published rows cost nothing)."""
    from teammed.data.sampling import sample_questions
    from teammed.experiments.tune import medagentsbench_inputs
    from teammed.optimizers.reproduce_mab import DEFAULT_ROWS_MAB, check_rows, row_program_mab

    rows = tuple(spec.rows or DEFAULT_ROWS_MAB)
    check_rows(rows)
    datasets, pools, split = medagentsbench_inputs(spec)
    work: list[tuple[str, Callable[[], Any], Sequence[Question]]] = []
    for name, questions in datasets.items():
        if isinstance(questions, str):
            continue
        table, pool = sample_questions(list(questions), n=spec.n, seed=0), pools.get(name, [])
        work += [(f"{name} {split} {row}", functools.partial(row_program_mab, row, pool), table) for row in rows]
    parts, estimates, measured = _priced_cells(spec.backend, work, pilot)
    return _finish("reproduce", parts, estimates, pilot=measured,
                   notes=("the published rows are read from --published and cost nothing",))
