"""The ``teammed`` command: ask, run, report, compile, search, tune, reproduce, cache.

Each command parses its flags into a spec of `teammed.experiments`, calls the one function that
does the work, and prints its typed result; progress events render through
`teammed.progress.EventDisplay`. No experiment logic lives here."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import logging
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from teammed.cli_args import (
    OneLineParser,
    describe_os_error,
    model_spec,
    non_negative_int,
    parse_options,
    positive_int,
    preset_list,
    printable,
    report_error,
    seed_list,
    shard_spec,
    storage_url,
    system_name,
)
from teammed.cli_backend import add_model_flags
from teammed.components import PRESET_COMPONENTS, TABLE
from teammed.errors import BackendError, FatalBackendError, TeammedError, WorkFailed
from teammed.messages import storage_message, value_message
from teammed.systems import BUILTIN

__all__ = ["main", "build_parser", "spec_of"]

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
    g.add_argument("--components", help="exactly these components (name or short name): "
                   + ", ".join(f"{c.name} ({'/'.join(c.aliases)})" for c in TABLE))
    g.add_argument("--config", type=Path, help='a TeamworkConfig JSON (e.g. {"leadership": true, "trust": true}) '
                   "or a special_sets/<dataset>.json file written by `teammed search`")
    g.add_argument("--n-agents", choices=["auto", "2", "3", "4"], help="team size (default: auto)")
    g.add_argument("--n-turns", type=positive_int, help="discussion turns, 1-5 (default: 2)")
    g.add_argument("--early-consensus", type=float, help="skip discussion when this share of first choices agree, "
                   "in (0.5, 1.0] (default: off)")
    g.add_argument("--no-leader-correction", dest="leader_correction", action="store_const", const=False,
                   help="with leadership: do not let the leader override the aggregated answer (default: it may)")
    g.add_argument("--system", type=system_name, default="teamwork",
                   help="teamwork (default), a peer system (" + ", ".join(s.name for s in BUILTIN[1:])
                   + ") or one an installed package registers (hyphens allowed: zero-shot)")
    g.add_argument("--escalate-below", type=float, help="adaptive: call the team when the single agent's signal "
                   "(High 1, Medium 0.5, Low 0) is below this (default: 1.0, all but High)")
    g.add_argument("--program", type=Path, help="a compiled program written by `teammed compile`")


def _add_data_flags(p: argparse.ArgumentParser, split_help: str | None) -> None:
    p.add_argument("--dataset", required=True, help="a benchmark name (demo, medqa, ...), a data file (.jsonl, .json, "
                   ".csv, .parquet, .arrow) or a Hugging Face directory (save_to_disk, hub copy)")
    p.add_argument("--data-dir", type=Path, help="where local copies of benchmarks live")
    p.add_argument("--dataset-name", help="the name results, studies and files give this data set (default: the "
                   "registry name or the file's stem; its content hash is recorded too)")
    if split_help:
        p.add_argument("--split", help=split_help)
    p.add_argument("--revision", help="pin the Hugging Face hub revision (tag, branch or commit) of --dataset")


# ---------------------------------------------------------------- flags -> specs
def _spec(cls: Any, args: argparse.Namespace, **given: Any) -> Any:
    """``cls`` from the flags named like its fields (a flag left unset keeps the spec's default)."""
    values = {k: getattr(args, k) for k in cls.model_fields if getattr(args, k, None) is not None}
    return cls(**{**values, **given})


def _parts(args: argparse.Namespace) -> dict[str, Any]:
    """The data, team and backend parts of a spec, from the shared flags."""
    from teammed.experiments import BackendSpec, DataSpec, TeamSpec

    parts: dict[str, Any] = {}
    if hasattr(args, "no_cache"):
        parts["backend"] = _spec(BackendSpec, args, cache=not args.no_cache)
    if hasattr(args, "system"):
        parts["team"] = _spec(TeamSpec, args)
    if getattr(args, "dataset", None):
        parts["data"] = _spec(DataSpec, args)
    return parts


def _display() -> Any:
    from teammed.progress import EventDisplay

    return EventDisplay(sys.stderr)


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def _emit(args: argparse.Namespace, result: Any) -> None:
    """A result on stdout: one JSON document with --json (the human lines on stderr), else the lines."""
    print(printable(result.text()), file=sys.stderr if getattr(args, "json", False) else sys.stdout)
    if getattr(args, "json", False):
        print(json.dumps(result.to_json(), indent=2, default=str))


def _dry_run(args: argparse.Namespace) -> int:
    """``--dry-run``: what the command would spend, and no request sent (but the ``--pilot``'s questions)."""
    from teammed.experiments import plan
    from teammed.progress import quiet_libraries

    if args.command == "tune" and not args.verbose:  # the offline tune's own notices are not this command's
        logging.getLogger("teammed.optimizers.tune").setLevel(logging.ERROR)
    with quiet_libraries():
        priced = plan(spec_of(args), pilot=args.pilot)
    _emit(args, priced)
    return 0


# ---------------------------------------------------------------- commands
def spec_of(args: argparse.Namespace) -> Any:
    """The `teammed.experiments` spec a parsed command line stands for (what the command runs)."""
    from teammed import experiments as ex

    parts = _parts(args)
    if args.command == "ask":
        if args.dataset is None and (args.question_id or args.split or args.data_dir):
            raise TeammedError("--id, --split and --data-dir pick a question of a data set: give --dataset too")
        return _spec(ex.AskSpec, args, **parts, options=parse_options(args.option) if args.option else None)
    if args.command == "report":
        return _spec(ex.ReportSpec, args, dirs=tuple(args.dirs))
    if args.command == "reproduce":
        return _spec(ex.ReproduceSpec, args, **parts, seeds=tuple(args.seeds),
                     datasets=args.datasets and tuple(c.strip() for c in args.datasets.split(",") if c.strip()),
                     rows=args.rows and tuple(r.strip() for r in args.rows.split(";")))
    kinds = {"run": ex.RunSpec, "compile": ex.CompileSpec, "search": ex.SearchSpec, "tune": ex.TuneSpec}
    return _spec(kinds[args.command], args, **parts)


def cmd_ask(args: argparse.Namespace) -> int:
    from teammed.experiments import ask
    from teammed.progress import CallProgress

    result = ask(spec_of(args), progress=CallProgress(f"ask ({args.system})", stream=sys.stderr, phase_lines=True))
    print(printable(result.text(replayed=args.dataset)))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from teammed.experiments import run

    with _display() as display:
        result = run(spec_of(args), progress=display)
    _emit(args, result)
    for warning in result.warnings():
        _say(f"  {warning}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from teammed.experiments import report

    result = report(spec_of(args))
    if result.note:
        _say(f"teammed: {result.note}")
    print(result.text())
    return 0


def cmd_compile(args: argparse.Namespace) -> int:
    from teammed.experiments import compile_program

    with _display() as display:
        result = compile_program(spec_of(args), progress=display, relay=lambda: display.relaying_output("dspy: "))
    _emit(args, result)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from teammed.experiments import search

    with _display() as display:
        result = search(spec_of(args), progress=display)
    if result.path is None:  # other workers are still at it: the last one writes the Special Set
        _say(result.text())
        return 0
    _emit(args, result)
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from teammed.experiments import tune
    from teammed.progress import quiet_libraries

    with _display() as display, quiet_libraries():
        result = tune(spec_of(args), progress=display, say=_say)
    if not result.done:  # no Special Set: a script must not take this for a finished tune
        _say(result.stopped_text())
    _emit(args, result)
    return 0 if result.done else 1


def cmd_reproduce(args: argparse.Namespace) -> int:
    from teammed.experiments import reproduce
    from teammed.progress import quiet_libraries

    with _display() as display, quiet_libraries():
        result = reproduce(spec_of(args), progress=display, say=_say)
    _emit(args, result)
    failure = result.failure()
    if failure:  # a table of 0% cells measured nothing: say so in the exit status
        report_error(failure)
        return 1
    return 0


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
    add_model_flags(ask)
    ask.set_defaults(func=cmd_ask)

    run = sub.add_parser("run", help="run a system over a data set; write results.jsonl and summary.json")
    _add_data_flags(run, SPLIT_HELP_EVAL)
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
    add_model_flags(run)
    run.set_defaults(func=cmd_run)

    report = sub.add_parser("report", help="tables, significance tests and plots over run directories")
    report.add_argument("dirs", nargs="+", help="run directories (searched recursively for results.jsonl)")
    report.add_argument("--out", default="report", help="report directory (default: report)")
    report.add_argument("--baseline", help="label to test every other configuration against (default: base, "
                        "when a run is labelled base)")
    report.add_argument("--compare", nargs="?", const=True, default=False, metavar="METHOD_OR_FILE",
                        help="alone: the runs hold two configurations of one data set, and the second is compared "
                             "with the first question by question (fixed, broken, McNemar) in the report and in "
                             "compare.html; with a published method (and --published) or a published file: the "
                             "runs' one configuration against it, the same way")
    report.add_argument("--published", metavar="DIR",
                        help="MedAgentsBench's output/ folder: set its published methods beside the runs, on the "
                             "questions they answered, with paired tests and an accuracy x tokens plot")
    report.add_argument("--model", help="with --published: whose published outputs (e.g. gpt-4o; default: the "
                                        "runs' model, or the folder's only one)")
    report.add_argument("--published-split", help="with --published: the published split (default: the runs')")
    report.set_defaults(func=cmd_report)

    comp = sub.add_parser("compile", help="optimize the prompts of a system with a DSPy optimizer")
    _add_data_flags(comp, SPLIT_HELP_TUNE)
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
    add_model_flags(comp)
    comp.set_defaults(func=cmd_compile)

    search = sub.add_parser("search", help="search component subsets with Optuna; write the Special Set")
    _add_data_flags(search, SPLIT_HELP_TUNE)
    search.add_argument("--n", type=positive_int, default=20, help="dev questions per trial (default: 20)")
    search.add_argument("--trials", type=positive_int, default=10, help="Optuna trials (default: 10)")
    search.add_argument("--storage", type=storage_url,
                        help="sqlite:///file.db, a .log journal file, or postgresql://... "
                        "(default: sqlite <out>/<dataset name>-<hash8>_study/study.db)")
    search.add_argument("--study", help="study name (default: teammed-<dataset name>-<hash8>, hash8: the first 8 "
                        "hex digits of the data set's content hash)")
    search.add_argument("--objectives", default="accuracy", choices=["accuracy", "accuracy,tokens"],
                        metavar="{accuracy | accuracy,tokens}",
                        help="what to maximise: accuracy, or accuracy and tokens per question together (a Pareto "
                             "front); default: accuracy")
    search.add_argument("--sampler", default="tpe", choices=["tpe", "grid", "brute"],
                        help="Optuna sampler (default: tpe)")
    search.add_argument("--seed", type=int, default=111, help="sampling and sampler seed (default: 111)")
    search.add_argument("--batch-size", type=positive_int, default=5,
                        help="questions per pruning step (default: 5)")
    search.add_argument("--search-turns", action="store_true", help="also search n_turns in {2, 3}")
    search.add_argument("--search-agents", action="store_true", help="also search n_agents")
    search.add_argument("--adaptive", action="store_true", help="then tune the adaptive system over the Special Set "
                        "(a front on the tuning questions, proven on --n-eval held-out ones)")
    search.add_argument("--max-cost-ratio", type=float, help="--adaptive: the most accurate point at most this share "
                        "of the Special Set's tokens (default: the cheapest within 1 point of it)")
    search.add_argument("--n-eval", type=positive_int, default=100,
                        help="--adaptive: held-out questions (default: 100)")
    search.add_argument("--search-early-consensus", action="store_true",
                        help="also search the early-consensus threshold")
    search.add_argument("--out", type=Path, default=Path("special_sets"),
                        help="directory of the Special Set <dataset name>-<hash8>.json and its study "
                        "(default: special_sets)")
    search.add_argument("--json", action="store_true", help="print the result as one JSON document on stdout "
                        "(everything else on stderr)")
    add_model_flags(search)
    search.set_defaults(func=cmd_search)
    from teammed.cli_cache import add_cache_command
    from teammed.cli_tune import add_parsers as add_tune_parsers  # tune, reproduce

    add_cache_command(sub)
    add_tune_parsers(sub, model_flags=add_model_flags, data_flags=_add_data_flags, commands=(cmd_tune, cmd_reproduce))
    for name in ("run", "compile", "search", "tune", "reproduce"):
        sub.choices[name].add_argument("--dry-run", action="store_true", help="print the calls, prompt and "
                                       "completion tokens and $ the command would spend, estimated from its real "
                                       "prompts; send no request")
        sub.choices[name].add_argument("--pilot", type=positive_int, metavar="K",
                                       help="with --dry-run: first run K questions "
                                       "of each part for real (billed; their answers stay in the response cache for "
                                       "the real run) and price the rest from the answer lengths and paths measured")
    for name in ("run", "compile"):
        sub.choices[name].add_argument("--json", action="store_true", help="print the result (with --dry-run: the "
                                       "estimate) as one JSON document on stdout (everything else on stderr)")
    return parser


def _fail(message: object, code: int, *, verbose: bool, exiting: bool) -> int:
    from teammed.redact import redact

    report_error(redact(message))
    if verbose:
        traceback.print_exc()
    elif exiting:  # the process ends: threads winding down must not bury the one line under warnings
        logging.disable(logging.CRITICAL)
    return code


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
    with contextlib.suppress(AttributeError, OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return code


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The parsed command line; --help, --version and a usage error exit here, stdout flushed first."""
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if getattr(args, "pilot", None) is not None and not args.dry_run:
            parser.error("--pilot prices the command before it runs: add --dry-run (the pilot's questions are "
                         "billed, and their answers stay in the response cache for the real run)")
        return args
    except SystemExit as exc:  # --help, --version (0) or a usage error (2): printed, maybe into a closed pipe
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _closed_pipe()
        except (OSError, ValueError):
            pass
        raise exc from None


def _configure_logging(args: argparse.Namespace) -> None:
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    # litellm logs every request at INFO; keep our own INFO (-v) readable
    logging.getLogger("LiteLLM").setLevel(logging.WARNING if args.verbose else logging.ERROR)
    from teammed.redact import install_log_redaction

    install_log_redaction()  # no password inside a URL reaches stderr
    if args.command in ("compile", "search", "tune", "reproduce") and not args.verbose:
        _quiet_libraries()


def _stopped(args: argparse.Namespace, how: str, code: int) -> None:
    """Ctrl-C or SIGTERM: one line, then exit at once if a signal asked for it (rows are already on disk;
    third-party exit handlers, seconds in litellm, are skipped)."""
    from teammed.backends import resolve

    saved = "; finished questions are saved (use --resume)" if args.command == "run" else ""
    print(f"teammed: {how}{saved}", file=sys.stderr)
    if resolve.stopping():
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(code)


def _os_failure(exc: OSError, args: argparse.Namespace, *, verbose: bool, exiting: bool) -> int:
    """Unreadable input, unwritable --out, a full disk; a reader of stdout gone ends quietly."""
    if isinstance(exc, BrokenPipeError) and _stdout_gone():  # `teammed ... | head`: quiet, as a shell tool
        logging.disable(logging.CRITICAL)
        return _closed_pipe()
    out = getattr(args, "out", None)
    message, code = describe_os_error(exc, where=f"--out {out}" if out else None)
    return _fail(message, code, verbose=verbose, exiting=exiting)


def main(argv: list[str] | None = None) -> int:
    from teammed._litellm import for_the_command_line

    for_the_command_line()  # before anything imports litellm
    args = _parse_args(argv)
    _configure_logging(args)
    verbose = bool(args.verbose)
    exiting = argv is None
    command = _dry_run if getattr(args, "dry_run", False) else args.func  # every --dry-run: priced, not sent
    try:
        return int(command(args) or 0)
    except KeyboardInterrupt:
        _stopped(args, "interrupted", 130)
        return 130
    except SystemExit as exc:  # SIGTERM (see teammed.backends.resolve.shutdown_on_signals)
        if isinstance(exc.code, int) and exc.code > 128:
            _stopped(args, "terminated", exc.code)
        raise
    except Exception as exc:  # noqa: BLE001 - each kind has its exit code and one line
        return _failed(exc, args, verbose=verbose, exiting=exiting)


def _failed(exc: Exception, args: argparse.Namespace, *, verbose: bool, exiting: bool) -> int:
    """The exit code of a command that raised ``exc``, its one line printed (the traceback with -v for a bug)."""
    if isinstance(exc, WorkFailed):  # the work ran and failed: what finished is saved
        return _fail(exc, 1, verbose=verbose, exiting=exiting)
    if isinstance(exc, BackendError):  # refused before any call (a missing key): careless input, 2; a server's
        # refusal or failure while the command works (a 401, a dead server): 1 in every command, as `run` stopping
        up_front = isinstance(exc, FatalBackendError) and getattr(exc, "before_any_call", False)
        return _fail(exc, 2 if up_front else 1, verbose=verbose, exiting=exiting)
    if isinstance(exc, TeammedError):  # refused on purpose: the message names the value and the fix
        return _fail(exc, 2, verbose=verbose, exiting=exiting)
    if isinstance(exc, OSError):  # unreadable input, unwritable --out, a full disk
        return _os_failure(exc, args, verbose=verbose, exiting=exiting)
    if isinstance(exc, ValueError):  # a value from user input that a library refused
        return _fail(value_message(exc), 2, verbose=verbose, exiting=exiting)
    storage = None if verbose else storage_message(exc, getattr(args, "storage", None))
    if storage is not None:
        return _fail(storage, 1, verbose=verbose, exiting=exiting)
    if verbose:
        raise exc
    report_error(f"unexpected {type(exc).__name__}: {exc} (a bug; rerun with -v for the traceback and report it)")
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
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing left to say
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    console_main()
