"""``run`` and ``ask`` as library calls: `run(RunSpec) -> RunResult`, `ask(AskSpec) -> AskResult`."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from teammed.errors import TeammedError
from teammed.events import ProgressCallback, step, tracking

if TYPE_CHECKING:
    from teammed.experiments._data import DatasetChoice
    from teammed.experiments.specs import AskSpec, RunSpec
    from teammed.results import ResultRow
    from teammed.run_plan import RunCell
    from teammed.types import Question

__all__ = ["run", "ask", "RunResult", "RunCellResult", "RunSummary", "AskResult"]


class RunSummary(BaseModel):
    """A cell's ``summary.json``, typed: counts, accuracy, billable spend per question and in all (``spent_*``:
    what this session paid), repairs and fallbacks; the identity fields and the metrics (``metrics``:
    calibration, confusion, ...) as written. Keys a newer teammed writes are kept. ``summary["key"]`` reads
    a field too."""

    model_config = ConfigDict(frozen=True, extra="allow")

    n: int
    n_failed: int
    n_unlabeled: int
    n_labeled: int
    accuracy: float | None
    majority_baseline: dict[str, Any]
    answer_spread: dict[str, Any]
    calls: int
    calls_per_question: float
    prompt_tokens: int
    prompt_tokens_per_question: float
    completion_tokens_per_question: float
    cost_usd_per_question: float
    latency_s_per_question: float
    spent_prompt_tokens_per_question: float | None = None
    spent_completion_tokens_per_question: float | None = None
    cache_hits: int = 0
    parse_failures: int = 0
    repaired: int = 0
    ranking_repairs: int = 0
    fallbacks: int = 0
    complete: bool = True
    label: str
    seed: int
    system: str
    model: str | None = None
    metrics: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)


class RunCellResult(BaseModel):
    """One configuration at one seed: its directory and the summary written there (``summary.json``)."""

    model_config = ConfigDict(frozen=True)

    label: str
    seed: int
    out: Path
    summary: RunSummary

    @property
    def accuracy(self) -> float | None:
        return self.summary.accuracy

    @property
    def results_path(self) -> Path:
        return self.out / "results.jsonl"

    def rows(self) -> list[ResultRow]:
        """The typed rows of ``results.jsonl``."""
        from teammed.results import load_rows

        return load_rows(self.out)

    def text(self) -> str:
        """What ``teammed run`` prints for this cell."""
        s = self.summary
        accuracy = "n/a (no labeled questions)" if s.accuracy is None else f"{s.accuracy:.1%}"
        baseline = s.majority_baseline
        majority = f" (majority class {baseline['accuracy']:.1%})" if baseline["accuracy"] is not None else ""
        return (f"\n{s['label']} seed {s['seed']}: accuracy {accuracy}{majority} on {s['n_labeled']} labeled of "
                f"{s['n']} questions ({s['n_failed']} failed, {s['n_unlabeled']} unlabeled) | "
                f"{s['calls_per_question']:.1f} billable calls, "
                f"{s['prompt_tokens_per_question']:.0f}+{s['completion_tokens_per_question']:.0f} billable tokens, "
                f"{s['latency_s_per_question']:.1f}s per question | cache hits {s['cache_hits']} | "
                f"parse fallbacks {s['parse_failures']} failed + {s['repaired']} repaired of {s['calls']} calls, "
                f"{s['ranking_repairs']} ranking repairs, {s['fallbacks']} fallbacks\n"
                f"  results: {self.results_path}\n  summary: {self.out / 'summary.json'}")

    def warning(self) -> str | None:
        spread = self.summary.answer_spread
        if spread["constant"]:
            return (f"warning: answered {spread['top']} to {spread['share']:.0%} of {spread['n_answered']} "
                    f"questions: a constant predictor")
        return None


class RunResult(BaseModel):
    """Every cell of a run (configurations x seeds), in the order they ran."""

    model_config = ConfigDict(frozen=True)

    cells: tuple[RunCellResult, ...]

    def rows(self) -> list[ResultRow]:
        """The typed rows of every cell."""
        return [row for cell in self.cells for row in cell.rows()]

    def text(self) -> str:
        """What ``teammed run`` prints: each cell's summary line and files."""
        return "\n".join(cell.text() for cell in self.cells)

    def warnings(self) -> list[str]:
        return [w for w in (cell.warning() for cell in self.cells) if w]

    def to_json(self) -> dict[str, Any]:
        """``run --json``: every cell's label, seed, directory and summary."""
        return {"cells": [{"label": c.label, "seed": c.seed, "out": str(c.out),
                           "summary": c.summary.model_dump(mode="json")} for c in self.cells]}

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame, one row per question and cell (pandas comes with ``datasets``,
        a dependency). Nested fields (record, transcript, options) stay Python objects."""
        try:
            import pandas as pd
        except ImportError:
            raise TeammedError("RunResult.to_pandas needs pandas; pip install pandas (or use .rows(), typed "
                               "ResultRow objects)") from None
        return pd.DataFrame([row.model_dump(mode="python") for row in self.rows()])


class AskResult(BaseModel):
    """One deliberation: the question, the team's answer, its transcript as the CLI renders it, and spend."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    question: Any  # teammed.types.Question
    answer: str
    confidence: Any
    rationale: str | None
    transcript: str
    prediction: Any  # the dspy.Prediction (record, transcript events)
    calls: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float

    @property
    def correct(self) -> bool | None:
        return None if self.question.answer_idx is None else self.answer == self.question.answer_idx

    def text(self, *, replayed: str | None = None) -> str:
        """What ``teammed ask`` prints: (a replayed question of data set ``replayed`` first), the
        transcript, the answer, the gold after it when known, the rationale and the spend."""
        q, options = self.question, dict(self.question.options)
        lines = []
        if replayed:  # what was asked, before what the team said
            lines.append(f"Question {q.id} of {replayed}:\n{q.question}\n"
                         + "\n".join(f"  {k}) {v}" for k, v in options.items()) + "\n")
        lines += [self.transcript, f"\nAnswer: {self.answer}) {options[self.answer]}  (confidence {self.confidence})"]
        if q.answer_idx is not None:  # a replayed question: its gold, after the team has answered
            verdict = "right" if self.correct else "wrong"
            lines.append(f"Gold: {q.answer_idx}) {options[q.answer_idx]}  (the team is {verdict})")
        lines += [f"\nRationale:\n{self.rationale}", f"\n[{self.calls} LM calls, {self.prompt_tokens}+"
                  f"{self.completion_tokens} tokens, {self.latency_s:.1f}s in the LM]"]
        return "\n".join(lines)


