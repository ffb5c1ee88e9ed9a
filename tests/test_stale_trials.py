"""Trials orphaned by a worker killed with kill -9 never stall or skew a resumed study (issue 23, item 5).

* `tune` / `reproduce` (the work queue): a worker killed between taking a cell's trial and recording
  itself on it left a RUNNING trial without a worker, which was never reaped: the resume waited for ever.
* `search`: a killed worker's RUNNING trial counted toward ``--trials``, so a resume finished short.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import optuna
import pytest
from optuna.trial import FrozenTrial, TrialState

from teammed.optimizers._storage import UNCLAIMED_S, open_storage, worker_gone
from teammed.optimizers.tune import open_tune_study
from teammed.optimizers.tune_queue import WorkQueue, cell_key

from .test_optimizers_search import finished, load, search

DEAD_WORKER = f"{socket.gethostname()}:99999999"  # a pid that cannot exist


def _orphan(study: optuna.Study, *, user_attrs: dict[str, Any], age_s: float) -> int:
    """A RUNNING trial started ``age_s`` seconds ago by a worker that is gone; its number."""
    started = datetime.now(UTC) - timedelta(seconds=age_s)
    template = FrozenTrial(number=-1, state=TrialState.RUNNING, value=None, datetime_start=started,
                           datetime_complete=None, params={}, distributions={}, user_attrs=user_attrs,
                           system_attrs={}, intermediate_values={}, trial_id=-1)
    trial_id = study._storage.create_new_trial(study._study_id, template_trial=template)
    return study._storage.get_trial(trial_id).number


def _run_bounded(queue: WorkQueue, cells: list[dict[str, Any]], *, timeout_s: float = 60.0) -> dict[str, Any]:
    """``queue.run(cells)`` in a thread; fails the test when it has not returned within ``timeout_s``."""
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["done"] = queue.run(cells, lambda cell: {"value": float(cell["i"]), "calls": 1})
        except BaseException as exc:  # reported by the test
            outcome["error"] = exc

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(timeout_s)
    assert not thread.is_alive(), f"the resumed queue still waits after {timeout_s:.0f} s with nothing running"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["done"]


# ---------------------------------------------------------------- tune / reproduce: the work queue
@pytest.mark.parametrize("storage", [None, "queue.journal"], ids=["sqlite", "journal"])
def test_a_cell_taken_by_a_worker_killed_before_recording_itself_is_reaped(tmp_path, storage):
    study, _ = open_tune_study(storage and str(tmp_path / storage), "q", tmp_path)
    cells = [{"kind": "x", "i": i} for i in range(3)]
    # the killed worker: it took cell 1's trial (RUNNING, the cell in its attributes) and died before
    # recording its worker and start time; that was a while ago
    orphan = _orphan(study, user_attrs={"cell_key": cell_key(cells[1]), "cell": cells[1]}, age_s=UNCLAIMED_S + 60)
    queue = WorkQueue(study, poll_s=0.01)  # the resume: tune and reproduce build the queue like this
    done = _run_bounded(queue, cells)
    assert {json.loads(k)["i"]: v["value"] for k, v in done.items()} == {0: 0.0, 1: 1.0, 2: 2.0}
    assert study._storage.get_trial(study._storage.get_trial_id_from_study_id_trial_number(
        study._study_id, orphan)).state == TrialState.FAIL


def test_a_cell_whose_start_time_was_never_recorded_is_reaped_by_the_storage_start_time(tmp_path):
    study, _ = open_tune_study(None, "q", tmp_path)
    cell = {"kind": "x", "i": 7}
    # worker recorded (on another host, so no pid to check), killed before recording "started"
    _orphan(study, user_attrs={"cell_key": cell_key(cell), "cell": cell, "worker": "elsewhere:1"}, age_s=3600)
    done = _run_bounded(WorkQueue(study, poll_s=0.01, stale_s=1800), [cell])
    assert done[cell_key(cell)]["value"] == 7.0


def test_a_live_worker_that_just_took_its_trial_is_not_reaped(tmp_path):
    study, _ = open_tune_study(None, "q", tmp_path)
    young = _orphan(study, user_attrs={}, age_s=1)
    trial = study.get_trials(states=(TrialState.RUNNING,))[0]
    assert trial.number == young and not worker_gone(trial)  # recording itself in a moment
    assert worker_gone(trial, now=time.time() + UNCLAIMED_S + 5)
    elsewhere = _orphan(study, user_attrs={"worker": "elsewhere:1", "started": time.time()}, age_s=1)
    trial = next(t for t in study.get_trials(states=(TrialState.RUNNING,)) if t.number == elsewhere)
    assert not worker_gone(trial, stale_s=1800) and worker_gone(trial, stale_s=1800, now=time.time() + 1801)


# ---------------------------------------------------------------- search
def test_search_replaces_a_killed_workers_trial_and_completes_the_requested_trials(tmp_path):
    first = search(tmp_path, trials=2, sampler="tpe")
    backend, _ = open_storage(None, tmp_path)
    study = optuna.load_study(study_name="planted", storage=backend)
    # killed mid-trial a moment ago: its heartbeat is fresh, its process on this host is gone
    dead = _orphan(study, user_attrs={"worker": DEAD_WORKER}, age_s=5)
    assert isinstance(backend, optuna.storages.RDBStorage)
    backend.record_heartbeat(backend.get_trial_id_from_study_id_trial_number(study._study_id, dead))
    # killed between Optuna taking the trial and the worker recording itself, a while ago
    unclaimed = _orphan(study, user_attrs={}, age_s=UNCLAIMED_S + 60)

    result = search(tmp_path, trials=3, sampler="tpe")
    study = load(first.study["storage"])
    assert len(finished(study)) == 3  # the orphans did not count toward --trials 3
    states = {t.number: t.state for t in study.get_trials()}
    assert states[dead] == TrialState.FAIL and states[unclaimed] == TrialState.FAIL
    assert result.trials["running"] == 0 and result.trials["complete"] + result.trials["pruned"] == 3


def test_search_on_a_journal_fails_the_orphan_instead_of_keeping_it_running(tmp_path):
    storage = str(tmp_path / "s.journal")
    search(tmp_path, trials=2, sampler="tpe", storage=storage)
    backend, _ = open_storage(storage, tmp_path)
    study = optuna.load_study(study_name="planted", storage=backend)
    dead = _orphan(study, user_attrs={"worker": DEAD_WORKER}, age_s=5)
    result = search(tmp_path, trials=3, sampler="tpe", storage=storage)
    assert len(finished(load(storage))) == 3 and result.trials["running"] == 0
    assert {t.number: t.state for t in load(storage).get_trials()}[dead] == TrialState.FAIL


def test_search_leaves_a_live_workers_trial_alone(tmp_path):
    first = search(tmp_path, trials=1, sampler="tpe")
    backend, _ = open_storage(None, tmp_path)
    study = optuna.load_study(study_name="planted", storage=backend)
    live = _orphan(study, user_attrs={"worker": f"{socket.gethostname()}:{os.getppid()}"}, age_s=5)
    search(tmp_path, trials=1, sampler="tpe")  # another live process on this host runs that trial
    assert {t.number: t.state for t in load(first.study["storage"]).get_trials()}[live] == TrialState.RUNNING
