"""``compile`` and ``search`` as library calls: `compile_program(CompileSpec) -> CompileResult`,
`search(SearchSpec) -> SearchResult`."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from teammed.errors import TeammedError, WorkFailed
from teammed.events import ProgressCallback, step, tracking

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from teammed.experiments.specs import CompileSpec, SearchSpec
    from teammed.records import ResultRow

__all__ = ["compile_program", "search", "CompileResult", "SearchResult", "CompileFailed"]


class CompileFailed(WorkFailed):
    """An evaluation around compiling measured nothing (every question failed); nothing was saved."""


class CompileResult(BaseModel):
    """A compiled program and its held-out proof."""

    model_config = ConfigDict(frozen=True)

    path: Path
    optimizer: str
    accuracy_before: float
    accuracy_after: float
    n_test: int

    def to_json(self) -> dict[str, Any]:
        return {"program": str(self.path), "optimizer": self.optimizer, "accuracy_before": self.accuracy_before,
                "accuracy_after": self.accuracy_after, "n_test": self.n_test}

    def text(self) -> str:
        return (f"{self.optimizer}: held-out accuracy {self.accuracy_before:.1%} -> {self.accuracy_after:.1%} "
                f"({self.n_test} questions)\ncompiled program: {self.path}")


class SearchResult(BaseModel):
    """A search's Special Set; ``path`` None when other workers are still evaluating (the last one writes it)."""

    model_config = ConfigDict(frozen=True)

    components: tuple[str, ...]
    dev_accuracy: float | None
    se: float | None
    runner_up: dict[str, Any] | None
    trials: dict[str, int]
    study: str
    path: Path | None
    report: Path | None
    adaptive: Path | None = None  # with --adaptive: the front, the chosen policy and its held-out proof (JSON)
    adaptive_text: str | None = None

    def text(self) -> str:
        if self.path is None:
            return (f"search: this worker is done; other workers are still evaluating {self.trials['running']} "
                    f"configuration(s) of study {self.study}, and the last of them writes the Special Set")
        score = "n/a" if self.dev_accuracy is None else (
            f"{self.dev_accuracy:.1%}" + (f" ± {self.se:.1%}" if self.se is not None else ""))
        counts = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in self.trials.items())
        lines = [f"special set: {', '.join(self.components) or 'none (base)'} | dev accuracy {score} | "
                 f"trials: {counts}"]
        if self.runner_up is not None:
            from teammed.optimizers.report import noise_text

            lines.append(noise_text(self.runner_up).replace("**", ""))
        lines.append(f"special set: {self.path}\nsearch report: {self.report}")
        if self.adaptive_text is not None:
            lines.append(f"adaptive front (tuning questions):\n{self.adaptive_text}\nadaptive: {self.adaptive}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"special_set": list(self.components), "dev_accuracy": self.dev_accuracy, "se": self.se,
                "runner_up": self.runner_up, "trials": self.trials,
                "special_set_path": str(self.path) if self.path else None,
                "report": str(self.report) if self.report else None,
                "adaptive": str(self.adaptive) if self.adaptive else None}


def labeled(questions: list, what: str) -> list:
    """The questions with a gold answer (tuning needs them); what is left out is said on stderr."""
    kept = [q for q in questions if q.answer_idx is not None]
    if len(kept) < len(questions):
        logger.warning("%s: left out %d unlabeled questions (tuning needs gold answers)", what,
                       len(questions) - len(kept))
    return kept


def student(spec: CompileSpec, config: Any) -> Callable[[], Any]:
    """How ``compile`` builds the program it optimizes (its ``--dry-run`` prices the same)."""
    if spec.team.system == "teamwork":
        from teammed.programs.teamwork import TeamworkProgram

        return lambda: TeamworkProgram(config)
    from teammed.programs.peers import build_system

    return lambda: build_system(spec.team.system)


def _check_evaluated(rows: Sequence[ResultRow], what: str) -> None:
    if rows and all(r.failed for r in rows):  # a fatal error's message ends with its fix
        raise CompileFailed(f"the evaluation {what} failed: all {len(rows)} questions failed (first: "
                            f"{rows[0].error}); nothing was saved")


