"""Search the teamwork components for a data set's special set with Optuna (docs/commands/search.md).

The objective samples a valid `TeamworkConfig` and scores it on the dev questions in batches:
single-objective trials report after each batch and may be pruned by the median rule. User
attributes hold JSON only. A resume first fails the trials orphaned by a killed worker
(`teammed.optimizers._storage.worker_gone`, or an expired heartbeat), so replacements run.
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import dspy
import optuna
from optuna.exceptions import ExperimentalWarning
from optuna.trial import TrialState

from teammed.config import TeamworkConfig
from teammed.errors import ConfigError, TeammedError, WorkFailed
from teammed.optimizers._evaluated import STATS
from teammed.optimizers._scoring import (
    accuracy_of,
    mean_of,
    require_labels,
    score_questions,
    standard_error,
    tokens_of,
)
from teammed.optimizers._space import SearchSpace
from teammed.optimizers._storage import WORKER, fail_gone, open_storage, worker_gone
from teammed.optimizers.special_set import SpecialSet, special_set_from_study
from teammed.programs.teamwork import TeamworkProgram
from teammed.records import ResultRow, dataset_digest
from teammed.types import Question

__all__ = ["search_special_set", "open_study", "SAMPLERS", "OBJECTIVES", "TrialFailed", "SearchAborted"]

logger = logging.getLogger(__name__)

SAMPLERS = ("tpe", "grid", "brute")
OBJECTIVES = ("accuracy", "accuracy,tokens")
_DONE = (TrialState.COMPLETE, TrialState.PRUNED)


class TrialFailed(TeammedError):
    """Every question of a trial failed: the trial is FAILED (not a 0% result) and the study goes on."""


class SearchAborted(WorkFailed):
    """Every question so far failed with the same fatal backend error: no trial can succeed."""


def _check_failures(trial: optuna.Trial, rows: Sequence[ResultRow], *, finished: bool) -> None:
    """Raise when the trial's questions all failed: `SearchAborted` for one fatal backend error
    kind (bad key, unknown model, dead server), else `TrialFailed` once the trial is over."""
    if not rows or any(not r.failed for r in rows):
        return
    trial.set_user_attr("n_failed", len(rows))
    trial.set_user_attr("n", len(rows))
    trial.set_user_attr("error", str(rows[0].error)[:500])
    kinds = {r.error_kind for r in rows}
    if len(kinds) == 1 and None not in kinds:
        raise SearchAborted(f"trial {trial.number}: all {len(rows)} questions failed with the same fatal "
                            f"backend error ({rows[0].error_kind}): {rows[0].error} (no Special Set was "
                            f"written; the search resumes its study once this is fixed)")
    if finished:
        raise TrialFailed(f"trial {trial.number}: all {len(rows)} questions failed (first: {rows[0].error})")


class _Objective:
    """``objective(trial) -> accuracy`` or ``(accuracy, tokens per question)``."""

    def __init__(self, *, space: SearchSpace, questions: list[Question],
                 lm_factory: Callable[[], dspy.BaseLM], batch_size: int, multi: bool, num_threads: int,
                 limit: int | None = None):
        self.space, self.questions, self.lm_factory, self.limit = space, questions, lm_factory, limit
        self.batch_size, self.multi, self.num_threads = batch_size, multi, num_threads
        self.aborted: SearchAborted | None = None
        self.interrupted = False

    def __call__(self, trial: optuna.Trial) -> float | tuple[float, float]:
        """A failed trial returns NaN, which Optuna records as FAILED with one warning line (an
        exception would print its traceback); a fatal backend error also stops the study."""
        try:
            return self._evaluate(trial)
        except TrialFailed as exc:
            logger.warning("%s", exc)
        except SearchAborted as exc:
            self.aborted = exc
            trial.study.stop()
        except KeyboardInterrupt:  # Ctrl-C: the trial is FAILED (rerun on resume), re-raised after optimize
            self.interrupted = True
            trial.set_user_attr("interrupted", True)
            trial.study.stop()
        nan = float("nan")
        return (nan, nan) if self.multi else nan

    def _evaluate(self, trial: optuna.Trial) -> float | tuple[float, float]:
        trial.set_user_attr("worker", WORKER)  # first thing: which process runs the trial (see _fail_orphans)
        config = self.space.suggest(trial)
        config_json = config.model_dump(mode="json")
        trial.set_user_attr("config", config_json)
        twin = _twin(trial, config_json)
        if twin is not None and twin.state == TrialState.COMPLETE:
            return self._reuse(trial, twin)
        if twin is not None:  # running elsewhere, or pruned: no request, close this one, sample again
            trial.set_user_attr("duplicate_of", twin.number)
            logger.info("trial %d (%s) was evaluated by trial %d (%s); not evaluated twice", trial.number,
                        config.label(), twin.number, twin.state.name.lower())
            raise optuna.TrialPruned()
        if self.limit is not None and _claimed(trial) >= self.limit:  # every trial asked for is taken
            trial.set_user_attr("over_budget", True)
            trial.set_user_attr("duplicate_of", -1)  # counts for nothing, as a duplicate does
            trial.study.stop()
            raise optuna.TrialPruned()
        program, lm = TeamworkProgram(config), self.lm_factory()
        rows: list[ResultRow] = []
        for start in range(0, len(self.questions), self.batch_size):
            rows += score_questions(program, self.questions[start:start + self.batch_size], lm,
                                    num_threads=self.num_threads)
            _check_failures(trial, rows, finished=len(rows) >= len(self.questions))
            if self.multi:
                continue
            trial.report(accuracy_of(rows), len(rows))
            if len(rows) < len(self.questions) and trial.should_prune():
                _check_failures(trial, rows, finished=True)  # all failed so far: FAILED, not pruned at 0%
                stats = _record(trial, rows)
                logger.info("trial %d (%s) pruned at %d questions, accuracy %.3f", trial.number,
                            config.label(), len(rows), stats["accuracy"])
                raise optuna.TrialPruned()
        stats = _record(trial, rows)
        logger.info("trial %d (%s): accuracy %.3f over %d questions", trial.number, config.label(),
                    stats["accuracy"], len(rows))
        return (stats["accuracy"], stats["tokens_per_question"]) if self.multi else stats["accuracy"]

    def _reuse(self, trial: optuna.Trial, twin: optuna.trial.FrozenTrial) -> float | tuple[float, float]:
        """A configuration evaluated before is not run again: its scores are copied."""
        for key in (*STATS, "n_failed"):
            if key in twin.user_attrs:
                trial.set_user_attr(key, twin.user_attrs[key])
        trial.set_user_attr("duplicate_of", twin.number)
        if not self.multi:
            for step, value in sorted(twin.intermediate_values.items()):
                trial.report(value, step)
        return (twin.values[0], twin.values[1]) if self.multi else twin.values[0]


def _twin(trial: optuna.Trial, config_json: dict[str, Any]) -> optuna.trial.FrozenTrial | None:
    """An evaluation of the same configuration this trial need not repeat: a COMPLETE one, else a PRUNED one,
    else one RUNNING in a live worker with a lower number. It waits (up to ``_DECLARE_S``) for the live
    lower-numbered trials to record their configuration, so of two that sampled one at once the later yields."""
    deadline = time.monotonic() + _DECLARE_S
    while True:
        others = [t for t in trial.study.get_trials(deepcopy=False, states=_TWIN_STATES) if t.number != trial.number]
        undeclared = [t for t in others if t.state == TrialState.RUNNING and t.number < trial.number
                      and "config" not in t.user_attrs and not worker_gone(t)]
        if not undeclared or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    twins = [o for o in others if o.user_attrs.get("config") == config_json and o.user_attrs.get("duplicate_of") is None
             and (o.state != TrialState.RUNNING or (o.number < trial.number and not worker_gone(o)))]
    return min(twins, key=lambda o: _TWIN_STATES.index(o.state), default=None)  # the first of the first state


_DECLARE_S = 10.0  # a live trial records its configuration a moment after it starts
_TWIN_STATES = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)  # in the order a twin is preferred


def _claimed(trial: optuna.Trial) -> int:
    """The distinct configurations other trials have claimed: evaluated (complete or pruned), or being evaluated
    by a live worker's lower-numbered trial; a claim made in the storage (docs/architecture.md, shared studies)."""
    # the running ones first: a trial that completes between the two reads is still counted once
    running = {json.dumps(t.user_attrs["config"], sort_keys=True) for t in _running(trial.study)
               if t.number < trial.number and "config" in t.user_attrs}
    return len(running | _evaluated(trial.study))


