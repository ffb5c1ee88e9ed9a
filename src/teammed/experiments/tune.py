"""``tune`` and ``reproduce`` as library calls: `tune(TuneSpec) -> TuneResult`,
`reproduce(ReproduceSpec) -> ReproduceResult`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from teammed.errors import ConfigError, TeammedError
from teammed.events import Limits, ProgressCallback, step, tracking

if TYPE_CHECKING:
    from teammed.experiments._data import DatasetChoice
    from teammed.experiments.specs import BackendSpec, ReproduceSpec, TuneSpec
    from teammed.types import Question

__all__ = ["tune", "reproduce", "TuneResult", "ReproduceResult", "check_usd_budget", "prices"]


class TuneResult(BaseModel):
    """A tune's outcome: ``status`` "done" with its Special Set, or "budget" (stopped; resume with more)."""

    model_config = ConfigDict(frozen=True)

    status: str
    stage: str
    message: str | None
    report: dict[str, Any]  # tune_report.json
    special_set_path: Path | None
    report_path: Path

    @property
    def done(self) -> bool:
        return self.status == "done"

    def text(self) -> str:
        spent = self.report.get("spent", {})
        if not self.done:
            return f"report: {self.report_path}"
        held_out = self.report["held_out"]
        proof = (f"held-out accuracy: {_held_out_text(held_out)}" if held_out is not None else
                 "held-out proof NOT run (the budget did not cover it; the set is unproven)")
        lines = [f"special set: {self.report['winner']} | {proof} | spent: {spent.get('calls', 0)} calls, "
                 f"{spent.get('tokens', 0)} tokens, ${spent.get('cost_usd') or 0:.4f}"]
        if len(self.report.get("plans", [])) > 1:
            lines.append(f"re-planned after stage 1's first batch: {self.report['plans'][-1]}")
        lines.append(f"stages: {'; '.join(self.report['stages_completed'])}")
        if self.report.get("runner_up"):
            from teammed.optimizers.report import noise_text

            lines.append(noise_text(self.report["runner_up"]).replace("**", ""))
        lines.append(f"special set: {self.special_set_path}\nreport: {self.report_path} (and tune_report.md)")
        return "\n".join(lines)

    def stopped_text(self) -> str:
        return (f"tune stopped in stage {self.stage}: {self.message}\n"
                f"no Special Set was written; rerun the same command with a larger --budget to resume")

    def to_json(self) -> dict[str, Any]:
        spent = self.report.get("spent", {})
        if not self.done:
            return {"status": self.status, "stage": self.stage, "message": self.message, "spent": spent,
                    "report": str(self.report_path)}
        return {"status": self.status, "special_set": self.report["winner"], "held_out": self.report["held_out"],
                "stages_completed": self.report["stages_completed"], "plan": self.report["plan"], "spent": spent,
                "special_set_path": str(self.special_set_path), "report": str(self.report_path)}


class ReproduceResult(BaseModel):
    """A paper's table as measured: its rows (with the published figures and tests), in Markdown too."""

    model_config = ConfigDict(frozen=True)

    rows: list[dict[str, Any]]
    unavailable: dict[str, str]
    special_sets: dict[str, Any]
    markdown: str
    table_md: Path
    table_json: Path

    @property
    def measured(self) -> list[dict[str, Any]]:
        """The rows teammed measured (a medagentsbench table also holds the published ones)."""
        return [r for r in self.rows if not str(r.get("source", "")).startswith("published")]

    def failure(self) -> str | None:
        """Why the table measured nothing (every question failed), or None."""
        asked = sum(sum(r["n_per_seed"]) for r in self.measured)
        if asked and sum(r["failed"] for r in self.measured) == asked:
            return f"all {asked} questions of the table failed (see the log); it measured nothing"
        return None

    def text(self) -> str:
        return f"{self.markdown}\ntable: {self.table_md} and {self.table_json}"

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "unavailable": self.unavailable, "special_sets": self.special_sets,
                "table_md": str(self.table_md), "table_json": str(self.table_json)}


def _held_out_text(held_out: Mapping[str, Any]) -> str:
    """The held-out proof in a line: each arm's accuracy on its n questions."""
    parts = []
    for arm, summary in held_out.items():
        accuracy = summary.get("accuracy") if isinstance(summary, Mapping) else None
        shown = f"{accuracy:.1%}" if isinstance(accuracy, (int, float)) else "n/a"
        parts.append(f"{arm} {shown}")
    n = next((s.get("n") for s in held_out.values() if isinstance(s, Mapping)), None)
    return ", ".join(parts) + (f" (n={n})" if n is not None else "")


