"""`teammed.runtime.quiet_collector`: what `teammed run` does to the garbage collector, and undoes."""

from __future__ import annotations

import gc
import json
import threading

import pytest

from teammed import runtime
from teammed.cli import main


@pytest.fixture(autouse=True)
def _collector_as_python_ships_it():
    before = gc.get_threshold()
    gc.unfreeze()
    yield
    gc.set_threshold(*before)
    gc.unfreeze()
    gc.enable()


def test_quiet_collector_freezes_and_restores_the_thresholds():
    before = gc.get_threshold()
    alive = [object() for _ in range(10)]  # noqa: F841 - alive when the block starts
    with runtime.quiet_collector():
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (runtime.YOUNG_THRESHOLD, *before[1:])
        with runtime.quiet_collector(young=50_000):  # nested: the outer block's settings stay
            assert gc.get_threshold()[0] == runtime.YOUNG_THRESHOLD
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_quiet_collector_restores_after_an_error_and_leaves_a_disabled_collector_alone():
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), runtime.quiet_collector():
        raise RuntimeError("boom")
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    gc.disable()
    with runtime.quiet_collector():
        assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    assert not gc.isenabled()


def test_overlapping_blocks_in_threads_are_set_by_the_first_and_restored_by_the_last():
    before = gc.get_threshold()
    entered, release = threading.Barrier(2), threading.Event()

    def inner() -> None:
        with runtime.quiet_collector():
            entered.wait()
            release.wait(5)

    thread = threading.Thread(target=inner)
    with runtime.quiet_collector():
        thread.start()
        entered.wait()
    assert gc.get_threshold()[0] == runtime.YOUNG_THRESHOLD  # the thread's block is still open
    assert gc.get_freeze_count() > 0
    release.set()
    thread.join(5)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_objects_the_program_froze_itself_stay_frozen():
    gc.freeze()
    frozen = gc.get_freeze_count()
    try:
        with runtime.quiet_collector():
            assert gc.get_threshold()[0] == runtime.YOUNG_THRESHOLD
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_teammed_run_answers_its_questions_under_the_quiet_collector(tmp_path, monkeypatch):
    import teammed.runner as runner

    seen: list[tuple[int, int]] = []
    answer = runner.run_questions

    def watched(*args, **kwargs):
        seen.append((gc.get_threshold()[0], gc.get_freeze_count()))
        return answer(*args, **kwargs)

    monkeypatch.setattr(runner, "run_questions", watched)
    before = gc.get_threshold()
    assert main(["run", "--dataset", "demo", "--n", "3", "--model", "scripted", "--no-cache",
                 "--out", str(tmp_path / "run")]) == 0
    assert seen and seen[0][0] == runtime.YOUNG_THRESHOLD and seen[0][1] > 0
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and not any(r.get("failed") for r in rows)