def _record(trial: optuna.Trial, rows: Sequence[ResultRow]) -> dict[str, Any]:
    """Store the evaluation's statistics (JSON numbers only) on the trial and return them."""
    accuracy = accuracy_of(rows)
    stats = {
        "accuracy": round(accuracy, 6),
        "se": round(standard_error(accuracy, len(rows)), 6),
        "n": len(rows),
        "tokens_per_question": round(mean_of(rows, tokens_of), 3),
        "cost_per_question": round(mean_of(rows, lambda r: r.cost_usd), 8),
        "calls_per_question": round(mean_of(rows, lambda r: r.calls), 3),
        "n_failed": sum(r.failed for r in rows),
    }
    for key, value in stats.items():
        trial.set_user_attr(key, value)
    # per question: what the winner-vs-runner-up test pairs (teammed.evals.stats.versus_runner_up)
    trial.set_user_attr("outcomes", {r.id: int(bool(r.correct) and not r.failed) for r in rows if r.labeled})
    return stats


def _evaluated(study: optuna.Study) -> set[str]:
    """The distinct configurations the study evaluated (complete, or pruned part way), duplicates aside."""
    return {json.dumps(t.user_attrs["config"], sort_keys=True) for t in study.get_trials(deepcopy=False, states=_DONE)
            if "config" in t.user_attrs and t.user_attrs.get("duplicate_of") is None}


