"""The ``teammed`` command: ask, run, report, compile, search, tune, reproduce, cache."""

from __future__ import annotations

import argparse
import atexit
import difflib
import functools
import logging
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from teammed.cli_args import (
    OneLineParser,
    check_unique_ids,
    check_writable_dir,
    config_values,
    describe_os_error,
    load_config_file,
    model_spec,
    non_negative_int,
    one_line,
    parse_options,
    positive_int,
    preset_list,
    read_json_object,
    report_error,
    seed_list,
    shard_spec,
    storage_url,
    system_name,
    validation_message,
)
from teammed.components import PRESET_COMPONENTS
from teammed.errors import BackendError, FatalBackendError, TeammedError

if TYPE_CHECKING:  # the config model (and pydantic) load when a command needs them, not for --help
    from teammed.cli_data import DatasetChoice
    from teammed.config import TeamworkConfig
    from teammed.run_plan import RunCell
    from teammed.types import Question

__all__ = ["main", "build_parser"]

log = logging.getLogger("teammed")

# `teammed --help`: plain text (argparse prints the description as it is), every command named
DESCRIPTION = ("LLM agent teams for medical question answering. Commands: ask (one question, with the "
               "transcript), run (a system over a data set), report (tables, tests and plots over runs), "
               "compile (optimize a system's prompts), search (component subsets with Optuna), tune (prompts "
               "and components together, proven on held-out questions), reproduce (a paper's table), cache "
               "(show or clear the response cache). `teammed COMMAND --help` describes one.")

SPLIT_HELP_EVAL = ("questions to evaluate on: a source split name (test, validation, ...), `all` for the "
                   "default split (or file) whole, or `eval`/`tune` for a part of it (default: the default split "
                   "where the source has its own train/validation split for tuning, else its `eval` part, "
                   "disjoint from what search/compile tune on)")
SPLIT_HELP_TUNE = ("questions to tune on: a source split name, `all`, or `tune`/`eval` (default: the source's "
                   "validation, else train split; else the `tune` part of the default split, disjoint from what "
                   "run evaluates)")


# ---------------------------------------------------------------- shared flags
def _add_config_flags(p: argparse.ArgumentParser, *, many: bool = False) -> None:
    g = p.add_argument_group("teamwork configuration")
    if many:
        g.add_argument("--presets", type=preset_list,
                       help=f"comma-separated presets to run as a grid ({', '.join(PRESET_COMPONENTS)})")
    g.add_argument("--preset", type=lambda raw: preset_list(raw)[0],
                   help=f"a named configuration: {', '.join(PRESET_COMPONENTS)} (default: base)")
    g.add_argument("--components", help="exactly these components: smm,leadership,team_orientation,trust,mm,cl")
    g.add_argument("--config", type=Path, help='a TeamworkConfig JSON (e.g. {"leadership": true, "trust": true}) '
                   "or a special_sets/<dataset>.json file written by `teammed search`")
    g.add_argument("--n-agents", choices=["auto", "2", "3", "4"], help="team size (default: auto)")
    g.add_argument("--n-turns", type=positive_int, help="discussion turns, 1-5 (default: 2)")
    g.add_argument("--early-consensus", type=float, help="skip discussion when this share of first choices agree, "
                   "in (0.5, 1.0] (default: off)")
    g.add_argument("--no-leader-correction", dest="leader_correction", action="store_const", const=False,
                   help="with leadership: do not let the leader override the aggregated answer (default: it may)")
    g.add_argument("--system", type=system_name, default="teamwork",
                   help="teamwork (default) or a peer system: zero_shot, few_shot, cot, mdagents, kamac, "
                   "consultation, majority_vote, consensus (hyphens allowed: zero-shot)")
    g.add_argument("--program", type=Path, help="a compiled program written by `teammed compile`")


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    from teammed.cli_backend import add_model_flags

    add_model_flags(p)


_TEAMWORK_FLAGS = ("preset", "presets", "components", "config", "n_agents", "n_turns", "early_consensus",
                   "leader_correction")


def _check_system_flags(args: argparse.Namespace) -> None:
    """Teamwork flags do nothing for a peer system: refuse them instead of silently ignoring them."""
    if args.system == "teamwork":
        return
    given = [f"--{name.replace('_', '-')}" for name in _TEAMWORK_FLAGS if getattr(args, name, None) is not None]
    if given:
        several = len(given) > 1
        raise TeammedError(f"{' and '.join(given) if len(given) == 2 else ', '.join(given)} "
                           f"{'configure' if several else 'configures'} the teamwork system, not {args.system}; "
                           f"drop {'them' if several else 'it'} or use --system teamwork")