# ---------------------------------------------------------------- prices and budgets
def prices(backend: BackendSpec) -> tuple[tuple[float, float] | None, str | None]:
    """The highest USD per prompt token and per answer token of the models of ``backend``, or None and
    why a cost in USD cannot be counted for one of them."""
    from teammed.estimate import prices_for
    from teammed.experiments._backend import model_specs

    highest = (0.0, 0.0)
    for spec, api_base, _ in model_specs(backend):
        given, why = prices_for(spec, api_base)
        if given is None:
            return None, why
        highest = (max(highest[0], given[0]), max(highest[1], given[1]))
    return highest, None


def _max_tokens(backend: BackendSpec) -> int:
    """The largest answer any backend may give (max_tokens, or a deployment's own)."""
    from teammed.experiments._backend import model_specs

    own = [int(params["max_tokens"]) for _, _, params in model_specs(backend) if params.get("max_tokens")]
    return max([int(backend.max_tokens), *own])


def check_usd_budget(backend: BackendSpec, text: str, *, flag: str) -> None:
    """A ``usd=`` budget binds only when every call is priced: refused up front otherwise."""
    from teammed.optimizers.tune_queue import parse_budget

    budget = parse_budget(text)
    if budget.usd is None:
        return
    _, why = prices(backend)
    if why is not None:
        raise ConfigError(f"{flag} usd={budget.usd:g} would never bind: {why}, so every call counts $0; "
                          f"give calls=N or tokens=N instead")


def _teach(lm: Any, questions: Sequence[Any]) -> None:
    """The simulated team needs the gold letters of the questions it will be asked (its planted world)."""
    from teammed.backends.simulated import SimulatedTeamLM, answer_key

    if isinstance(lm, SimulatedTeamLM):
        lm.answers.update(answer_key(questions))


# ---------------------------------------------------------------- tune
# settings whose default is TuneSettings' own (one set of defaults: the spec's field is None unless given)
SETTING_FIELDS = ("optimizer", "seed", "batch_size", "stage1_batches", "pool_size", "alpha")


def _settings(spec: TuneSpec, dataset: str, model: str) -> Any:
    from teammed.experiments._backend import server_of
    from teammed.optimizers.tune import TuneSettings

    given = {name: getattr(spec, name) for name in SETTING_FIELDS if getattr(spec, name) is not None}
    return TuneSettings(dataset=dataset, model=model, server=server_of(spec.backend), **given)


def tune_questions(spec: TuneSpec) -> tuple[list[Question], list[Question], DatasetChoice]:
    """The tuning and held-out questions, and the identity of the data set they come from."""
    from teammed.data import load_dataset, sample_questions
    from teammed.data.splits import partition
    from teammed.experiments._data import DatasetChoice, dataset_name
    from teammed.records import dataset_digest

    d = spec.data
    if d.split in ("tune", "eval", "all"):
        raise ConfigError(f"a tune draws its tuning and its held-out questions from one source split, so "
                          f"split={d.split!r} (a part) cannot be given; name the source split (e.g. "
                          f"split='test_hard'), or tune_split= for a separate tuning split")
    if d.questions is not None and spec.tune_split:
        raise ConfigError("tune_split= loads a split of a named data set; with questions given, leave it out")
    pinned = {"revision": d.revision} if d.revision else {}
    held = {"split": d.split, **pinned} if d.split else pinned
    if spec.tune_split:  # the source's own train/dev split for tuning, its default split held out
        tune_pool = load_dataset(d.dataset, data_dir=d.data_dir, split=spec.tune_split, **pinned)
        eval_pool = load_dataset(d.dataset, data_dir=d.data_dir, **held)
        source, split = [*tune_pool, *eval_pool], f"{spec.tune_split}/tune"
    else:
        source = list(d.questions) if d.questions is not None else load_dataset(d.dataset, data_dir=d.data_dir,
                                                                                 **held)
        tune_pool, eval_pool = partition(source, part="tune"), partition(source, part="eval")
        split = f"{d.split or 'file'}/tune"
    seed = _settings(spec, "", "").seed  # the sampling seed is the racing-order seed
    tune_q = sample_questions(tune_pool, n=spec.n_tune, seed=seed)
    eval_q = sample_questions(eval_pool, n=spec.n_eval, seed=seed)
    choice = DatasetChoice(name=dataset_name(d.dataset, d.dataset_name), sha256=dataset_digest(source),
                           split=split, questions=tune_q, source=source)
    return tune_q, eval_q, choice