# ---------------------------------------------------------------- ask
def _image(raw: str | None) -> str | None:
    """An image: a readable file or an http(s)/data URL, checked before any call."""
    if raw is None:
        return None
    if raw.startswith(("http://", "https://", "data:image/")):
        return raw
    path = Path(raw)
    if not path.is_file():
        raise TeammedError(f"--image {raw}: no such file; give an image file (PNG, JPEG, ...) or an http(s) URL")
    try:
        path.open("rb").close()
    except OSError as exc:
        raise TeammedError(f"--image {raw}: cannot read it ({exc.strerror}); check its permissions") from None
    return str(path)


def asked_question(spec: AskSpec) -> Question:
    """The question ``spec`` asks: typed in, or replayed from a data set by id."""
    from teammed.types import Question

    if spec.data is None:
        if spec.question_id:
            raise TeammedError("--id, --split and --data-dir pick a question of a data set: give --dataset too")
        text = spec.question or ""
        if not text.strip():
            raise TeammedError("the question is empty; give its text as the first argument, or --dataset and --id")
        from teammed.inputs import parse_options

        options = parse_options([f"{k}={v}" for k, v in (spec.options or {}).items()])
        return Question(id="ask", question=text, options=options, image=_image(spec.image))
    if spec.question or spec.options:
        raise TeammedError("give either a question's text and --option, or --dataset and --id, not both")
    if not spec.question_id:
        raise TeammedError(f"--dataset {spec.data.dataset} needs --id: the id of the question to replay")
    from teammed.data import load_dataset

    questions = load_dataset(spec.data.dataset, data_dir=spec.data.data_dir, split=spec.data.split)
    found = [q for q in questions if q.id == spec.question_id]
    if not found:
        close = difflib.get_close_matches(spec.question_id, [q.id for q in questions], n=3)
        hint = f" Nearest ids: {', '.join(close)}." if close else ""
        raise TeammedError(f"{spec.data.dataset} ({spec.data.split or 'its default split'}) has no question with id "
                           f"{spec.question_id!r} among its {len(questions)} questions.{hint}")
    question = found[0]
    if spec.image:
        question = question.model_copy(update={"image": _image(spec.image)})
    return question