def _config_from_args(args: argparse.Namespace, preset_name: str | None = None) -> TeamworkConfig:
    from teammed.config import config_from_components, preset

    overrides: dict[str, Any] = {
        "n_agents": args.n_agents if args.n_agents in (None, "auto") else int(args.n_agents),
        "n_turns": args.n_turns,
        "early_consensus": args.early_consensus,
        "leader_correction": getattr(args, "leader_correction", None),
    }
    if args.components is not None and not args.components.replace(",", "").strip():
        raise TeammedError(f"--components {args.components!r} names no component; list some (e.g. smm,leadership) "
                           f"or use --preset base for none")
    chosen = [x for x in (preset_name or args.preset, args.components, args.config) if x]
    if len(chosen) > 1:
        raise TeammedError("give only one of --preset/--presets, --components and --config")
    if args.components:
        return config_from_components(args.components, **overrides)
    if args.config:
        values = load_config_file(args.config).model_dump()
        values.update({k: v for k, v in overrides.items() if v is not None})
        return config_values(values, where=f"--config {args.config} with the command-line overrides")
    return preset(preset_name or args.preset or "base", **overrides)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The team-shape flags given on the command line (applied to a saved program, or refused)."""
    n_agents = args.n_agents if args.n_agents in (None, "auto") else int(args.n_agents)
    values = {"n_agents": n_agents, "n_turns": args.n_turns, "early_consensus": args.early_consensus}
    return {k: v for k, v in values.items() if v is not None}


def _deployments(args: argparse.Namespace):
    if not args.no_cache and args.cache_dir is not None:
        check_writable_dir(args.cache_dir, flag="--cache-dir")
    from teammed.cli_backend import open_from_args

    return open_from_args(args)


def _program_factory(args: argparse.Namespace, config: TeamworkConfig | None, *, pool: list | None = None,
                     seed: int = 0, vision: bool = False):
    """How to build the system; ``pool`` holds the questions few-shot examples may be drawn from."""
    system = args.system
    if args.program:
        from teammed.optimizers.saved import load_program

        explicit = config if (args.preset or args.components or args.config) else None
        program, _ = load_program(args.program, system=system, config=explicit, overrides=_overrides(args),
                                  vision=vision)
        return lambda: program
    if system == "teamwork":
        from teammed.programs.teamwork import TeamworkProgram

        return lambda: TeamworkProgram(config, vision=vision)
    from teammed.programs.peers import build_system

    if system in ("few_shot", "mdagents") and pool:
        key = "trainset" if system == "few_shot" else "examples"
        examples = [{"question": q.question, "options": dict(q.options), "answer": q.answer_idx,
                     "context": q.context} for q in pool if q.answer_idx]
        return lambda: build_system(system, **{key: examples, "seed": seed})
    return lambda: build_system(system)


# ---------------------------------------------------------------- ask
def _image_argument(raw: str | None) -> str | None:
    """``ask --image``: a readable image file or an http(s)/data URL, checked before any call."""
    if raw is None:
        return None
    if raw.startswith(("http://", "https://", "data:image/")):
        return raw
    path = Path(raw)
    if not path.is_file():
        raise TeammedError(f"--image {raw}: no such file; give an image file (PNG, JPEG, ...) or an http(s) URL")
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise TeammedError(f"--image {raw}: cannot read it ({exc.strerror}); check its permissions") from None
    return str(path)


def _asked(args: argparse.Namespace) -> Question:
    """The question ``ask`` deliberates over: typed in (text and ``--option``s), or replayed from a data set
    (``--dataset`` and ``--id``)."""
    from teammed.types import Question

    if args.dataset is None:
        if args.question_id or args.split or args.data_dir:
            raise TeammedError("--id, --split and --data-dir pick a question of a data set: give --dataset too")
        if not (args.question or "").strip():
            raise TeammedError("the question is empty; give its text as the first argument, or --dataset and --id")
        return Question(id="ask", question=args.question, options=parse_options(args.option),
                        image=_image_argument(args.image))
    if args.question or args.option:
        raise TeammedError("give either a question's text and --option, or --dataset and --id, not both")
    if not args.question_id:
        raise TeammedError(f"--dataset {args.dataset} needs --id: the id of the question to replay")
    from teammed.data import load_dataset

    questions = load_dataset(args.dataset, data_dir=args.data_dir, split=args.split)
    found = [q for q in questions if q.id == args.question_id]
    if not found:
        close = difflib.get_close_matches(args.question_id, [q.id for q in questions], n=3)
        hint = f" Nearest ids: {', '.join(close)}." if close else ""
        raise TeammedError(f"{args.dataset} ({args.split or 'its default split'}) has no question with id "
                           f"{args.question_id!r} "
                           f"among its {len(questions)} questions.{hint}")
    question = found[0]
    if args.image:
        question = question.model_copy(update={"image": _image_argument(args.image)})
    return question


def cmd_ask(args: argparse.Namespace) -> int:
    import dspy

    from teammed import usage
    from teammed.adapter import SchemaAdapter
    from teammed.cli_args import printable
    from teammed.render import render_transcript

    _check_system_flags(args)
    question = _asked(args)
    options, image = dict(question.options), question.image
    config = _config_from_args(args) if args.system == "teamwork" else None
    factory = _program_factory(args, config, vision=image is not None)
    from teammed.progress import CallProgress

    inputs: dict[str, Any] = {"question": question.question, "options": options}
    if image is not None:
        inputs["image"] = image
    from teammed.backends.vision import require_vision

    with _deployments(args) as deployments:
        require_vision([question], deployments)
        with CallProgress(f"ask ({args.system})", stream=sys.stderr, phase_lines=True), \
                dspy.context(lm=deployments[0].lm, adapter=SchemaAdapter(), disable_history=True), \
                usage.track() as used:
            prediction = factory()(**inputs)
    # the question's, the options' and the model's text are shown, never obeyed as terminal escape codes
    if args.dataset is not None:  # a replayed question: what was asked, before what the team said
        print(printable(f"Question {question.id} of {args.dataset}:\n{question.question}\n"
                        + "\n".join(f"  {k}) {v}" for k, v in options.items()) + "\n"))
    print(printable(render_transcript(prediction)))
    if prediction.answer not in options:
        raise TeammedError(f"the {args.system} system gave no valid option (got {prediction.answer!r}); "
                           f"try another --model or rerun with -v to see the calls")
    print(printable(f"\nAnswer: {prediction.answer}) {options[prediction.answer]}  "
                    f"(confidence {prediction.confidence})"))
    if question.answer_idx is not None:  # a replayed question: its gold, after the team has answered
        verdict = "right" if prediction.answer == question.answer_idx else "wrong"
        print(printable(f"Gold: {question.answer_idx}) {options[question.answer_idx]}  (the team is {verdict})"))
    print(printable(f"\nRationale:\n{prediction.rationale}"))
    print(f"\n[{used.calls} LM calls, {used.prompt_tokens}+{used.completion_tokens} tokens, "
          f"{used.latency_s:.1f}s in the LM]")
    return 0


# ---------------------------------------------------------------- run
def _grid_configs(args: argparse.Namespace) -> list[tuple[str, TeamworkConfig | None]]:
    """Every (label, config) of the grid, built and checked before anything is written."""
    _check_system_flags(args)
    if args.preset and args.presets:
        raise TeammedError("give --preset NAME for one configuration or --presets a,b for a grid, not both")
    explicit = bool(args.preset or args.presets or args.components or args.config)
    configs = []
    for name in args.presets or [None]:
        config = _config_from_args(args, name) if args.system == "teamwork" else None
        if args.program:
            from teammed.optimizers.saved import saved_config

            if not explicit:
                config = saved_config(args.program, overrides=_overrides(args))
            _program_factory(args, config)  # loads the program: a mismatch is refused now
        configs.append((name or (config.label() if config else args.system), config))
    return configs


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def cmd_run(args: argparse.Namespace) -> int:
    from teammed.backends.vision import require_vision
    from teammed.cli_data import load_for, tuned_on, without_overlap
    from teammed.data import sample_questions, shard_questions
    from teammed.programs.persist import program_identity
    from teammed.run_plan import plan_cells

    resuming = bool(args.resume or args.retry_failed)
    if resuming and not args.out:
        raise TeammedError("--resume/--retry-failed need the --out directory of the run to continue")
    configs = _grid_configs(args)
    choice = load_for(args, purpose="eval")
    check_unique_ids([q.id for q in choice.source], dataset=args.dataset)
    program = program_identity(args.program)
    tuned = tuned_on(args.program or args.config)

    def sample(seed: int) -> tuple[list[Question], dict[str, Any]]:
        drawn = sample_questions(choice.questions, n=args.n, seed=seed, stratify_by=args.stratify,
                                 shuffle_options=args.shuffle_options)
        return without_overlap(drawn, tuned, choice, allow=args.allow_overlap)

    cells = plan_cells(configs, args.seeds or [args.seed], sample=sample, dataset=choice.name, out=args.out,
                       program_sha256=program.get("program_sha256"), resuming=resuming,
                       check_dir=check_writable_dir, say=_say, shard=args.shard,
                       part=(lambda qs: shard_questions(qs, *args.shard, stratify_by=args.stratify)) if args.shard
                       else None)
    summaries = []
    with _deployments(args) as deployments:
        for cell in cells:
            require_vision(cell.questions, deployments)
        for cell in cells:
            summary = _run_cell(args, cell, choice=choice, program=program, deployments=deployments)
            if summary is None:
                return 1
            summaries.append((cell.out, summary))
    for out, summary in summaries:
        _print_summary(out, summary)
    return 0


def _run_cell(args: argparse.Namespace, cell: RunCell, *, choice: DatasetChoice, program: dict[str, Any],
              deployments: list) -> dict[str, Any] | None:
    """Run one cell of the grid with its progress bar; None when the run stopped (said on stderr)."""
    from teammed.evals import Summarizer
    from teammed.programs.accounting import expected_calls_per_question
    from teammed.progress import RunProgress
    from teammed.records import prompt_digest
    from teammed.run_plan import few_shot_pool, run_identity, run_meta
    from teammed.runner import RunSettings, RunStopped, run_questions

    identity = run_identity(cell, system=args.system, program=program, deployments=deployments,
                            api_base=getattr(args, "api_base", None), dataset=choice.name,
                            dataset_sha256=choice.sha256, split=choice.split, revision=args.revision, n=args.n,
                            stratify=args.stratify, shuffle_options=bool(args.shuffle_options),
                            temperature=args.temperature)
    factory = _program_factory(args, cell.config, pool=few_shot_pool(choice.source, cell.sampled or cell.questions),
                               seed=cell.seed,
                               vision=any(q.image for q in cell.questions))
    settings = RunSettings(out_dir=cell.out, identity=identity, resume=args.resume, retry_failed=args.retry_failed,
                           max_consecutive_failures=args.max_consecutive_failures,
                           extra_meta=run_meta(cell, identity, max_tokens=args.max_tokens,
                                               prompt_sha256=prompt_digest(factory())))
    header = (f"{cell.label} | {choice.name} ({choice.split}) | seed {cell.seed} | {len(cell.questions)} questions | "
              f"{identity.model} -> {cell.out}")
    # --concurrency questions in flight, never more than the deployments take (the embedded model: 1)
    in_flight = min(args.concurrency, sum(d.concurrency for d in deployments))
    per_question = expected_calls_per_question(cell.config, system=args.system)
    try:
        with RunProgress(total=len(cell.questions), expected_calls=per_question, stream=sys.stderr,
                         concurrency=in_flight) as bar:
            return run_questions(cell.questions, program_factory=factory, deployments=deployments,
                                 settings=settings, progress=bar.update, metrics=Summarizer,
                                 questions_in_flight=in_flight,
                                 on_start=functools.partial(print, header, file=sys.stderr))
    except RunStopped as exc:
        print(f"teammed: error: {exc}", file=sys.stderr)
        return None


def _print_summary(out: Path, s: dict[str, Any]) -> None:
    accuracy = "n/a (no labeled questions)" if s["accuracy"] is None else f"{s['accuracy']:.1%}"
    baseline = s["majority_baseline"]
    majority = f" (majority class {baseline['accuracy']:.1%})" if baseline["accuracy"] is not None else ""
    print(f"\n{s['label']} seed {s['seed']}: accuracy {accuracy}{majority} on {s['n_labeled']} labeled of "
          f"{s['n']} questions ({s['n_failed']} failed, {s['n_unlabeled']} unlabeled) | "
          f"{s['calls_per_question']:.1f} calls, "
          f"{s['prompt_tokens_per_question']:.0f}+{s['completion_tokens_per_question']:.0f} billable tokens, "
          f"{s['latency_s_per_question']:.1f}s per question | cache hits {s['cache_hits']} | "
          f"parse fallbacks {s['parse_failures']} failed + {s['repaired']} repaired of {s['calls']} calls, "
          f"{s['ranking_repairs']} ranking repairs, {s['fallbacks']} fallbacks")
    spread = s["answer_spread"]
    if spread["constant"]:
        print(f"  warning: answered {spread['top']} to {spread['share']:.0%} of {spread['n_answered']} "
              f"questions: a constant predictor", file=sys.stderr)
    print(f"  results: {out / 'results.jsonl'}\n  summary: {out / 'summary.json'}")


# ---------------------------------------------------------------- report
def _check_run_files(run_dir: Path) -> None:
    """A torn or hand-edited summary.json/run.json is named, with the fix, before the report reads it."""
    for name in ("summary.json", "run.json"):
        path = run_dir / name
        if path.exists():
            read_json_object(path, what="run file", fix="delete it (the report reads the rows in results.jsonl) "
                             "or rerun that run")


def cmd_report(args: argparse.Namespace) -> int:
    from teammed.evals import build_report
    from teammed.evals.report import ReportError

    run_dirs = []
    for d in args.dirs:
        if not Path(d).is_dir():
            raise TeammedError(f"{d} is not a directory; pass run directories written by `teammed run`")
        found = sorted(p.parent for p in Path(d).rglob("results.jsonl"))
        if not found:
            raise TeammedError(f"no results.jsonl under {d}; pass run directories written by `teammed run`")
        run_dirs.extend(found)
    for run_dir in run_dirs:
        _check_run_files(run_dir)
    check_writable_dir(Path(args.out))
    if args.compare:
        path = build_report(run_dirs, Path(args.out), baseline=args.baseline, compare=True)
        print(f"report: {path}\ncompared question by question: {Path(args.out) / 'compare.html'}")
        return 0
    baseline = args.baseline or "base"
    try:
        path = build_report(run_dirs, Path(args.out), baseline=baseline)
    except ReportError as exc:
        if args.baseline or not str(exc).startswith("baseline"):
            raise
        print("teammed: no run is labelled 'base', so the report has no significance tests; "
              "pass --baseline LABEL to compare with another configuration", file=sys.stderr)
        path = build_report(run_dirs, Path(args.out), baseline=None)
    print(f"report: {path}")
    return 0


# ---------------------------------------------------------------- compile / search
def cmd_compile(args: argparse.Namespace) -> int:
    from teammed.cli_optimize import compile_command

    _check_system_flags(args)
    if args.out.is_dir():
        raise TeammedError(f"--out {args.out} is a directory; give the compiled program's file name, "
                           f"e.g. {args.out / 'program.json'}")
    check_writable_dir(args.out.parent)
    if args.system == "teamwork":
        _config_from_args(args)  # a bad config is refused before the optimizer spends anything
    return compile_command(args, config_from_args=_config_from_args, deployments=_deployments)


def cmd_search(args: argparse.Namespace) -> int:
    from teammed.cli_optimize import search_command

    check_writable_dir(args.out)
    return search_command(args, deployments=_deployments)


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("teammed")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="teammed", description=DESCRIPTION)
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log what the library does; show a traceback on unexpected errors")
    parser.add_argument("--version", action="version", version=f"teammed {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    ask = sub.add_parser("ask", help="deliberate over one question and show the transcript")
    ask.add_argument("question", nargs="?", help="the question's text (or --dataset and --id)")
    ask.add_argument("--image", help="an image the question is about (a file or an http(s) URL); needs a vision "
                     "model")
    ask.add_argument("--option", action="append", help='an answer option, LETTER="text" (repeat; A, B, ... in order)')
    ask.add_argument("--dataset", help="replay a question of this data set (a benchmark name, a file or a folder, "
                     "as in run), given by --id; its gold answer is shown after the team's")
    ask.add_argument("--data-dir", type=Path, help="where local copies of benchmarks live (with --dataset)")
    ask.add_argument("--split", help="the data set's split to look in (default: the data set's default split, "
                     "as `run --split` names them)")
    ask.add_argument("--id", dest="question_id", help="the id of the question to replay (with --dataset; "
                     "MedAgentsBench: its realidx)")
    _add_config_flags(ask)
    _add_model_flags(ask)
    ask.set_defaults(func=cmd_ask)

    run = sub.add_parser("run", help="run a system over a data set; write results.jsonl and summary.json")
    run.add_argument("--dataset", required=True, help="a benchmark name (demo, medqa, ...), a data file (.jsonl, "
                     ".json, .csv, .parquet, .arrow) or a Hugging Face directory (save_to_disk, hub copy)")
    run.add_argument("--data-dir", type=Path, help="where local copies of benchmarks live")
    run.add_argument("--dataset-name", help="the name results and reports give this data set (default: the "
                     "registry name or the file's stem; its content hash is recorded too)")
    run.add_argument("--split", help=SPLIT_HELP_EVAL)
    run.add_argument("--revision", help="pin the Hugging Face hub revision (tag, branch or commit) of --dataset")
    run.add_argument("--n", type=positive_int, help="questions to sample (default: all)")
    run.add_argument("--seed", type=int, default=111, help="sampling seed (default: 111; the papers use 111, 222, 333)")
    run.add_argument("--seeds", type=seed_list, help="comma-separated sampling seeds: run each (a grid with --presets)")
    run.add_argument("--stratify", help="a meta field to stratify the sample by")
    run.add_argument("--shard", type=shard_spec, metavar="I/N",
                     help="answer only the I-th of N disjoint parts of the sample (same seed and --n in every "
                          "shard; e.g. a Slurm array: $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT); each part "
                          "writes its own directory, <out>/shard<I>of<N>, and `report` merges them "
                          "(default: the whole sample)")
    run.add_argument("--shuffle-options", action="store_true", help="shuffle option order (seeded)")
    run.add_argument("--out", help="run directory (default: runs/<time>-<dataset>/<label>/seed<seed>)")
    run.add_argument("--resume", action="store_true", help="continue the run in --out (same identity only), "
                     "skipping finished questions")
    run.add_argument("--retry-failed", action="store_true", help="with --resume: answer the failed questions "
                     "again, replacing their rows")
    run.add_argument("--max-consecutive-failures", type=non_negative_int, default=5,
                     help="stop the run after this many questions in a row fail with the same error of any "
                     "kind: a bad key, a dead, erroring or hung server, answers naming no option (0: never; "
                     "default 5); a run in which every question failed exits non-zero whatever this is")
    run.add_argument("--allow-overlap", action="store_true", help="keep questions the --config Special Set or "
                     "--program was tuned on (recorded in run.json)")
    _add_config_flags(run, many=True)
    _add_model_flags(run)
    run.set_defaults(func=cmd_run)

    report = sub.add_parser("report", help="tables, significance tests and plots over run directories")
    report.add_argument("dirs", nargs="+", help="run directories (searched recursively for results.jsonl)")
    report.add_argument("--out", default="report", help="report directory (default: report)")
    report.add_argument("--baseline", help="label to test every other configuration against (default: base, "
                        "when a run is labelled base)")
    report.add_argument("--compare", action="store_true",
                        help="the runs hold two configurations of one data set: compare the second with the first "
                             "question by question (fixed, broken, McNemar) in the report and in compare.html")
    report.set_defaults(func=cmd_report)

    comp = sub.add_parser("compile", help="optimize the prompts of a system with a DSPy optimizer")
    comp.add_argument("--dataset", required=True, help="a benchmark name, a data file or a Hugging Face directory")
    comp.add_argument("--data-dir", type=Path, help="where local copies of benchmarks live")
    comp.add_argument("--dataset-name", help="the name this data set is recorded under (default: registry name or "
                      "file stem; its content hash is recorded too)")
    comp.add_argument("--split", help=SPLIT_HELP_TUNE)
    comp.add_argument("--revision", help="pin the Hugging Face hub revision of --dataset")
    comp.add_argument("--optimizer", required=True, choices=["labeled", "bootstrap", "random-search", "mipro", "gepa"],
                      help="the DSPy optimizer")
    comp.add_argument("--train", type=positive_int, default=20, help="training questions (default: 20)")
    comp.add_argument("--val", type=non_negative_int, default=10, help="validation questions (default: 10)")
    comp.add_argument("--test", type=non_negative_int, default=10,
                      help="held-out questions for before/after accuracy (default: 10)")
    comp.add_argument("--seed", type=int, default=111, help="seed of the split and the optimizer (default: 111)")
    comp.add_argument("--teacher-model", type=model_spec, help="litellm model for bootstrapping demonstrations")
    comp.add_argument("--reflection-model", type=model_spec, help="litellm model for GEPA's reflection")
    comp.add_argument("--out", required=True, type=Path, help="where to write the compiled program (JSON)")
    _add_config_flags(comp)
    _add_model_flags(comp)
    comp.set_defaults(func=cmd_compile)

    search = sub.add_parser("search", help="search component subsets with Optuna; write the Special Set")
    search.add_argument("--dataset", required=True, help="a benchmark name, a data file or a Hugging Face directory")
    search.add_argument("--data-dir", type=Path, help="where local copies of benchmarks live")
    search.add_argument("--dataset-name", help="the name this data set is recorded under (default: registry "
                        "name or file stem; its content hash is recorded too)")
    search.add_argument("--split", help=SPLIT_HELP_TUNE)
    search.add_argument("--n", type=positive_int, default=20, help="dev questions per trial (default: 20)")
    search.add_argument("--trials", type=positive_int, default=10, help="Optuna trials (default: 10)")
    search.add_argument("--storage", type=storage_url,
                        help="sqlite:///file.db, a .log journal file, or postgresql://... "
                        "(default: sqlite <out>/<dataset name>-<hash8>_study/study.db)")
    search.add_argument("--revision", help="pin the Hugging Face hub revision (tag, branch or commit) of --dataset")
    search.add_argument("--study", help="study name (default: teammed-<dataset name>-<hash8>, hash8: the first 8 "
                        "hex digits of the data set's content hash)")
    search.add_argument("--objectives", default="accuracy", choices=["accuracy", "accuracy,tokens"],
                        help="what to maximise (default: accuracy)")
    search.add_argument("--sampler", default="tpe", choices=["tpe", "grid", "brute"],
                        help="Optuna sampler (default: tpe)")
    search.add_argument("--seed", type=int, default=111, help="sampling and sampler seed (default: 111)")
    search.add_argument("--batch-size", type=positive_int, default=5,
                        help="questions per pruning step (default: 5)")
    search.add_argument("--search-turns", action="store_true", help="also search n_turns in {2, 3}")
    search.add_argument("--search-agents", action="store_true", help="also search n_agents")
    search.add_argument("--search-early-consensus", action="store_true",
                        help="also search the early-consensus threshold")
    search.add_argument("--out", type=Path, default=Path("special_sets"),
                        help="directory of the Special Set <dataset name>-<hash8>.json and its study "
                        "(default: special_sets)")
    search.add_argument("--json", action="store_true", help="print the result as one JSON document on stdout "
                        "(everything else on stderr)")
    _add_model_flags(search)
    search.set_defaults(func=cmd_search)
    from teammed.cli_cache import add_cache_command
    from teammed.cli_tune import add_parsers as add_tune_parsers  # tune, reproduce

    add_cache_command(sub)
    add_tune_parsers(sub, model_flags=_add_model_flags, deployments=_deployments)
    return parser


def _fail(message: object, code: int, *, verbose: bool, exiting: bool) -> int:
    from teammed.redact import redact

    report_error(redact(message))
    if verbose:
        traceback.print_exc()
    elif exiting:  # the process ends: threads winding down must not bury the one line under warnings
        logging.disable(logging.CRITICAL)
    return code


def _exit_now_if_signalled(code: int) -> None:
    """After Ctrl-C/SIGTERM: rows are already on disk; skip third-party exit handlers (seconds in litellm)."""
    from teammed.backends import resolve

    if resolve.stopping():
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(code)


def _stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader has gone (`teammed ... | head`): its write end reports an error."""
    try:
        import select

        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows), no file descriptor (captured)
        return False


