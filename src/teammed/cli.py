"""The ``teammed`` command: ask, run, report, compile, search."""

from __future__ import annotations

import argparse
import atexit
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from teammed.config import PRESETS, TeamworkConfig, config_from_components, preset
from teammed.errors import TeammedError

__all__ = ["main", "build_parser"]

log = logging.getLogger("teammed")


# ---------------------------------------------------------------- shared flags
def _add_config_flags(p: argparse.ArgumentParser, *, many: bool = False) -> None:
    g = p.add_argument_group("teamwork configuration")
    if many:
        g.add_argument("--presets", help=f"comma-separated presets to run as a grid ({', '.join(PRESETS)})")
    g.add_argument("--preset", help=f"a named configuration: {', '.join(PRESETS)} (default: base)")
    g.add_argument("--components", help="exactly these components: smm,leadership,team_orientation,trust,mm,cl")
    g.add_argument("--config", type=Path, help="a TeamworkConfig JSON or a special_sets/<dataset>.json file")
    g.add_argument("--n-agents", choices=["auto", "2", "3", "4"], help="team size (default: auto)")
    g.add_argument("--n-turns", type=int, help="discussion turns (default: 2)")
    g.add_argument("--early-consensus", type=float, help="skip discussion when this share of first choices agree")
    g.add_argument("--system", default="teamwork", help="teamwork (default) or a peer system: zero_shot, few_shot, "
                   "cot, mdagents, kamac, consultation, majority_vote, consensus")
    g.add_argument("--program", type=Path, help="a compiled program written by `teammed compile`")


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("backend")
    g.add_argument("--model", action="append", help="litellm model string, `local` (default) or local:PATH.gguf; "
                   "repeat for several deployments (questions are assigned round-robin)")
    g.add_argument("--api-base", help="base URL of an OpenAI-compatible server (with --model openai/<alias>)")
    g.add_argument("--concurrency", type=int, default=4, help="questions in flight (default 4)")
    g.add_argument("--parallel-requests", type=int, help="requests in flight per deployment "
                   "(default: 4 x --concurrency; local: 1)")
    g.add_argument("--timeout", type=float, default=180.0, help="seconds per LM request")
    g.add_argument("--max-tokens", type=int, default=512, help="completion token limit per call")
    g.add_argument("--retry-attempts", type=int, default=6)
    g.add_argument("--retry-base", type=float, default=60.0, help="first backoff in seconds (doubles, jittered)")
    g.add_argument("--retry-cap", type=float, default=300.0, help="longest backoff in seconds")
    g.add_argument("--no-cache", action="store_true", help="do not read or write the response cache")
    g.add_argument("--cache-dir", type=Path, help="response cache directory (default ~/.cache/teammed/responses)")


def _config_from_args(args: argparse.Namespace, preset_name: str | None = None) -> TeamworkConfig:
    overrides: dict[str, Any] = {
        "n_agents": args.n_agents if args.n_agents in (None, "auto") else int(args.n_agents),
        "n_turns": args.n_turns,
        "early_consensus": args.early_consensus,
    }
    chosen = [x for x in (preset_name or args.preset, args.components, args.config) if x]
    if len(chosen) > 1:
        raise TeammedError("give only one of --preset/--presets, --components and --config")
    if args.components:
        return config_from_components(args.components, **overrides)
    if args.config:
        from teammed.optimizers import load_special_set

        base = load_special_set(args.config)
        values = base.model_dump()
        values.update({k: v for k, v in overrides.items() if v is not None})
        return TeamworkConfig.build(**values)
    return preset(preset_name or args.preset or "base", **overrides)


