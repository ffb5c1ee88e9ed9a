"""One place answers a question (issue 17, item 3): a row means the same in ``run`` and in the
optimizers' scoring (``search``, ``compile``, ``tune``, ``reproduce``).

The same questions are answered by ``teammed run`` (its ``results.jsonl``) and by
`teammed.optimizers._scoring.score_questions` (what search's trials, tune's cells, compile's
before/after and reproduce's cells score with), with the scripted backend: the rows are equal
field for field, but for the time they took and the run's own identity (which the optimizers'
rows do not carry). Failed questions too: one that names no option and one whose backend
refuses, each with the same error, classification and accounting.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from teammed.backends.resolve import Deployment
from teammed.backends.scripted import ScriptedCall, ScriptedLM
from teammed.cli import main
from teammed.config import TeamworkConfig
from teammed.data import load_dataset
from teammed.errors import FatalBackendError
from teammed.optimizers._scoring import accuracy_of, score_questions
from teammed.programs.peers import build_system
from teammed.programs.teamwork import TeamworkProgram
from teammed.records import ResultRow, RunIdentity
from teammed.runner import RunSettings, read_results, run_questions

# What only a run's row carries (its identity) or what differs from one answering to the next (time).
RUN_ONLY = {"dataset", "dataset_sha256", "split", "seed", "system", "label", "program_sha256", "deployment",
            "config"}
TIMING = {"latency_s", "lm_latency_s"}
SYSTEMS = {"teamwork": ["--preset", "all", "--n-agents", "3"], "majority_vote": []}


def _program(identity: RunIdentity):
    if identity.system == "teamwork":
        return TeamworkProgram(TeamworkConfig(**(identity.config or {})))
    return build_system(identity.system)


def _meaning(row: ResultRow) -> dict:
    """A row as JSON without its timing and run identity: what it says about the question."""
    return {k: v for k, v in row.model_dump(mode="json").items() if k not in TIMING | RUN_ONLY}


def _assert_same_rows(run_rows: list[ResultRow], scored: list[ResultRow]) -> None:
    order = {r.id: i for i, r in enumerate(scored)}  # a run writes its rows as questions finish
    run_rows = sorted(run_rows, key=lambda r: order.get(r.id, len(order)))
    assert [r.id for r in scored] == [r.id for r in run_rows]
    for ran, score in zip(run_rows, scored, strict=True):
        mine, theirs = _meaning(ran), _meaning(score)
        differing = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
        assert not differing, f"{ran.id}: run and scoring differ in {differing}"
        assert all(getattr(score, k) is None for k in RUN_ONLY - {"deployment"})  # scoring has no run identity


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_run_and_the_optimizers_scoring_write_the_same_row(tmp_path: Path, system: str) -> None:
    out = tmp_path / "run"
    assert main(["run", "--dataset", "demo", "--n", "6", "--model", "scripted", "--no-cache", "--system", system,
                 *SYSTEMS[system], "--out", str(out)]) == 0
    run_rows = read_results(out / "results.jsonl")
    identity = RunIdentity.model_validate(json.loads((out / "run.json").read_text())["identity"])
    by_id = {q.id: q for q in load_dataset("demo")}
    questions = [by_id[i] for i in identity.question_ids]

    scored = score_questions(_program(identity), questions, ScriptedLM(keep_calls=False))

    _assert_same_rows(run_rows, scored)
    assert any(r.correct for r in scored) and not all(r.correct for r in scored)  # both outcomes compared
    assert all(r.calls > 0 and r.prompt_tokens > 0 for r in scored)
    summary = json.loads((out / "summary.json").read_text())
    assert accuracy_of(scored) == pytest.approx(summary["accuracy"], abs=1e-4)


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_failed_questions_are_the_same_failure_in_run_and_in_scoring(tmp_path: Path, system: str) -> None:
    questions = list(load_dataset("demo"))[:4]
    garbled, refused = questions[1].question, questions[2].question

    def responder(call: ScriptedCall):
        text = json.dumps(call.messages)
        if json.dumps(refused)[1:-1] in text:
            raise FatalBackendError("scripted: the key was refused.", kind="authentication", fix="Set the key.")
        if json.dumps(garbled)[1:-1] in text:
            return "no JSON here, and no option either"
        return None

    config = TeamworkConfig(n_agents=2) if system == "teamwork" else None
    identity = RunIdentity(system=system, label=system, config=config.model_dump(mode="json") if config else None,
                           model="scripted", dataset="demo", dataset_sha256="0" * 64, split="test",
                           question_ids=[q.id for q in questions])
    out = tmp_path / "run"
    run_questions(questions, program_factory=lambda: _program(identity),
                  deployments=[Deployment("scripted", ScriptedLM(responder, keep_calls=False), 1)],
                  settings=RunSettings(out_dir=out, identity=identity, max_consecutive_failures=0))
    run_rows = read_results(out / "results.jsonl")

    scored = score_questions(_program(identity), questions, ScriptedLM(responder, keep_calls=False))

    _assert_same_rows(run_rows, scored)
    failed = {r.id: r for r in scored if r.failed}
    assert set(failed) == {questions[1].id, questions[2].id}
    assert all(r.prediction is None and r.correct is False for r in failed.values())  # in the denominator
    assert failed[questions[2].id].error_kind == "authentication"
    assert failed[questions[1].id].error_kind is None and failed[questions[1].id].error_type