def _closed_pipe(code: int = 141) -> int:
    """The reader of stdout went away: end quietly, the shell's way (128 + SIGPIPE, as `yes | head` does).

    What stdout still holds would fail again at exit: it is sent to /dev/null instead."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass
    return code


def main(argv: list[str] | None = None) -> int:
    import teammed._litellm_env  # noqa: F401  litellm's packaged price map, unless the user chose otherwise

    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) or a usage error (2): printed, maybe into a closed pipe
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _closed_pipe()
        except (OSError, ValueError):
            pass
        raise exc from None
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    # litellm logs every request at INFO; keep our own INFO (-v) readable
    logging.getLogger("LiteLLM").setLevel(logging.WARNING if args.verbose else logging.ERROR)
    from teammed.redact import install_log_redaction

    install_log_redaction()  # no password inside a URL reaches stderr
    verbose = bool(args.verbose)
    if args.command in ("compile", "search", "tune", "reproduce") and not verbose:
        _quiet_libraries()
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        saved = "; finished questions are saved (use --resume)" if args.command == "run" else ""
        print(f"teammed: interrupted{saved}", file=sys.stderr)
        _exit_now_if_signalled(130)
        return 130
    except SystemExit as exc:  # SIGTERM (see teammed.backends.resolve.shutdown_on_signals)
        if isinstance(exc.code, int) and exc.code > 128:
            saved = "; finished questions are saved (use --resume)" if args.command == "run" else ""
            print(f"teammed: terminated{saved}", file=sys.stderr)
            _exit_now_if_signalled(exc.code)
        raise
    except BackendError as exc:
        # Refused before any call (a missing key): careless input, 2. A server's refusal or failure while
        # the command works (a 401, a dead server) exits 1 in every command, as `run` stopping does.
        up_front = isinstance(exc, FatalBackendError) and getattr(exc, "before_any_call", False)
        return _fail(exc, 2 if up_front else 1, verbose=verbose, exiting=argv is None)
    except TeammedError as exc:  # refused on purpose: the message names the value and the fix
        return _fail(exc, 2, verbose=verbose, exiting=argv is None)
    except OSError as exc:  # unreadable input, unwritable --out, a full disk
        if isinstance(exc, BrokenPipeError) and _stdout_gone():  # `teammed ... | head`: quiet, as a shell tool
            logging.disable(logging.CRITICAL)
            return _closed_pipe()
        out = getattr(args, "out", None)
        message, code = describe_os_error(exc, where=f"--out {out}" if out else None)
        return _fail(message, code, verbose=verbose, exiting=argv is None)
    except ValueError as exc:  # a value from user input that a library refused
        from pydantic import ValidationError

        if isinstance(exc, ValidationError):  # a value a user supplied broke a model's rule
            return _fail(validation_message(exc), 2, verbose=verbose, exiting=argv is None)
        return _fail(f"{one_line(exc)}", 2, verbose=verbose, exiting=argv is None)
    except Exception as exc:  # a bug: one line, the traceback with -v
        if type(exc).__module__.startswith("sqlalchemy") and not verbose:  # the study database (--storage)
            first = one_line(str(exc).split("\n")[0].split("(Background on this error")[0])
            return _fail(f"cannot use the --storage database: {first}; check the URL, that the server runs "
                         f"and the credentials", 1, verbose=verbose, exiting=argv is None)
        if type(exc).__name__ == "StorageInternalError" and not verbose:  # the study storage, mid-command
            cause = one_line(str(exc.__cause__ or exc).split("\n")[0].split("(Background on this error")[0])
            storage = getattr(args, "storage", None) or "the study database (in --out)"
            return _fail(f"the Optuna study storage {storage} failed ({cause}); if its file is damaged, move it "
                         f"away (or delete it) to start the study afresh, or restore a copy", 1, verbose=verbose,
                         exiting=argv is None)
        if verbose:
            raise
        report_error(f"unexpected {type(exc).__name__}: {exc} (a bug; rerun with -v for the traceback and "
                     f"report it)")
        return 1


def _quiet_libraries() -> None:
    """Optuna and DSPy print their own INFO lines (a study created, a trial finished, traces bootstrapped)
    through handlers of their own, between teammed's progress lines: without -v, only their warnings.
    Their loggers are set after they are imported, since each sets its level when it configures itself."""
    import dspy  # noqa: F401  (configures its loggers)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("dspy").setLevel(logging.WARNING)


def console_main() -> None:
    """The ``teammed`` command: `main`, then exit without tearing down every imported module.

    Finalizing the interpreter after litellm and DSPy are loaded costs over a second of CPU
    for nothing; threads are joined and ``atexit`` handlers run exactly as on a normal exit
    (open files, logging, servers), then the process ends.
    """
    code = main()
    shutdown = getattr(threading, "_shutdown", None)  # what the interpreter itself runs first
    if shutdown is None:
        sys.exit(code)
    shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing left to say
            pass
    os._exit(code)


if __name__ == "__main__":
    console_main()