def _deployments(args: argparse.Namespace):
    from teammed.backends.cache import ResponseCache
    from teammed.backends.resolve import open_deployments
    from teammed.backends.retry import RetryPolicy

    retry = RetryPolicy(attempts=args.retry_attempts, base_s=args.retry_base, cap_s=args.retry_cap)
    cache = None if args.no_cache else ResponseCache(args.cache_dir)
    for flag in ("concurrency", "parallel_requests"):
        value = getattr(args, flag, None)
        if value is not None and value < 1:
            raise TeammedError(f"--{flag.replace('_', '-')} must be at least 1 (got {value})")
    requests = getattr(args, "parallel_requests", None) or 4 * args.concurrency
    return open_deployments(args.model or ["local"], api_base=args.api_base, concurrency=requests,
                            retry=retry, cache=cache, timeout_s=args.timeout, max_tokens=args.max_tokens)


def _program_factory(args: argparse.Namespace, config: TeamworkConfig | None, *, pool: list | None = None,
                     seed: int = 0, vision: bool = False):
    """How to build the system; ``pool`` holds the questions few-shot examples may be drawn from."""
    system = args.system
    if args.program:
        from teammed.optimizers.saved import load_program

        explicit = config if (args.preset or args.components or args.config or args.n_agents or args.n_turns) else None
        program, _ = load_program(args.program, system=system, config=explicit)
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
def cmd_ask(args: argparse.Namespace) -> int:
    import dspy

    from teammed import usage
    from teammed.adapter import SchemaAdapter
    from teammed.render import render_transcript

    options: dict[str, str] = {}
    for item in args.option or []:
        letter, sep, text = item.partition("=")
        if not sep or not text.strip():
            raise TeammedError(f"--option takes LETTER=TEXT (got {item!r})")
        options[letter.strip().upper()] = text.strip()
    from teammed.types import Question

    question = Question(id="ask", question=args.question, options=options)
    config = _config_from_args(args) if args.system == "teamwork" else None
    factory = _program_factory(args, config)
    with _deployments(args) as deployments:
        with dspy.context(lm=deployments[0].lm, adapter=SchemaAdapter(), disable_history=True), \
                usage.track() as used:
            prediction = factory()(question=question.question, options=options)
    print(render_transcript(prediction))
    print(f"\nAnswer: {prediction.answer}) {options[prediction.answer]}  (confidence {prediction.confidence})")
    print(f"\nRationale:\n{prediction.rationale}")
    print(f"\n[{used.calls} LM calls, {used.prompt_tokens}+{used.completion_tokens} tokens, "
          f"{used.latency_s:.1f}s in the LM]")
    return 0


# ---------------------------------------------------------------- run
def _progress(stats: dict[str, Any]) -> None:
    seconds = stats["eta_s"]
    eta = time.strftime("%M:%S", time.gmtime(seconds)) if seconds < 3600 else f"{seconds / 3600:.1f}h"
    print(f"  {stats['done']}/{stats['total']} questions | accuracy {stats['accuracy']:.1%} | "
          f"{stats['calls']} calls | {stats['failed']} failed | ETA {eta}", file=sys.stderr, flush=True)


def _require_vision(questions: list, deployments: list) -> None:
    """Image questions need a vision model: say so before spending anything."""
    if not any(q.image for q in questions):
        return
    import litellm

    for d in deployments:
        model = getattr(d.lm, "model", "")
        try:
            vision = bool(litellm.supports_vision(model=model)) and not d.spec.startswith(("local", "scripted"))
        except Exception:  # unknown to litellm's model map
            vision = False
        if not vision:
            raise TeammedError(
                f"these questions carry images, but {d.spec} is a text-only model; use a vision model "
                f"(e.g. --model openai/gpt-4o); the teamwork program shows the image to every clinician in round 2"
            )