def compile_program(spec: CompileSpec, *, progress: ProgressCallback = None,
                    relay: Callable[[], Any] | None = None) -> CompileResult:
    """Optimize a system's prompts on the tune part of the data set and measure held-out accuracy before
    and after; write the compiled program to ``spec.out``. ``relay()``: a context manager around the
    optimizer, for what DSPy prints (the CLI turns it into its own lines)."""
    from teammed.experiments.specs import CompileSpec, checked

    spec = checked(CompileSpec, spec)
    import contextlib

    from teammed.backends.resolve import describe
    from teammed.experiments._backend import extra_lm, open_backends
    from teammed.experiments._data import load_for, tuning_record
    from teammed.experiments._team import check_system, takes_config, team_config
    from teammed.inputs import check_writable_dir
    from teammed.optimizers import compile_program as optimize
    from teammed.optimizers import evaluate, examples_from_questions, save_program, split_questions

    check_system(spec.team)
    if spec.out.is_dir():
        raise TeammedError(f"--out {spec.out} is a directory; give the compiled program's file name, "
                           f"e.g. {spec.out / 'program.json'}")
    check_writable_dir(spec.out.parent)
    config = team_config(spec.team) if takes_config(spec.team.system) else None  # refused before any call
    choice = load_for(spec.data, purpose="tune")
    questions = labeled(choice.questions, "compile")
    train, val, test = split_questions(questions, train=spec.train, val=spec.val, test=spec.test, seed=spec.seed)
    program = student(spec, config)()
    if spec.optimizer == "labeled":  # refused before any LM call when it would change nothing
        from teammed.optimizers.compile import check_labeled_useful

        check_labeled_useful(program, examples_from_questions(train))
    b, threads = spec.backend, spec.backend.concurrency  # questions in flight; the backend bounds requests
    with open_backends(b, command="compile") as opened, contextlib.ExitStack() as extras, \
            tracking("compile", progress):
        step("begin", f"compile: {len(train)} train + {len(val)} val + {len(test)} held-out questions from "
                      f"{choice.name} ({choice.split})")
        lm = opened[0].lm  # teacher/reflection: the same backend options and shutdown as the model
        teacher = (extra_lm(b, spec.teacher_model, flag="--teacher-model", command="compile", stack=extras)
                   if spec.teacher_model else None)
        reflection = (extra_lm(b, spec.reflection_model, flag="--reflection-model", command="compile", stack=extras,
                               max_tokens=2048) if spec.reflection_model else None)
        if spec.optimizer == "gepa" and reflection is None:
            reflection = lm
        step("begin", "compile: held-out accuracy before", done=0, total=3)
        before, before_rows = evaluate(program, test, lm, num_threads=threads)
        _check_evaluated(before_rows, "before compiling")
        step("stage", f"compile: held-out accuracy before {before:.1%} on {len(test)} questions; "
                      f"{spec.optimizer} on {len(train)} training questions", done=1, total=3)
        with relay() if relay is not None else contextlib.nullcontext():
            compiled = optimize(program, optimizer=spec.optimizer, trainset=examples_from_questions(train),
                                valset=examples_from_questions(val), lm=lm, teacher_lm=teacher,
                                reflection_lm=reflection, seed=spec.seed, num_threads=threads)
        step("stage", "compile: held-out accuracy after", done=2, total=3)
        after, after_rows = evaluate(compiled, test, lm, num_threads=threads)
        _check_evaluated(after_rows, "of the compiled program")
        step("stage", f"compile: held-out accuracy after {after:.1%}", done=3, total=3)
        model = describe(opened[0].spec)
    path = save_program(compiled, spec.out, system=spec.team.system, config=config,
                        meta={"optimizer": spec.optimizer, "dataset": choice.name, "dataset_sha256": choice.sha256,
                              "split": choice.split, "model": model,
                              "train": len(train), "val": len(val), "test": len(test), "seed": spec.seed,
                              "accuracy_before": before, "accuracy_after": after,
                              "n_failed_before": sum(r.failed for r in before_rows),
                              "n_failed_after": sum(r.failed for r in after_rows),
                              "tuned_on": tuning_record(choice, [*train, *val]),
                              "held_out_ids": [q.id for q in test]})
    return CompileResult(path=path, optimizer=spec.optimizer, accuracy_before=before, accuracy_after=after,
                         n_test=len(test))


def search(spec: SearchSpec, *, progress: ProgressCallback = None) -> SearchResult:
    """Search component subsets with Optuna on the tune part of the data set; write the Special Set
    (``<out>/<dataset name>-<hash8>.json``) and the search report. Several processes with the same spec
    and storage share the study; the one that finishes it writes the Special Set."""
    from teammed.experiments.specs import SearchSpec, checked

    spec = checked(SearchSpec, spec)
    from teammed.backends.resolve import describe
    from teammed.data import sample_questions
    from teammed.experiments._backend import open_backends, server_of
    from teammed.experiments._data import load_for, tuning_record
    from teammed.inputs import check_writable_dir
    from teammed.optimizers import open_study, search_report, search_special_set, write_special_set

    check_writable_dir(spec.out)
    choice = load_for(spec.data, purpose="tune")
    questions = sample_questions(labeled(choice.questions, "search"), n=spec.n, seed=spec.seed)
    if not questions:
        raise TeammedError(f"{spec.data.dataset} has no labeled questions in {choice.split} to search on; "
                           f"pass another --split")
    study_name = spec.study or f"teammed-{choice.key}"
    work_dir = spec.out / f"{choice.key}_study"

    def on_trial(k: int, n: int, eta_s: float | None) -> None:
        step("trial", f"search: trial {k}/{n} done on {len(questions)} questions", done=k, total=n)

    with open_backends(spec.backend, command="search") as opened, tracking("search", progress):
        step("begin", f"search: {len(questions)} questions from {choice.name} ({choice.split}); study {study_name}")
        step("begin", f"search: {spec.trials} trials on {len(questions)} questions", done=0, total=spec.trials)
        result = search_special_set(
            questions=questions, lm=opened[0].lm, trials=spec.trials, storage=spec.storage,
            study_name=study_name, objectives=spec.objectives, sampler=spec.sampler, seed=spec.seed,
            batch_size=spec.batch_size, out_dir=work_dir, dataset=choice.name,
            search_turns=spec.search_turns, search_agents=spec.search_agents,
            search_early_consensus=spec.search_early_consensus, num_threads=spec.backend.concurrency,
            tuning=tuning_record(choice, questions), on_trial=on_trial,
            measured_on=f"{describe(opened[0].spec)} @ {server_of(spec.backend)}",
        )
        dev = result.dev
        common = {"components": tuple(result.components), "dev_accuracy": dev.get("accuracy"), "se": dev.get("se"),
                  "runner_up": result.runner_up, "trials": dict(result.trials), "study": study_name}
        if result.trials["running"]:  # the worker that finishes last writes the Special Set, once
            return SearchResult(**common, path=None, report=None)
        path = write_special_set(result, spec.out / f"{choice.key}.json")
        report = search_report(open_study(storage=spec.storage, study_name=study_name, out_dir=work_dir), work_dir)
        if not spec.adaptive:
            return SearchResult(**common, path=path, report=report)
        # on the same backend: a local model's server is not started a second time
        adaptive, text = adaptive_front(spec, questions, path, spec.out / f"{choice.key}-adaptive", lm=opened[0].lm)
    return SearchResult(**common, path=path, report=report, adaptive=adaptive, adaptive_text=text)