def tune(spec: TuneSpec, *, progress: ProgressCallback = None, say: Callable[[str], None] | None = None) -> TuneResult:
    """Design prompts and components together within ``spec.budget``; prove the winner on held-out
    questions. ``say`` hears the plan before anything is spent. A result with status "budget" stopped
    early: the same spec with a larger budget resumes it."""
    from teammed.experiments.specs import TuneSpec, checked

    spec = checked(TuneSpec, spec)
    from teammed.backends.resolve import describe
    from teammed.experiments._backend import open_backends
    from teammed.experiments._data import tuning_record
    from teammed.optimizers.tune import first_rate, opening_plan
    from teammed.optimizers.tune import tune as run_tune
    from teammed.optimizers.tune_queue import parse_budget

    budget = parse_budget(spec.budget)
    check_usd_budget(spec.backend, spec.budget, flag="--budget")
    tune_q, eval_q, choice = tune_questions(spec)
    out = spec.out or Path("special_sets") / f"{choice.key}_tune"
    # the plan is checked before any backend opens: a budget below the minimum costs nothing
    settings = _settings(spec, choice.name, "")
    max_tokens, priced = _max_tokens(spec.backend), (prices(spec.backend)[0] if budget.usd is not None else None)
    model, api_base = spec.backend.models[0] if spec.backend.models else "gpt-4o", spec.backend.api_base
    rate = first_rate(settings, budget, tune_q, max_tokens=max_tokens, prices=priced, eval_questions=eval_q,
                      model=model, api_base=api_base)
    plan = opening_plan(settings, budget, n_tune=len(tune_q), n_eval=len(eval_q), rate=rate)
    if say is not None:
        say(f"tune: {plan.text()}")
    limits = Limits(calls=budget.calls, tokens=int(budget.tokens) if budget.tokens is not None else None,
                    usd=budget.usd)
    with open_backends(spec.backend, command="tune") as opened, \
            tracking("tune", progress, budget=limits, planned_calls=plan.budget_calls,
                     priced=prices(spec.backend)[1] is None):
        lm = opened[0].lm
        _teach(lm, [*tune_q, *eval_q])
        outcome = run_tune(tune_questions=tune_q, eval_questions=eval_q, lm=lm,
                           settings=_settings(spec, choice.name, describe(opened[0].spec)), budget=budget,
                           storage=spec.storage, study_name=spec.study or f"tune-{choice.key}", out_dir=out,
                           tuning=tuning_record(choice, tune_q), max_tokens=max_tokens, prices=priced,
                           tokenizer_model=(model, api_base))
    return TuneResult(status=outcome.status, stage=outcome.stage, message=outcome.message, report=outcome.report,
                      special_set_path=outcome.special_set_path, report_path=outcome.report_path)


# ---------------------------------------------------------------- reproduce
def reproduce(spec: ReproduceSpec, *, progress: ProgressCallback = None,
              say: Callable[[str], None] | None = None) -> ReproduceResult:
    """Measure a paper's table (``001-table1``) with the published figures beside; write
    ``table1.md`` and ``table1.json`` in ``spec.out``. A table whose every question failed says so
    (`ReproduceResult.failure`)."""
    from teammed.experiments.specs import ReproduceSpec, checked

    spec = checked(ReproduceSpec, spec)
    from teammed.backends.resolve import describe
    from teammed.experiments._backend import open_backends, server_of
    from teammed.optimizers.reproduce import (
        DATASETS_001,
        DEFAULT_ROWS_001,
        PROTOCOLS,
        ReproduceSettings,
        load_paper_datasets,
        reproduce_table1,
    )
    from teammed.optimizers.tune import TuneSettings
    from teammed.optimizers.tune import tune as run_tune
    from teammed.optimizers.tune_queue import parse_budget

    if spec.protocol == "medagentsbench":
        return _reproduce_medagentsbench(spec, progress)
    if spec.protocol not in PROTOCOLS:
        raise ConfigError(f"unknown protocol {spec.protocol!r}; available: {', '.join(PROTOCOLS)}")
    check_usd_budget(spec.backend, spec.tune_budget, flag="--tune-budget")
    datasets = load_paper_datasets(list(spec.datasets or DATASETS_001), data_dir=spec.data_dir, split=spec.split)
    for code, why in datasets.items():
        if isinstance(why, str) and say is not None:
            say(f"reproduce: {code} not available locally ({why}); its cells are skipped")
    if all(isinstance(q, str) for q in datasets.values()):
        raise ConfigError("none of the data sets is available locally; give --data-dir or --datasets")
    out = spec.out or Path("reproduce") / spec.protocol
    study = spec.study or f"reproduce-{spec.protocol}"
    tune_budget = parse_budget(spec.tune_budget)
    tune_prices = prices(spec.backend)[0] if tune_budget.usd is not None else None
    with open_backends(spec.backend, command="reproduce") as opened, \
            tracking("reproduce", progress, priced=prices(spec.backend)[1] is None):
        lm = opened[0].lm
        model = describe(opened[0].spec)
        _teach(lm, [q for qs in datasets.values() if not isinstance(qs, str) for q in qs])
        settings = ReproduceSettings(model=model, server=server_of(spec.backend), seeds=tuple(spec.seeds),
                                     n=spec.n or 50, rows=tuple(spec.rows or DEFAULT_ROWS_001),
                                     tune_budget=spec.tune_budget)

        def tune_special(code: str, tuning: Sequence[Any], held_out: Sequence[Any]) -> dict[str, Any]:
            from teammed.records import dataset_digest

            whole = datasets[code]
            tuned_on = {"dataset": code, "split": "tune",
                        "dataset_sha256": dataset_digest(whole) if not isinstance(whole, str) else None}
            step("begin", f"reproduce: tuning the special set of {code}")
            outcome = run_tune(tune_questions=tuning, eval_questions=held_out, lm=lm, tuning=tuned_on,
                               settings=TuneSettings(dataset=code, model=model, server=settings.server,
                                                     optimizer=spec.optimizer,
                                                     batch_size=spec.batch_size, seed=0),
                               budget=tune_budget, storage=spec.storage,
                               study_name=f"{study}-tune-{code}", out_dir=out / f"tune-{code}",
                               max_tokens=_max_tokens(spec.backend), prices=tune_prices)
            if outcome.status != "done":
                raise ConfigError(f"tuning the special set for {code} stopped: {outcome.message} "
                                  f"(raise --tune-budget)")
            report = outcome.report
            step("begin", "reproduce: the table's cells")
            return {"config": report["winner_config"], "program": report["program"],
                    "special_set": report["special_set"], "proven": report["held_out"] is not None,
                    "dataset_sha256": tuned_on["dataset_sha256"]}

        step("begin", "reproduce: the table's cells")
        table = reproduce_table1(datasets=datasets, lm=lm, settings=settings, storage=spec.storage,
                                 study_name=study, out_dir=out, tune_special=tune_special)
    return ReproduceResult(rows=table.rows, unavailable=table.unavailable, special_sets=table.special_sets,
                           markdown=table.markdown, table_md=out / "table1.md", table_json=out / "table1.json")