def ask(spec: AskSpec, *, progress: Any = None) -> AskResult:
    """Deliberate over one question. ``progress``: a context manager that shows the deliberation as it
    goes (the CLI's phase display), or None."""
    from teammed.experiments.specs import AskSpec, checked

    spec = checked(AskSpec, spec)
    import contextlib

    import dspy

    from teammed import usage
    from teammed.adapter import SchemaAdapter
    from teammed.backends.vision import require_vision
    from teammed.experiments._backend import open_backends
    from teammed.experiments._team import check_system, program_factory, takes_config, team_config
    from teammed.render import render_transcript

    check_system(spec.team)
    question = asked_question(spec)
    options, image = dict(question.options), question.image
    config = team_config(spec.team) if takes_config(spec.team.system) else None
    factory = program_factory(spec.team, config, vision=image is not None)
    inputs: dict[str, Any] = {"question": question.question, "options": options}
    if image is not None:
        inputs["image"] = image
    with open_backends(spec.backend, command="ask") as deployments:
        require_vision([question], deployments)
        with progress or contextlib.nullcontext(), \
                dspy.context(lm=deployments[0].lm, adapter=SchemaAdapter(), disable_history=True), \
                usage.track() as used:
            prediction = factory()(**inputs)
    if prediction.answer not in options:
        raise TeammedError(f"the {spec.team.system} system gave no valid option (got {prediction.answer!r}); "
                           f"try another --model or rerun with -v to see the calls")
    return AskResult(question=question, answer=prediction.answer, confidence=prediction.confidence,
                     rationale=prediction.rationale, transcript=render_transcript(prediction), prediction=prediction,
                     calls=used.calls, prompt_tokens=used.prompt_tokens, completion_tokens=used.completion_tokens,
                     latency_s=used.latency_s)


# ---------------------------------------------------------------- run
def _say(message: str) -> None:
    import logging

    logging.getLogger(__name__).warning("%s", message.removeprefix("teammed: "))


def plan_run(spec: RunSpec) -> tuple[list[RunCell], DatasetChoice, dict[str, Any]]:
    """The cells of ``spec`` (configurations x seeds), each directory checked, nothing written; the data
    set they sample; the compiled program's identity."""
    from teammed.data import sample_questions, shard_questions
    from teammed.experiments._data import load_for, tuned_on, without_overlap
    from teammed.experiments._team import grid_configs
    from teammed.inputs import check_unique_ids, check_writable_dir
    from teammed.programs.persist import program_identity
    from teammed.run_plan import plan_cells

    resuming = bool(spec.resume or spec.retry_failed)
    if resuming and not spec.out:
        raise TeammedError("--resume/--retry-failed need the --out directory of the run to continue")
    configs = grid_configs(spec.team)
    choice = load_for(spec.data, purpose="eval")
    check_unique_ids([q.id for q in choice.source], dataset=spec.data.dataset)
    program = program_identity(spec.team.program)
    tuned = tuned_on(spec.team.program or spec.team.config)

    def sample(seed: int) -> tuple[list[Question], dict[str, Any]]:
        drawn = sample_questions(choice.questions, n=spec.n, seed=seed, stratify_by=spec.stratify,
                                 shuffle_options=spec.shuffle_options)
        return without_overlap(drawn, tuned, choice, allow=spec.allow_overlap)

    shard = spec.shard
    cells = plan_cells(configs, spec.seeds or [spec.seed], sample=sample, dataset=choice.name,
                       out=spec.out, program_sha256=program.get("program_sha256"), resuming=resuming,
                       check_dir=check_writable_dir, say=_say, shard=shard,
                       part=(lambda qs: shard_questions(qs, *shard, stratify_by=spec.stratify)) if shard else None)
    return cells, choice, program


