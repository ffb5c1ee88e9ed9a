"""The ``compile`` and ``search`` commands: thin glue between the CLI and `teammed.optimizers`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from teammed.errors import TeammedError

if TYPE_CHECKING:
    from teammed.records import ResultRow

__all__ = ["compile_command", "search_command", "dataset_label"]


def dataset_label(dataset: str) -> str:
    """How results name a data set: a file's stem, or the benchmark's name (see `teammed.cli_data`)."""
    from teammed.cli_data import dataset_name

    return dataset_name(dataset)


def _labeled(questions: list, what: str) -> list:
    labeled = [q for q in questions if q.answer_idx is not None]
    if len(labeled) < len(questions):
        print(f"{what}: left out {len(questions) - len(labeled)} unlabeled questions (tuning needs gold answers)",
              file=sys.stderr)
    return labeled


def _all_failed(rows: Sequence[ResultRow]) -> str | None:
    """The first error when every row failed (an evaluation that measured nothing), else None."""
    if rows and all(r.failed for r in rows):  # a fatal error's message ends with its fix
        return f"all {len(rows)} questions failed (first: {rows[0].error})"
    return None


def compile_command(args: argparse.Namespace, *, config_from_args: Callable[..., Any],
                    deployments: Callable[[argparse.Namespace], Any]) -> int:
    import contextlib

    from teammed.backends.resolve import describe
    from teammed.cli_backend import extra_lm
    from teammed.cli_data import load_for, tuning_record
    from teammed.optimizers import compile_program, evaluate, examples_from_questions, save_program, split_questions

    choice = load_for(args, purpose="tune")
    questions = _labeled(choice.questions, "compile")
    train, val, test = split_questions(questions, train=args.train, val=args.val, test=args.test, seed=args.seed)
    config = config_from_args(args) if args.system == "teamwork" else None
    if args.system == "teamwork":
        from teammed.programs.teamwork import TeamworkProgram

        student = TeamworkProgram(config)
    else:
        from teammed.programs.peers import build_system

        student = build_system(args.system)
    if args.optimizer == "labeled":  # refused before any LM call when it would change nothing
        from teammed.optimizers.compile import check_labeled_useful

        check_labeled_useful(student, examples_from_questions(train))
    print(f"compile: {len(train)} train + {len(val)} val + {len(test)} held-out questions from "
          f"{choice.name} ({choice.split})", file=sys.stderr)
    from teammed.progress import CallProgress

    with deployments(args) as opened, contextlib.ExitStack() as extras, \
            CallProgress("compile: held-out accuracy before", stream=sys.stderr) as bar:
        lm = opened[0].lm  # teacher/reflection: the same backend options and shutdown as --model
        teacher = extra_lm(args, args.teacher_model, stack=extras) if args.teacher_model else None
        reflection = (extra_lm(args, args.reflection_model, stack=extras, max_tokens=2048)
                      if args.reflection_model else None)
        if args.optimizer == "gepa" and reflection is None:
            reflection = lm
        threads = args.concurrency  # questions in flight; the backend bounds requests in flight
        before, before_rows = evaluate(student, test, lm, num_threads=threads)
        failed = _all_failed(before_rows)
        if failed:
            print(f"teammed: error: the evaluation before compiling failed: {failed}; nothing was saved",
                  file=sys.stderr)
            return 1
        bar.display.line(f"held-out accuracy before: {before:.1%} on {len(test)} questions")
        bar.set_label(f"compile: {args.optimizer} on {len(train)} training questions")
        with bar.relaying_output():  # DSPy's prints as lines of ours; its progress bars dropped
            compiled = compile_program(student, optimizer=args.optimizer, trainset=examples_from_questions(train),
                                       valset=examples_from_questions(val), lm=lm, teacher_lm=teacher,
                                       reflection_lm=reflection, seed=args.seed, num_threads=threads)
        bar.set_label("compile: held-out accuracy after")
        after, after_rows = evaluate(compiled, test, lm, num_threads=threads)
        failed = _all_failed(after_rows)
        if failed:
            print(f"teammed: error: the evaluation of the compiled program failed: {failed}; nothing was saved",
                  file=sys.stderr)
            return 1
        model = describe(opened[0].spec)
    path = save_program(compiled, args.out, system=args.system, config=config,
                        meta={"optimizer": args.optimizer, "dataset": choice.name, "dataset_sha256": choice.sha256,
                              "split": choice.split, "model": model,
                              "train": len(train), "val": len(val), "test": len(test), "seed": args.seed,
                              "accuracy_before": before, "accuracy_after": after,
                              "n_failed_before": sum(r.failed for r in before_rows),
                              "n_failed_after": sum(r.failed for r in after_rows),
                              "tuned_on": tuning_record(choice, [*train, *val]),
                              "held_out_ids": [q.id for q in test]})
    print(f"{args.optimizer}: held-out accuracy {before:.1%} -> {after:.1%} ({len(test)} questions)")
    print(f"compiled program: {path}")
    return 0


def search_command(args: argparse.Namespace, *, deployments: Callable[[argparse.Namespace], Any]) -> int:
    from teammed.cli_data import load_for, tuning_record
    from teammed.data import sample_questions
    from teammed.optimizers import open_study, search_report, search_special_set, write_special_set
    from teammed.optimizers.search import SearchAborted
    from teammed.optimizers.special_set import NoTrialSucceeded

    choice = load_for(args, purpose="tune")
    questions = sample_questions(_labeled(choice.questions, "search"), n=args.n, seed=args.seed)
    if not questions:
        raise TeammedError(f"{args.dataset} has no labeled questions in {choice.split} to search on; "
                           f"pass another --split")
    study_name = args.study or f"teammed-{choice.key}"
    work_dir = args.out / f"{choice.key}_study"
    print(f"search: {len(questions)} questions from {choice.name} ({choice.split}); study {study_name}",
          file=sys.stderr)
    from teammed.progress import CallProgress, format_duration

    try:
        with deployments(args) as opened, CallProgress(f"search: {args.trials} trials on {len(questions)} questions",
                                                       stream=sys.stderr) as bar:
            def on_trial(k: int, n: int, eta_s: float | None) -> None:  # a line per trial on stderr
                bar.set_label(f"search: trial {k}/{n} done on {len(questions)} questions | ETA "
                              f"{format_duration(eta_s) if k < n else '00:00'}")

            result = search_special_set(
                questions=questions, lm=opened[0].lm, trials=args.trials, storage=args.storage,
                study_name=study_name, objectives=args.objectives, sampler=args.sampler, seed=args.seed,
                batch_size=args.batch_size, out_dir=work_dir, dataset=choice.name,
                search_turns=args.search_turns, search_agents=args.search_agents,
                search_early_consensus=args.search_early_consensus, num_threads=args.concurrency,
                tuning=tuning_record(choice, questions), on_trial=on_trial,
            )
    except (SearchAborted, NoTrialSucceeded) as exc:
        print(f"teammed: error: {exc}", file=sys.stderr)
        return 1
    if result.trials["running"]:  # the worker that finishes last writes the Special Set, once
        print(f"search: this worker is done; other workers are still evaluating {result.trials['running']} "
              f"configuration(s) of study {study_name}, and the last of them writes the Special Set",
              file=sys.stderr)
        return 0
    path = write_special_set(result, args.out / f"{choice.key}.json")
    report = search_report(open_study(storage=args.storage, study_name=study_name, out_dir=work_dir), work_dir)
    dev = result.dev
    # stdout: one JSON document with --json (the human lines go to stderr), else the human lines
    human = sys.stderr if getattr(args, "json", False) else sys.stdout
    accuracy, se = dev.get("accuracy"), dev.get("se")
    score = f"{accuracy:.1%}" + (f" ± {se:.1%}" if se is not None else "") if accuracy is not None else "n/a"
    counts = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in result.trials.items())
    print(f"special set: {', '.join(result.components) or 'none (base)'} | dev accuracy {score} | "
          f"trials: {counts}", file=human)
    if result.runner_up is not None:
        from teammed.optimizers.report import noise_text

        print(noise_text(result.runner_up).replace("**", ""), file=human)
    print(f"special set: {path}\nsearch report: {report}", file=human)
    if getattr(args, "json", False):
        print(json.dumps({"special_set": result.components, "dev_accuracy": accuracy, "se": se,
                          "runner_up": result.runner_up,
                          "trials": result.trials, "special_set_path": str(path), "report": str(report)},
                         indent=2))
    return 0
