"""The ``tune`` and ``reproduce`` commands: thin glue between the CLI and `teammed.optimizers.tune`/`reproduce`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from teammed.cli_args import non_negative_int, positive_int, probability, seed_list
from teammed.errors import ConfigError

__all__ = ["add_parsers"]

_OPTIMIZERS = ["none", "labeled", "bootstrap", "random-search", "mipro", "gepa"]


def budget_text(raw: str) -> str:
    """``--budget``/``--tune-budget``, checked when parsed so nothing is created for a bad one."""
    from teammed.optimizers.tune_queue import parse_budget

    try:
        parse_budget(raw)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return raw


def _specs(args: argparse.Namespace) -> list[tuple[str, str | None, Mapping[str, Any]]]:
    """(model, api_base, litellm_params) of every backend ``args`` name."""
    if getattr(args, "deployments", None):
        from teammed.backends.resolve import load_deployments_file

        return [(e["litellm_params"]["model"], None, e["litellm_params"])
                for e in load_deployments_file(args.deployments)]
    return [(spec, args.api_base, {}) for spec in args.model or ["local"]]


def _prices(args: argparse.Namespace) -> tuple[tuple[float, float] | None, str | None]:
    """The highest USD per prompt token and per answer token of the models of ``args``, or None and why
    a cost in USD cannot be counted for one of them."""
    highest = (0.0, 0.0)
    for spec, api_base, _ in _specs(args):
        if spec.split(":")[0] in ("local", "scripted", "simulated"):
            return None, f"{spec} is teammed's own backend, which has no price"
        if api_base:
            return None, f"{spec} at --api-base is a self-hosted server, which has no price"
        import litellm

        quiet, litellm.suppress_debug_info = litellm.suppress_debug_info, True  # no provider list on stdout
        info: Mapping[str, Any]
        try:
            info = dict(litellm.get_model_info(model=spec))
        except Exception:  # unknown to litellm's price list
            info = {}
        finally:
            litellm.suppress_debug_info = quiet
        given = (float(info.get("input_cost_per_token") or 0.0), float(info.get("output_cost_per_token") or 0.0))
        if not any(given):
            return None, f"litellm's price list has no price for {spec}"
        highest = (max(highest[0], given[0]), max(highest[1], given[1]))
    return highest, None


def _max_tokens(args: argparse.Namespace) -> int:
    """The largest answer any backend of ``args`` may give (--max-tokens, or a deployment's own)."""
    own = [int(params["max_tokens"]) for _, _, params in _specs(args) if params.get("max_tokens")]
    return max([int(args.max_tokens), *own])


def check_usd_budget(args: argparse.Namespace, text: str, *, flag: str) -> None:
    """A ``usd=`` budget binds only when every call is priced: refused up front otherwise."""
    from teammed.optimizers.tune_queue import parse_budget

    budget = parse_budget(text)
    if budget.usd is None:
        return
    _, why = _prices(args)
    if why is not None:
        raise ConfigError(f"{flag} usd={budget.usd:g} would never bind: {why}, so every call counts $0; "
                          f"give calls=N or tokens=N instead")


def _teach(lm: Any, questions: Sequence[Any]) -> None:
    """The simulated team needs the gold letters of the questions it will be asked (its planted world)."""
    from teammed.backends.simulated import SimulatedTeamLM, answer_key

    if isinstance(lm, SimulatedTeamLM):
        lm.answers.update(answer_key(questions))


def _questions(args: argparse.Namespace) -> tuple[list[Any], list[Any], Any]:
    """The tuning and held-out questions, and the identity of the data set they come from."""
    from teammed.cli_data import DatasetChoice, dataset_name
    from teammed.data import load_dataset, sample_questions
    from teammed.data.splits import partition
    from teammed.records import dataset_digest

    pinned = {"revision": args.revision} if args.revision else {}
    if args.tune_split:  # the source's own train/dev split for tuning, its default split held out
        tune_pool = load_dataset(args.dataset, data_dir=args.data_dir, split=args.tune_split, **pinned)
        eval_pool = load_dataset(args.dataset, data_dir=args.data_dir, **pinned)
        source, split = [*tune_pool, *eval_pool], f"{args.tune_split}/tune"
    else:
        source = load_dataset(args.dataset, data_dir=args.data_dir, **pinned)
        tune_pool, eval_pool = partition(source, part="tune"), partition(source, part="eval")
        split = "file/tune"
    seed = _settings(args, "", "").seed  # the sampling seed is the racing-order seed
    tune_q = sample_questions(tune_pool, n=args.n_tune, seed=seed)
    eval_q = sample_questions(eval_pool, n=args.n_eval, seed=seed)
    choice = DatasetChoice(name=dataset_name(args.dataset, getattr(args, "dataset_name", None)),
                           sha256=dataset_digest(source), split=split, questions=tune_q, source=source)
    return tune_q, eval_q, choice


# flags whose default is TuneSettings' own (one set of defaults: the flag is None unless given)
SETTING_FLAGS = ("optimizer", "seed", "batch_size", "stage1_batches", "pool_size", "alpha")


def _settings(args: argparse.Namespace, dataset: str, model: str) -> Any:
    from teammed.optimizers.tune import TuneSettings

    given = {name: getattr(args, name) for name in SETTING_FLAGS if getattr(args, name) is not None}
    return TuneSettings(dataset=dataset, model=model, **given)


def tune_command(args: argparse.Namespace, *, deployments: Callable[[argparse.Namespace], Any]) -> int:
    from teammed.backends.resolve import describe
    from teammed.cli_data import tuning_record
    from teammed.optimizers.tune import TuneAborted, first_rate, make_plan, tune
    from teammed.optimizers.tune_queue import parse_budget

    budget = parse_budget(args.budget)
    check_usd_budget(args, args.budget, flag="--budget")
    tune_q, eval_q, choice = _questions(args)
    out = args.out or Path("special_sets") / f"{choice.key}_tune"
    # the plan is checked before any backend opens: a budget below the minimum costs nothing
    settings = _settings(args, choice.name, "")
    max_tokens, prices = _max_tokens(args), (_prices(args)[0] if budget.usd is not None else None)
    rate = first_rate(settings, budget, tune_q, max_tokens=max_tokens, prices=prices, eval_questions=eval_q)
    plan = make_plan(settings, budget, n_tune=len(tune_q), n_eval=len(eval_q), rate=rate)
    print(f"tune: {plan.text()}", file=sys.stderr)

    with deployments(args) as opened:
        lm = opened[0].lm
        _teach(lm, [*tune_q, *eval_q])
        try:
            outcome = tune(tune_questions=tune_q, eval_questions=eval_q, lm=lm,
                           settings=_settings(args, choice.name, describe(opened[0].spec)), budget=budget,
                           storage=args.storage, study_name=args.study or f"tune-{choice.key}", out_dir=out,
                           tuning=tuning_record(choice, tune_q), max_tokens=max_tokens, prices=prices)
        except TuneAborted as exc:
            print(f"teammed: error: {exc}", file=sys.stderr)
            return 1
    spent = outcome.report.get("spent", {})
    # stdout: one JSON document with --json (the human lines go to stderr), else the human lines
    human = sys.stderr if args.json else sys.stdout
    if outcome.status != "done":  # no Special Set: a script must not take this for a finished tune
        print(f"tune stopped in stage {outcome.stage}: {outcome.message}", file=sys.stderr)
        print("no Special Set was written; rerun the same command with a larger --budget to resume", file=sys.stderr)
        print(f"report: {outcome.report_path}", file=human)
        if args.json:
            print(json.dumps({"status": outcome.status, "stage": outcome.stage, "message": outcome.message,
                              "spent": spent, "report": str(outcome.report_path)}, indent=2, default=str))
        return 1
    held_out = outcome.report["held_out"]
    proof = (f"held-out accuracy: {_held_out_text(held_out)}" if held_out is not None else
             "held-out proof NOT run (the budget did not cover it; the set is unproven)")
    print(f"special set: {outcome.report['winner']} | {proof} | "
          f"spent: {spent.get('calls', 0)} calls, {spent.get('tokens', 0)} tokens, "
          f"${spent.get('cost_usd') or 0:.4f}", file=human)
    if len(outcome.report.get("plans", [])) > 1:
        print(f"re-planned after stage 1's first batch: {outcome.report['plans'][-1]}", file=human)
    print(f"stages: {'; '.join(outcome.report['stages_completed'])}", file=human)
    if outcome.report.get("runner_up"):
        from teammed.optimizers.report import noise_text

        print(noise_text(outcome.report["runner_up"]).replace("**", ""), file=human)
    print(f"special set: {outcome.special_set_path}\nreport: {outcome.report_path} (and tune_report.md)", file=human)
    if args.json:
        print(json.dumps({"status": outcome.status, "special_set": outcome.report["winner"], "held_out": held_out,
                          "stages_completed": outcome.report["stages_completed"], "plan": outcome.report["plan"],
                          "spent": spent, "special_set_path": str(outcome.special_set_path),
                          "report": str(outcome.report_path)}, indent=2, default=str))
    return 0


def _held_out_text(held_out: Mapping[str, Any]) -> str:
    """The held-out proof in a line: each arm's accuracy on its n questions."""
    parts = []
    for arm, summary in held_out.items():
        accuracy = summary.get("accuracy") if isinstance(summary, Mapping) else None
        shown = f"{accuracy:.1%}" if isinstance(accuracy, (int, float)) else "n/a"
        parts.append(f"{arm} {shown}")
    n = next((s.get("n") for s in held_out.values() if isinstance(s, Mapping)), None)
    return ", ".join(parts) + (f" (n={n})" if n is not None else "")


def reproduce_command(args: argparse.Namespace, *, deployments: Callable[[argparse.Namespace], Any]) -> int:
    from teammed.backends.resolve import describe
    from teammed.optimizers.reproduce import (
        DATASETS_001,
        PROTOCOLS,
        ROWS_001,
        ReproduceSettings,
        load_paper_datasets,
        reproduce_table1,
    )
    from teammed.optimizers.tune import TuneSettings, tune
    from teammed.optimizers.tune_queue import parse_budget

    if args.protocol not in PROTOCOLS:
        raise ConfigError(f"unknown protocol {args.protocol!r}; available: {', '.join(PROTOCOLS)}")
    check_usd_budget(args, args.tune_budget, flag="--tune-budget")
    codes = [c.strip() for c in (args.datasets or ",".join(DATASETS_001)).split(",") if c.strip()]
    rows = tuple(r.strip() for r in args.rows.split(";")) if args.rows else tuple(ROWS_001)
    seeds = tuple(args.seeds)
    datasets = load_paper_datasets(codes, data_dir=args.data_dir, split=args.split)
    for code, why in datasets.items():
        if isinstance(why, str):
            print(f"reproduce: {code} not available locally ({why}); its cells are skipped", file=sys.stderr)
    if all(isinstance(q, str) for q in datasets.values()):
        raise ConfigError("none of the data sets is available locally; give --data-dir or --datasets")
    out = args.out or Path("reproduce") / args.protocol
    study = args.study or f"reproduce-{args.protocol}"
    with deployments(args) as opened:
        lm = opened[0].lm
        model = describe(opened[0].spec)
        _teach(lm, [q for qs in datasets.values() if not isinstance(qs, str) for q in qs])
        settings = ReproduceSettings(model=model, seeds=seeds, n=args.n, rows=rows, tune_budget=args.tune_budget)
        tune_prices = _prices(args)[0] if parse_budget(args.tune_budget).usd is not None else None

        def tune_special(code: str, tuning: Sequence[Any], held_out: Sequence[Any]) -> dict[str, Any]:
            from teammed.records import dataset_digest

            whole = datasets[code]
            tuned_on = {"dataset": code, "split": "tune",
                        "dataset_sha256": dataset_digest(whole) if not isinstance(whole, str) else None}
            outcome = tune(tune_questions=tuning, eval_questions=held_out, lm=lm, tuning=tuned_on,
                           settings=TuneSettings(dataset=code, model=model, optimizer=args.optimizer,
                                                 batch_size=args.batch_size, seed=0),
                           budget=parse_budget(args.tune_budget), storage=args.storage,
                           study_name=f"{study}-tune-{code}", out_dir=out / f"tune-{code}",
                           max_tokens=_max_tokens(args), prices=tune_prices)
            if outcome.status != "done":
                raise ConfigError(f"tuning the special set for {code} stopped: {outcome.message} "
                                  f"(raise --tune-budget)")
            report = outcome.report
            return {"config": report["winner_config"], "program": report["program"],
                    "special_set": report["special_set"], "proven": report["held_out"] is not None,
                    "dataset_sha256": tuned_on["dataset_sha256"]}

        result = reproduce_table1(datasets=datasets, lm=lm, settings=settings, storage=args.storage,
                                  study_name=study, out_dir=out, tune_special=tune_special)
    # stdout: one JSON document with --json (the table as Markdown goes to stderr), else the Markdown
    human = sys.stderr if args.json else sys.stdout
    print(result.markdown, file=human)
    print(f"table: {out / 'table1.md'} and {out / 'table1.json'}", file=human)
    if args.json:
        print(json.dumps({"rows": result.rows, "unavailable": result.unavailable,
                          "special_sets": result.special_sets, "table_md": str(out / "table1.md"),
                          "table_json": str(out / "table1.json")}, indent=2, default=str))
    asked = sum(sum(r["n_per_seed"]) for r in result.rows)
    failed = sum(r["failed"] for r in result.rows)
    if asked and failed == asked:  # a table of 0% cells measured nothing: say so in the exit status
        print(f"teammed: error: all {asked} questions of the table failed (see the log); it measured nothing",
              file=sys.stderr)
        return 1
    return 0


ROWS = ("Zero-Shot", "Few-Shot", "CoT", "Leadership", "Mut. Monitor.", "Shared Model", "Team Orient.", "Mut. Trust",
        "All Compon.", "Closed Loop", "MDAgents", "TeamMed (tuned)")


def add_parsers(sub: Any, *, model_flags: Callable[[argparse.ArgumentParser], None],
                deployments: Callable[[argparse.Namespace], Any]) -> None:
    """Register ``tune`` and ``reproduce`` on the CLI's subparsers."""
    t = sub.add_parser("tune", help="design prompts and components together; prove the result on held-out questions")
    t.add_argument("--dataset", required=True, help="a benchmark name or a JSONL/CSV file")
    t.add_argument("--data-dir", type=Path, help="where local copies of benchmarks live")
    t.add_argument("--tune-split", help="tune on this split of the source (e.g. train); default: the 'tune' part "
                   "of teammed.data.splits")
    t.add_argument("--budget", required=True, type=budget_text,
                   help="calls=N, tokens=N or usd=X (comma-separated for several)")
    t.add_argument("--optimizer", choices=_OPTIMIZERS, help="DSPy optimizer of stages 1 and 3 (default: bootstrap)")
    t.add_argument("--storage", help="sqlite:///file.db (default: in --out), a .log journal file, or postgresql://...")
    t.add_argument("--revision", help="pin the Hugging Face hub revision (tag, branch or commit) of --dataset")
    t.add_argument("--dataset-name", help="the name results carry (default: the file's stem or the benchmark's "
                   "name); studies and files also carry the content hash")
    t.add_argument("--study", help="study name (default: tune-<dataset name>-<content hash>)")
    t.add_argument("--n-tune", type=positive_int, help="tuning questions (default: all of the tune part)")
    t.add_argument("--n-eval", type=positive_int, default=100, help="held-out questions for the proof (default: 100)")
    t.add_argument("--seed", type=non_negative_int, help="sampling and racing-order seed (default: 111)")
    t.add_argument("--batch-size", type=positive_int, help="questions per racing round (default: 10)")
    t.add_argument("--stage1-batches", type=positive_int,
                   help="racing rounds' worth of questions for influence (default: 3)")
    t.add_argument("--pool-size", type=positive_int, help="configurations raced in stage 2 (default: 8)")
    t.add_argument("--alpha", type=probability,
                   help="racing's error rate: the chance of dropping a configuration as good as the best, per "
                   "race, under every look (default: 0.05)")
    t.add_argument("--out", type=Path, help="output directory "
                   "(default: special_sets/<dataset name>-<content hash>_tune)")
    t.add_argument("--json", action="store_true", help="print the result as one JSON document on stdout "
                   "(everything else on stderr)")
    model_flags(t)
    t.set_defaults(func=lambda args: tune_command(args, deployments=deployments))

    r = sub.add_parser("reproduce", help="a paper's table, measured, with the published numbers beside")
    r.add_argument("protocol", help="001-table1 (TeamMedAgents, Table 1)")
    r.add_argument("--data-dir", type=Path, help="where local copies of the paper's benchmarks live")
    r.add_argument("--datasets", help="comma-separated codes (MQA,PQA,MML,MMC,MBL,DDX,PVQ,PMC) or files; "
                   "default: all eight")
    r.add_argument("--split", help="the split every data set is read from (default: each one's default; test in a "
                   "MedAgentsBench folder, e.g. --split test_hard); cells sample its held-out part")
    r.add_argument("--rows", help="semicolon-separated rows (default: all rows: " + "; ".join(ROWS) + ")")
    r.add_argument("--seeds", default=[111, 222, 333], type=seed_list,
                   help="comma-separated sampling seeds (default and paper: 111,222,333)")
    r.add_argument("--n", type=positive_int, default=50, help="questions per cell (default: 50)")
    r.add_argument("--storage", help="where the grid's cells live; the same URL on several machines shares them")
    r.add_argument("--study", help="study name (default: reproduce-<protocol>)")
    r.add_argument("--tune-budget", default="calls=20000", type=budget_text,
                   help="budget of the special set's tune per data set (default: calls=20000)")
    r.add_argument("--optimizer", default="none", choices=_OPTIMIZERS,
                   help="the special set's prompt optimizer (default: none)")
    r.add_argument("--batch-size", type=positive_int, default=10,
                   help="questions per racing round of the special set's tune (default: 10)")
    r.add_argument("--out", type=Path, help="output directory (default: reproduce/<protocol>)")
    r.add_argument("--json", action="store_true", help="print the table as one JSON document on stdout "
                   "(the Markdown table and everything else on stderr)")
    model_flags(r)
    r.set_defaults(func=lambda args: reproduce_command(args, deployments=deployments))