def cmd_run(args: argparse.Namespace) -> int:
    from teammed.backends.resolve import describe
    from teammed.cli_optimize import dataset_label
    from teammed.data import load_dataset, sample_questions
    from teammed.runner import RunSettings, run_questions

    questions = load_dataset(args.dataset, data_dir=args.data_dir, split=args.split)
    seeds = [int(s) for s in str(args.seeds).split(",")] if args.seeds else [args.seed]
    labels = [p.strip() for p in args.presets.split(",")] if args.presets else [None]
    grid = len(seeds) > 1 or len(labels) > 1
    if args.resume and not args.out:
        raise TeammedError("--resume needs the --out directory of the run to continue")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    dataset_name = dataset_label(args.dataset)
    summaries = []
    with _deployments(args) as deployments:
        model = "+".join(describe(d.spec) for d in deployments)
        for label_name in labels:
            config = _config_from_args(args, label_name) if args.system == "teamwork" else None
            if args.program and not (args.preset or args.presets or args.components or args.config):
                saved = json.loads(Path(args.program).read_text()).get("config")
                config = TeamworkConfig(**saved) if saved else None
            label = label_name or (config.label() if config else args.system)
            for seed in seeds:
                sample = sample_questions(questions, n=args.n, seed=seed, stratify_by=args.stratify,
                                          shuffle_options=args.shuffle_options)
                _require_vision(sample, deployments)
                out = Path(args.out) if args.out else Path("runs") / f"{stamp}-{dataset_name}"
                if grid or not args.out:
                    out = out / f"{label}" / f"seed{seed}"
                settings = RunSettings(out_dir=out, system=args.system, label=label,
                                       config=config.model_dump() if config else None, dataset=dataset_name,
                                       seed=seed, model=model, resume=args.resume)
                print(f"{label} | {dataset_name} | seed {seed} | {len(sample)} questions | {model} -> {out}",
                      file=sys.stderr)
                chosen = {q.id for q in sample}  # few-shot examples never include the test questions
                pool = [q for q in questions if q.id not in chosen]
                factory = _program_factory(args, config, pool=pool, seed=seed, vision=any(q.image for q in sample))
                summary = run_questions(sample, program_factory=factory,
                                        deployments=deployments, settings=settings, progress=_progress,
                                        questions_in_flight=args.concurrency,
                                        extra_meta={"sampling": {"n": args.n, "seed": seed, "stratify": args.stratify,
                                                                 "shuffle_options": args.shuffle_options},
                                                    "command": sys.argv})
                summaries.append((out, summary))
    for out, s in summaries:
        print(f"\n{s['label']} seed {s['seed']}: accuracy {s['accuracy']:.1%} on {s['n']} questions "
              f"({s['n_failed']} failed) | {s['calls_per_question']:.1f} calls, "
              f"{s['prompt_tokens_per_question']:.0f}+{s['completion_tokens_per_question']:.0f} tokens, "
              f"{s['latency_s_per_question']:.1f}s per question | cache hits {s['cache_hits']} | "
              f"parse fallbacks {s['parse_failures']} failed + {s['repaired']} repaired of {s['calls']} calls")
        print(f"  results: {out / 'results.jsonl'}\n  summary: {out / 'summary.json'}")
    return 0


# ---------------------------------------------------------------- report
def cmd_report(args: argparse.Namespace) -> int:
    from teammed.evals import build_report

    run_dirs = []
    for d in args.dirs:
        found = sorted(p.parent for p in Path(d).rglob("results.jsonl"))
        if not found:
            raise TeammedError(f"no results.jsonl under {d}")
        run_dirs.extend(found)
    path = build_report(run_dirs, Path(args.out), baseline=args.baseline)
    print(f"report: {path}")
    return 0


# ---------------------------------------------------------------- compile / search
def cmd_compile(args: argparse.Namespace) -> int:
    from teammed.cli_optimize import compile_command

    return compile_command(args, config_from_args=_config_from_args, deployments=_deployments)