def run(spec: RunSpec, *, progress: ProgressCallback = None) -> RunResult:
    """Run ``spec``'s system over its questions: one run directory per configuration and seed, each
    with ``results.jsonl``, ``run.json`` and ``summary.json``. Raises `teammed.runner.RunStopped` when
    questions kept failing (the finished rows are on disk: resume with ``resume=True``)."""
    from teammed.experiments.specs import RunSpec, checked

    spec = checked(RunSpec, spec)
    from teammed.backends.vision import require_vision
    from teammed.experiments._backend import open_backends
    from teammed.programs.accounting import expected_calls_per_question

    cells, choice, program = plan_run(spec)
    results = []
    with open_backends(spec.backend, command="run") as deployments:
        for cell in cells:
            require_vision(cell.questions, deployments)
        in_flight = min(spec.backend.concurrency, sum(d.concurrency for d in deployments))
        with tracking("run", progress, unit_calls=expected_calls_per_question(cells[0].config,
                                                                             system=spec.team.system),
                      concurrency=in_flight, priced=_priced(spec.backend)):
            for cell in cells:
                summary = _run_cell(spec, cell, choice=choice, program=program, deployments=deployments,
                                    in_flight=in_flight)
                results.append(RunCellResult(label=cell.label, seed=cell.seed, out=cell.out,
                                             summary=RunSummary.model_validate(summary)))
    return RunResult(cells=tuple(results))


def _priced(backend: Any) -> bool:
    """Whether the spend of ``backend`` has a price in $ (teammed's own backends and self-hosted servers
    have none)."""
    if backend.api_base or backend.deployments:
        return False
    return not any(m.split(":")[0] in ("local", "scripted", "simulated") for m in backend.models)


def _run_cell(spec: RunSpec, cell: RunCell, *, choice: DatasetChoice, program: dict[str, Any], deployments: list,
              in_flight: int) -> dict[str, Any]:
    from teammed.evals import Summarizer
    from teammed.experiments._backend import called_with
    from teammed.experiments._team import program_factory
    from teammed.records import prompt_digest
    from teammed.run_plan import few_shot_pool, run_identity, run_meta
    from teammed.runner import RunSettings, run_questions

    called = called_with(spec.backend)
    identity = run_identity(cell, system=spec.team.system, program=program, deployments=deployments,
                            api_base=called["api_base"], dataset=choice.name, dataset_sha256=choice.sha256,
                            split=choice.split, revision=spec.data.revision, n=spec.n, stratify=spec.stratify,
                            shuffle_options=spec.shuffle_options, temperature=called["temperature"])
    factory = program_factory(spec.team, cell.config, pool=few_shot_pool(choice.source, cell.sampled or cell.questions),
                              seed=cell.seed, vision=any(q.image for q in cell.questions))
    settings = RunSettings(out_dir=cell.out, identity=identity, resume=spec.resume, retry_failed=spec.retry_failed,
                           max_consecutive_failures=spec.max_consecutive_failures,
                           extra_meta=run_meta(cell, identity, max_tokens=called["max_tokens"],
                                               prompt_sha256=prompt_digest(factory())))
    header = (f"{cell.label} | {choice.name} ({choice.split}) | seed {cell.seed} | {len(cell.questions)} questions | "
              f"{identity.model} -> {cell.out}")
    label = f"{cell.label} seed {cell.seed}"

    def answered(stats: dict[str, Any]) -> None:
        step("question", label, done=int(stats["done"]), total=int(stats["total"]), accuracy=stats["accuracy"],
             failed=int(stats["failed"]), calls=int(stats["calls"]))

    return run_questions(cell.questions, program_factory=factory, deployments=deployments, settings=settings,
                         progress=answered, metrics=Summarizer, questions_in_flight=in_flight,
                         on_start=lambda: step("begin", header, done=0, total=len(cell.questions)))