def _running(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """Trials live workers are evaluating now (a duplicate being closed, or a killed worker's trial, aside)."""
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
            if t.user_attrs.get("duplicate_of") is None and not worker_gone(t)]


class _Budget:
    """Stops a worker once the study holds ``trials`` distinct evaluated configurations (those live workers are
    evaluating included) or the whole space, or after ``stuck`` duplicates in a row; a duplicate counts for nothing."""

    def __init__(self, trials: int, space_size: int, *, stuck: int = 25, attempts: int | None = None):
        self.trials, self.space_size, self.stuck = trials, space_size, stuck
        self.in_a_row = 0
        # this worker's evaluations, failed ones included: a failing server ends the search after as many
        # failed trials as were asked for, not after a trial per configuration of the space
        self.attempts = trials if attempts is None else attempts

    def spent(self, study: optuna.Study) -> bool:
        evaluated = len(_evaluated(study))
        return evaluated + len(_running(study)) >= self.trials or evaluated >= self.space_size

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        duplicate = trial.user_attrs.get("duplicate_of") is not None
        self.in_a_row = self.in_a_row + 1 if duplicate else 0
        self.attempts -= 0 if duplicate else 1
        if self.attempts <= 0:
            study.stop()
        elif self.in_a_row >= self.stuck:
            logger.warning("the sampler proposed %d evaluated configurations in a row; stopping with %d of %d "
                           "distinct configurations evaluated", self.in_a_row, len(_evaluated(study)), self.trials)
            study.stop()
        elif self.spent(study):
            study.stop()


