"""A data set's special set: the configuration a search chose, its dev score and what was tried, as one
JSON file (`SpecialSet`; the study's storage with any password masked)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState
from pydantic import BaseModel, ConfigDict

from teammed.config import COMPONENTS, TeamworkConfig
from teammed.errors import ConfigError, WorkFailed
from teammed.optimizers._evaluated import STATS, Row, best_row, evaluated_rows, pareto_front, runner_up_test

__all__ = ["SpecialSet", "special_set_from_study", "write_special_set", "load_special_set", "FORMAT",
           "NoTrialSucceeded"]

logger = logging.getLogger(__name__)

FORMAT = "teammed-special-set/1"
_PUBLIC = ("trial", "state", "components", "config", *STATS)


class NoTrialSucceeded(WorkFailed):
    """No trial of the study ran to completion: there is no Special Set to write."""


class SpecialSet(BaseModel):
    """The outcome of a search: the chosen configuration, its dev score and what was tried."""

    model_config = ConfigDict(frozen=True)

    format: str = FORMAT
    dataset: str | None
    components: list[str]
    config: dict[str, Any]
    dev: dict[str, Any]
    objectives: list[str]
    sampler: str
    seed: int
    trials: dict[str, int]
    study: dict[str, str]
    pareto_front: list[dict[str, Any]] | None
    evaluated: list[dict[str, Any]]
    created: str
    tuning: dict[str, Any] | None = None  # data set identity and the question ids the search was tuned on
    # the winner against the most accurate other configuration: is its lead within noise?
    runner_up: dict[str, Any] | None = None
    measured_on: str | None = None  # the model and server whose answers chose it (credentials masked)


def _public(row: Row) -> dict[str, Any]:
    return {k: row[k] for k in _PUBLIC}


def special_set_from_study(study: optuna.Study, *, dataset: str | None, objectives: str, sampler: str,
                           seed: int, trials: int, storage: str, space_size: int,
                           tuning: dict[str, Any] | None = None) -> SpecialSet:
    """The most accurate configuration evaluated to the end (the cheaper on ties), and the record."""
    all_trials = study.get_trials(deepcopy=False)
    rows = evaluated_rows(all_trials)
    best = best_row(rows)
    if best is None:
        failed = [t for t in all_trials if t.state == TrialState.FAIL]
        why = f" (e.g. {failed[-1].user_attrs['error']})" if failed and failed[-1].user_attrs.get("error") else ""
        raise NoTrialSucceeded(f"no trial of study {study.study_name!r} ran to completion: {len(failed)} failed"
                               f"{why}; no Special Set was written. Fix the backend (see the log), then run the "
                               f"search again to resume it")
    counts = _trial_counts(all_trials)
    if len(rows) >= space_size:
        logger.info("study %s evaluated all %d configurations of the space", study.study_name, space_size)
    elif len(rows) < trials and not counts["running"]:
        logger.warning("study %s holds %d distinct evaluated configurations of the %d requested (run the "
                       "search again to resume)", study.study_name, len(rows), trials)
    # the study's last completion, not the clock: every worker that writes the Special Set writes the same bytes
    ends = [t.datetime_complete for t in all_trials if t.datetime_complete is not None]
    created = max(ends).astimezone(UTC) if ends else datetime.now(UTC)
    multi = objectives == "accuracy,tokens"
    return SpecialSet(
        dataset=dataset,
        components=[c for c in COMPONENTS if best["config"].get(c)],
        config=best["config"],
        dev={k: best[k] for k in (*STATS, "trial")},
        objectives=objectives.split(","),
        sampler=sampler,
        seed=seed,
        trials={"requested": trials, **counts, "distinct_configs": len(rows)},
        study={"storage": storage, "study_name": study.study_name},
        pareto_front=[_public(r) for r in pareto_front(rows)] if multi else None,
        evaluated=[_public(r) for r in rows],
        created=created.isoformat(timespec="seconds"),
        tuning=tuning,
        runner_up=runner_up_test(rows, best),
        measured_on=(study.user_attrs.get("search") or {}).get("measured_on"),
    )


def _trial_counts(all_trials: Sequence[FrozenTrial]) -> dict[str, int]:
    """Trials by state (duplicates of an earlier configuration apart), running ones and duplicates."""
    from teammed.optimizers._storage import worker_gone

    over = [t for t in all_trials if t.user_attrs.get("over_budget")]  # closed: every trial asked for was taken
    duplicates = [t for t in all_trials if t.user_attrs.get("duplicate_of") is not None and t not in over]
    counts = {state.name.lower(): sum(t.state == state and t.user_attrs.get("duplicate_of") is None
                                      for t in all_trials)
              for state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)}
    # trials live workers are still evaluating: the worker that finishes last writes the Special Set
    counts["running"] = sum(t.state == TrialState.RUNNING and t.user_attrs.get("duplicate_of") is None
                            and not worker_gone(t) for t in all_trials)
    counts["duplicates"] = len(duplicates)
    if over:
        counts["over_budget"] = len(over)
    return counts


def write_special_set(result: SpecialSet | dict[str, Any], path: Path | str) -> Path:
    """Write a special set as JSON (``special_sets/<dataset>.json``)."""
    from teammed.records import write_atomic

    special = result if isinstance(result, SpecialSet) else SpecialSet(**result)
    return write_atomic(Path(path), json.dumps(special.model_dump(mode="json"), indent=2) + "\n")


def load_special_set(path: Path | str) -> TeamworkConfig:
    """The configuration a special-set file chose."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"no special set at {path}; run the search first or check the path") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not a special set (invalid JSON: {exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or "config" not in data:
        raise ConfigError(f"{path} is not a special set of format {FORMAT!r}; write it with "
                          f"write_special_set")
    return TeamworkConfig.build(**data["config"])