def cmd_search(args: argparse.Namespace) -> int:
    from teammed.cli_optimize import search_command

    return search_command(args, deployments=_deployments)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="teammed", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the library does")
    sub = parser.add_subparsers(dest="command", required=True)

    ask = sub.add_parser("ask", help="deliberate over one question and show the transcript")
    ask.add_argument("question")
    ask.add_argument("--option", action="append", help='an answer option, LETTER="text" (repeat)')
    _add_config_flags(ask)
    _add_model_flags(ask)
    ask.set_defaults(func=cmd_ask)

    run = sub.add_parser("run", help="run a system over a data set; write results.jsonl and summary.json")
    run.add_argument("--dataset", required=True, help="a benchmark name (demo, medqa, ...) or a JSONL/CSV file")
    run.add_argument("--data-dir", type=Path, help="where local copies of benchmarks live")
    run.add_argument("--split", help="data split (default: the benchmark's test split)")
    run.add_argument("--n", type=int, help="questions to sample (default: all)")
    run.add_argument("--seed", type=int, default=111, help="sampling seed (papers: 111, 222, 333)")
    run.add_argument("--seeds", help="comma-separated seeds: run each (a grid with --presets)")
    run.add_argument("--stratify", help="a meta field to stratify the sample by")
    run.add_argument("--shuffle-options", action="store_true", help="shuffle option order (seeded)")
    run.add_argument("--out", help="run directory (default: runs/<time>-<dataset>/<label>/seed<seed>)")
    run.add_argument("--resume", action="store_true", help="continue the run in --out, skipping finished questions")
    _add_config_flags(run, many=True)
    _add_model_flags(run)
    run.set_defaults(func=cmd_run)

    report = sub.add_parser("report", help="tables, significance tests and plots over run directories")
    report.add_argument("dirs", nargs="+", help="run directories (searched recursively for results.jsonl)")
    report.add_argument("--out", default="report", help="report directory")
    report.add_argument("--baseline", help="label to test every other configuration against (default: base)")
    report.set_defaults(func=cmd_report)

    comp = sub.add_parser("compile", help="optimize the prompts of a system with a DSPy optimizer")
    comp.add_argument("--dataset", required=True)
    comp.add_argument("--data-dir", type=Path)
    comp.add_argument("--optimizer", required=True, choices=["labeled", "bootstrap", "random-search", "mipro", "gepa"])
    comp.add_argument("--train", type=int, default=20)
    comp.add_argument("--val", type=int, default=10)
    comp.add_argument("--test", type=int, default=10, help="held-out questions for before/after accuracy")
    comp.add_argument("--seed", type=int, default=111)
    comp.add_argument("--teacher-model", help="litellm model for bootstrapping demonstrations")
    comp.add_argument("--reflection-model", help="litellm model for GEPA's reflection")
    comp.add_argument("--out", required=True, type=Path, help="where to write the compiled program (JSON)")
    _add_config_flags(comp)
    _add_model_flags(comp)
    comp.set_defaults(func=cmd_compile)

    search = sub.add_parser("search", help="search component subsets with Optuna; write the Special Set")
    search.add_argument("--dataset", required=True)
    search.add_argument("--data-dir", type=Path)
    search.add_argument("--n", type=int, default=20, help="dev questions per trial")
    search.add_argument("--trials", type=int, default=10)
    search.add_argument("--storage", help="sqlite:///file.db, a .log journal file, or postgresql://...")
    search.add_argument("--study", help="study name (default: teammed-<dataset>)")
    search.add_argument("--objectives", default="accuracy", choices=["accuracy", "accuracy,tokens"])
    search.add_argument("--sampler", default="tpe", choices=["tpe", "grid", "brute"])
    search.add_argument("--seed", type=int, default=111)
    search.add_argument("--batch-size", type=int, default=5, help="questions per pruning step")
    search.add_argument("--search-turns", action="store_true", help="also search n_turns in {2, 3}")
    search.add_argument("--search-agents", action="store_true", help="also search n_agents")
    search.add_argument("--search-early-consensus", action="store_true")
    search.add_argument("--out", type=Path, default=Path("special_sets"), help="directory of <dataset>.json")
    _add_model_flags(search)
    search.set_defaults(func=cmd_search)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    # litellm logs every request at INFO; keep our own INFO (-v) readable
    logging.getLogger("LiteLLM").setLevel(logging.WARNING if args.verbose else logging.ERROR)
    try:
        return int(args.func(args) or 0)
    except TeammedError as exc:
        print(f"teammed: error: {exc}", file=sys.stderr)
        return 2
    except FileExistsError as exc:
        print(f"teammed: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("teammed: interrupted; finished questions are saved (use --resume)", file=sys.stderr)
        return 130


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