def medagentsbench_inputs(spec: ReproduceSpec) -> tuple[dict[str, Any], dict[str, list[Any]], str]:
    """The table's data sets (questions, or why not), each one's pool of worked examples, and the split."""
    from teammed.data import load_dataset
    from teammed.optimizers.reproduce_mab import pool_without

    if spec.published is None:
        raise ConfigError("reproduce medagentsbench sets the published rows beside ours: give --published DIR "
                          "(MedAgentsBench's output/ folder)")
    split = spec.split or "test_hard"
    datasets: dict[str, Any] = {}
    pools: dict[str, list[Any]] = {}
    for name in spec.datasets or ("medqa",):
        try:
            datasets[name] = load_dataset(name, data_dir=spec.data_dir, split=split)
        except (TeammedError, OSError) as exc:
            datasets[name] = f"{type(exc).__name__}: {exc}"
            continue
        try:
            pools[name] = pool_without(load_dataset(name, data_dir=spec.data_dir, split=spec.pool_split),
                                       datasets[name])
        except (TeammedError, OSError):
            pools[name] = []
    return datasets, pools, split


def _reproduce_medagentsbench(spec: ReproduceSpec, progress: ProgressCallback = None) -> ReproduceResult:
    from teammed.backends.resolve import describe
    from teammed.experiments._backend import open_backends, server_of
    from teammed.optimizers.reproduce_mab import DEFAULT_ROWS_MAB, MabSettings, check_rows, reproduce_medagentsbench

    rows = tuple(spec.rows or DEFAULT_ROWS_MAB)
    check_rows(rows)
    datasets, pools, split = medagentsbench_inputs(spec)
    assert spec.published is not None  # medagentsbench_inputs refused a spec without it
    out = spec.out or Path("reproduce") / spec.protocol
    with open_backends(spec.backend, command="reproduce") as opened, \
            tracking("reproduce", progress, priced=prices(spec.backend)[1] is None):
        model = describe(opened[0].spec)
        settings = MabSettings(model=model, server=server_of(spec.backend),
                               published_model=spec.published_model or model.rsplit("/", 1)[-1],
                               split=split, n=spec.n, rows=rows)
        step("begin", "reproduce: the table's cells")
        table = reproduce_medagentsbench(datasets=datasets, pools=pools, lm=opened[0].lm, settings=settings,
                                         published_root=Path(spec.published), storage=spec.storage,
                                         study_name=spec.study or f"reproduce-{spec.protocol}", out_dir=out)
    return ReproduceResult(rows=table.rows, unavailable=table.unavailable, special_sets={}, markdown=table.markdown,
                           table_md=table.paths["md"], table_json=table.paths["json"])