def _trial_clock(on_trial: Callable[[int, int, float | None], None], trials: int) -> Callable[..., None]:
    """After each evaluating trial of this process: ``on_trial(k, n, eta_s)``, k the distinct configurations the
    study evaluated so far (other workers' included), eta_s the rest at this process's mean time a trial."""
    started, ran = time.monotonic(), [0]

    def clock(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if trial.user_attrs.get("duplicate_of") is None:  # a duplicate reports nothing
            ran[0] += 1
            k = min(len(_evaluated(study)), trials)
            on_trial(k, trials, (time.monotonic() - started) / ran[0] * (trials - k))

    return clock


def _sampler(name: str, space: SearchSpace, seed: int) -> optuna.samplers.BaseSampler:
    if name == "grid":
        return optuna.samplers.GridSampler(space.grid(), seed=seed)
    with warnings.catch_warnings(action="ignore", category=ExperimentalWarning):  # constant_liar, BruteForceSampler
        if name == "tpe":  # constant liar: other workers' running trials steer this worker's proposals away
            return optuna.samplers.TPESampler(seed=seed, constant_liar=True)
        return optuna.samplers.BruteForceSampler(seed=seed)


def _open_study(*, storage: optuna.storages.BaseStorage, study_name: str,
                sampler: optuna.samplers.BaseSampler, multi: bool, search: dict[str, Any]) -> optuna.Study:
    directions: list[Literal["maximize", "minimize"]] = ["maximize", "minimize"] if multi else ["maximize"]
    pruner = optuna.pruners.NopPruner() if multi else optuna.pruners.MedianPruner(n_startup_trials=5)
    study = optuna.create_study(storage=storage, study_name=study_name, sampler=sampler, pruner=pruner,
                                directions=directions, load_if_exists=True)
    found = [d.name.lower() for d in study.directions]
    if found != directions:
        raise ConfigError(f"study {study_name!r} optimizes {found}, not {directions}; use the objectives "
                          f"it was created with or a new --study")
    previous = study.user_attrs.get("search")
    if previous is None:
        study.set_user_attr("search", search)
    elif previous != search:
        differ = sorted(k for k in {*previous, *search} if previous.get(k) != search.get(k))
        raise ConfigError(f"study {study_name!r} searched {json.dumps(previous, sort_keys=True)}, but "
                          f"this run searches {json.dumps(search, sort_keys=True)} (they differ in "
                          f"{', '.join(differ)}); repeat the original search flags, model, server and questions "
                          f"to resume it, or choose a new --study")
    return study


def _fail_orphans(study: optuna.Study) -> None:
    """Fail the RUNNING trials whose worker is gone (kill -9), which would otherwise count toward ``trials`` for
    ever: an expired heartbeat, a dead process on this host, or a worker killed before recording itself."""
    with warnings.catch_warnings(action="ignore", category=ExperimentalWarning):  # marked experimental in Optuna 5
        optuna.storages.fail_stale_trials(study)
    fail_gone(study, study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)),
              "was orphaned by a killed worker; failing it so another trial replaces it")


def _refuse_parallel_sqlite(study: optuna.Study, reference: str) -> None:
    """SQLite is not for parallel workers (its writers lock each other out, and a study's reads race its
    writes): a second worker on a SQLite study that a live worker is running is refused, naming the fix."""
    if not reference.startswith("sqlite"):
        return
    busy = [t for t in _running(study) if t.user_attrs.get("worker") not in (None, WORKER)]
    if busy:
        raise ConfigError(f"study {study.study_name!r} is stored in SQLite ({reference}) and worker "
                          f"{busy[0].user_attrs['worker']} is running trial {busy[0].number}: SQLite is not for "
                          "parallel workers. Give every worker the same --storage journal:/abs/path/study.log "
                          "(one machine) or --storage postgresql://user:password@host/db (several machines)")


