"""The ``compile`` and ``search`` commands: thin glue between the CLI and `teammed.optimizers`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from teammed.errors import TeammedError

__all__ = ["compile_command", "search_command", "dataset_label"]


def dataset_label(dataset: str) -> str:
    """How results name a data set: a file's or directory's name, or the benchmark's name."""
    path = Path(dataset)
    return path.stem if path.suffix or path.is_dir() else dataset


def compile_command(args: argparse.Namespace, *, config_from_args: Callable[..., Any],
                    deployments: Callable[[argparse.Namespace], Any]) -> int:
    from teammed.backends.litellm_backend import LiteLLMBackend
    from teammed.backends.resolve import describe
    from teammed.data import load_dataset
    from teammed.optimizers import compile_program, evaluate, examples_from_questions, save_program, split_questions

    questions = load_dataset(args.dataset, data_dir=args.data_dir, revision=getattr(args, "revision", None))
    train, val, test = split_questions(questions, train=args.train, val=args.val, test=args.test, seed=args.seed)
    config = config_from_args(args) if args.system == "teamwork" else None
    if args.system == "teamwork":
        from teammed.programs.teamwork import TeamworkProgram

        student = TeamworkProgram(config)
    else:
        from teammed.programs.peers import build_system

        student = build_system(args.system)
    from teammed.progress import CallProgress

    with deployments(args) as opened, CallProgress("compile: held-out accuracy before", stream=sys.stderr) as bar:
        lm = opened[0].lm
        teacher = LiteLLMBackend(args.teacher_model) if args.teacher_model else None
        reflection = LiteLLMBackend(args.reflection_model, max_tokens=2048) if args.reflection_model else None
        if args.optimizer == "gepa" and reflection is None:
            reflection = lm
        threads = args.concurrency  # questions in flight; the backend bounds requests in flight
        before, _ = evaluate(student, examples_from_questions(test), lm, num_threads=threads)
        bar.display.line(f"held-out accuracy before: {before:.1%} on {len(test)} questions")
        bar.set_label(f"compile: {args.optimizer} on {len(train)} training questions")
        compiled = compile_program(student, optimizer=args.optimizer, trainset=examples_from_questions(train),
                                   valset=examples_from_questions(val), lm=lm, teacher_lm=teacher,
                                   reflection_lm=reflection, seed=args.seed, num_threads=threads)
        bar.set_label("compile: held-out accuracy after")
        after, _ = evaluate(compiled, examples_from_questions(test), lm, num_threads=threads)
        model = describe(opened[0].spec)
    path = save_program(compiled, args.out, system=args.system, config=config,
                        meta={"optimizer": args.optimizer, "dataset": dataset_label(args.dataset), "model": model,
                              "train": len(train), "val": len(val), "test": len(test), "seed": args.seed,
                              "accuracy_before": before, "accuracy_after": after})
    print(f"{args.optimizer}: held-out accuracy {before:.1%} -> {after:.1%} ({len(test)} questions)")
    print(f"compiled program: {path}")
    return 0


def search_command(args: argparse.Namespace, *, deployments: Callable[[argparse.Namespace], Any]) -> int:
    from teammed.data import load_dataset, sample_questions
    from teammed.optimizers import open_study, search_report, search_special_set, write_special_set

    dataset = dataset_label(args.dataset)
    questions = sample_questions(load_dataset(args.dataset, data_dir=args.data_dir), n=args.n, seed=args.seed)
    if not questions:
        raise TeammedError(f"{args.dataset} has no questions to search on")
    study_name = args.study or f"teammed-{dataset}"
    work_dir = args.out / f"{dataset}_study"
    from teammed.progress import CallProgress

    with deployments(args) as opened, CallProgress(f"search: {args.trials} trials on {len(questions)} questions",
                                                   stream=sys.stderr):
        result = search_special_set(
            questions=questions, lm=opened[0].lm, trials=args.trials, storage=args.storage, study_name=study_name,
            objectives=args.objectives, sampler=args.sampler, seed=args.seed, batch_size=args.batch_size,
            out_dir=work_dir, dataset=dataset, search_turns=args.search_turns, search_agents=args.search_agents,
            search_early_consensus=args.search_early_consensus, num_threads=args.concurrency,
        )
    path = write_special_set(result, args.out / f"{dataset}.json")
    report = search_report(open_study(storage=args.storage, study_name=study_name, out_dir=work_dir), work_dir)
    dev = result.dev
    print(json.dumps({"special_set": result.components, "dev_accuracy": dev.get("accuracy"), "se": dev.get("se"),
                      "trials": result.trials}, indent=2))
    print(f"special set: {path}\nsearch report: {report}")
    return 0