def adaptive_held_out(spec: SearchSpec) -> list[Any]:
    """The ``n_eval`` held-out questions ``search --adaptive`` proves its choice on (the eval part, disjoint
    from the tuning questions); its ``--dry-run`` prices these same questions."""
    from teammed.data import sample_questions
    from teammed.experiments._data import load_for

    return sample_questions(labeled(load_for(spec.data, purpose="eval").questions, "search --adaptive"),
                            n=spec.n_eval, seed=spec.seed)


def adaptive_front(spec: SearchSpec, tuning: list[Any], special: Path, stem: Path, *, lm: Any) -> tuple[Path, str]:
    """The adaptive system's front over the Special Set on the search's own tuning questions, its
    operating point, and the proof on ``spec.n_eval`` held-out questions (the eval part, disjoint)."""
    from teammed.optimizers.adaptive import choose, front, front_markdown, measure, policy_threshold, prove
    from teammed.optimizers.special_set import load_special_set
    from teammed.records import write_atomic

    held_out = adaptive_held_out(spec)
    targets = {"special": load_special_set(special)}
    outcomes = measure(tuning, lm, targets, on_question=lambda k, n: step(
        "question", f"adaptive: stage 1 and the Special Set on tuning question {k}/{n}", done=k, total=n))
    found = front(outcomes, seed=spec.seed)
    chosen = choose(outcomes, found, max_cost_ratio=spec.max_cost_ratio)
    step("stage", f"adaptive: proving {chosen.label()} on {len(held_out)} held-out questions", done=0, total=1)
    proof = prove(held_out, lm, chosen, targets, "special")
    table = front_markdown(found, chosen)
    held = (f"held out ({proof.n} questions): {chosen.label()} {proof.chosen.accuracy:.1%} at "
            f"{proof.chosen.tokens:,.0f} tokens/question ({proof.chosen.escalation_rate:.0%} escalated); static "
            f"Special Set {proof.static.accuracy:.1%} at {proof.static.tokens:,.0f}; single agent "
            f"{proof.single.accuracy:.1%} (McNemar p vs static {proof.p_vs_static:.3g})")
    policy = {"system": "adaptive", "threshold": policy_threshold(chosen), "target": str(special),
              "static": chosen.static, "single": chosen.target is None}
    write_atomic(stem.with_suffix(".md"), f"# Adaptive front (tuning questions)\n\n{table}\n\n{held}\n")
    path = write_atomic(stem.with_suffix(".json"), json.dumps({
        "policy": policy, "front": found.model_dump(mode="json"), "chosen": chosen.model_dump(mode="json"),
        "proof": proof.model_dump(mode="json")}, indent=2) + "\n")
    _plot_front(found, chosen, stem.with_suffix(".png"))
    return path, f"{table}\n{held}"


def _plot_front(found: Any, chosen: Any, path: Path) -> None:
    """Accuracy against tokens per question: every point, the front joined, the choice marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter([p.tokens for p in found.points], [100 * p.accuracy for p in found.points], s=12, c="#bbb",
               label="adaptive points")
    ax.plot([p.tokens for p in found.pareto], [100 * p.accuracy for p in found.pareto], "-o", ms=4, label="front")
    for p, mark in ((found.single, "s"), *((s, "D") for s in found.statics)):
        ax.scatter([p.tokens], [100 * p.accuracy], marker=mark, s=40, label=p.label())
    ax.scatter([chosen.tokens], [100 * chosen.accuracy], marker="*", s=160, c="crimson", label="chosen", zorder=5)
    ax.set_xlabel("billable tokens per question (tuning questions)")
    ax.set_ylabel("accuracy (%)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