def search_special_set(
    *,
    questions: Sequence[Question],
    lm: dspy.BaseLM | None = None,
    lm_factory: Callable[[], dspy.BaseLM] | None = None,
    trials: int,
    storage: str | None = None,
    study_name: str,
    objectives: Literal["accuracy", "accuracy,tokens"] = "accuracy",
    sampler: Literal["tpe", "grid", "brute"] = "tpe",
    seed: int = 0,
    batch_size: int = 10,
    out_dir: Path | str,
    dataset: str | None = None,
    base_config: TeamworkConfig | None = None,
    search_turns: bool = False,
    search_agents: bool = False,
    search_early_consensus: bool = False,
    num_threads: int = 1,
    tuning: dict[str, Any] | None = None,
    on_trial: Callable[[int, int, float | None], None] | None = None,
    measured_on: str | None = None,
) -> SpecialSet:
    """Run (or resume) the study until it holds ``trials`` distinct evaluated configurations; return the special
    set (docs/commands/search.md). ``base_config`` fixes what is not searched; ``tuning`` (data set identity and
    question ids) is stored in the Special Set so ``run`` leaves those questions out; ``on_trial(k, n, eta_s)``
    reports progress. Tokens and cost are billable ones, the same whether or not the cache answered.
    """
    if (lm is None) == (lm_factory is None):
        raise ConfigError("give exactly one of lm= (shared by every trial) or lm_factory= (one LM per trial)")
    if objectives not in OBJECTIVES:
        raise ConfigError(f"unknown objectives {objectives!r}; use one of {', '.join(OBJECTIVES)}")
    if sampler not in SAMPLERS:
        raise ConfigError(f"unknown sampler {sampler!r}; use one of {', '.join(SAMPLERS)}")
    if trials < 1 or batch_size < 1:
        raise ConfigError(f"trials and batch_size must be at least 1 (got trials={trials}, "
                          f"batch_size={batch_size})")
    if not questions:
        raise ConfigError("a search needs dev questions; none were given")
    multi = objectives == "accuracy,tokens"
    space = SearchSpace(base=base_config or TeamworkConfig(), turns=(2, 3) if search_turns else None,
                        agents=("auto", 2, 3, 4) if search_agents else None,
                        early_consensus=(None, 0.8, 1.0) if search_early_consensus else None,
                        flat=sampler == "grid")
    backend, reference = open_storage(storage, Path(out_dir))
    # everything the answers depend on: a study of another model, server or question content is another study
    search = {"objectives": objectives, "space": space.describe(),
              "questions": {"n": len(questions), "sha256": dataset_digest(questions)},
              "measured_on": measured_on or _lm_name(lm, lm_factory)}
    study = _open_study(storage=backend, study_name=study_name, sampler=_sampler(sampler, space, seed),
                        multi=multi, search=search)
    _fail_orphans(study)
    remaining = trials - len(_evaluated(study))
    budget = _Budget(trials, space.size(), attempts=remaining)
    if remaining > 0 and not budget.spent(study):
        _refuse_parallel_sqlite(study, reference)
        require_labels(questions)  # before any trial: every question must have its gold answer
        objective = _Objective(space=space, questions=list(questions),
                               lm_factory=lm_factory or (lambda: lm), batch_size=batch_size, multi=multi,
                               num_threads=num_threads, limit=trials)
        clock = [] if on_trial is None else [_trial_clock(on_trial, trials)]
        # more attempts than configurations still to evaluate: a re-proposed configuration is closed as a
        # duplicate (no request) and another sampled; the budget stops the loop at `trials` distinct ones
        study.optimize(objective, n_trials=remaining + budget.stuck + space.size(), callbacks=[budget, *clock])
        if objective.interrupted:
            raise KeyboardInterrupt
        if objective.aborted is not None:
            raise objective.aborted
    return special_set_from_study(study, dataset=dataset, objectives=objectives, sampler=sampler, seed=seed,
                                  trials=trials, storage=reference, space_size=space.size(), tuning=tuning)


def _lm_name(lm: dspy.BaseLM | None, factory: Callable[[], dspy.BaseLM] | None) -> str:
    """The model a study's answers come from, when the caller names no server: the LM's model string."""
    from teammed.redact import redact

    model = getattr(lm, "model", None) if lm is not None else None
    base = (getattr(lm, "kwargs", None) or {}).get("api_base") if lm is not None else None
    return redact(f"{model} @ {base}" if base else str(model)) if model else "an LM built by lm_factory"


def open_study(*, storage: str | None, study_name: str, out_dir: Path | str) -> optuna.Study:
    """An existing study, found the way `search_special_set` stores it (e.g. for `search_report`)."""
    backend, reference = open_storage(storage, Path(out_dir))
    if study_name not in optuna.get_all_study_names(storage=backend):
        raise ConfigError(f"no study {study_name!r} in {reference}; check --study and --storage")
    return optuna.load_study(study_name=study_name, storage=backend)
