"""teammed.interrupts: workers whose threads leave SIGINT/SIGTERM to the main thread, waits that stay
attentive to signals, and a run that does not keep every finished question's full row alive."""

from __future__ import annotations

import gc
import signal
import threading
import time
import weakref

from teammed import interrupts


class _Answer:
    """Stands in for a question's full row: something big a finished future would hold."""


def test_the_workers_keep_no_finished_call_and_as_completed_holds_none_it_handed_out():
    pool = interrupts.workers()
    consumed: list[weakref.ref[_Answer]] = []
    for future in interrupts.submitted_as_completed(lambda _: pool.submit(_Answer), range(8), window=8):
        consumed.append(weakref.ref(future.result()))
        del future
        gc.collect()
        assert all(ref() is None for ref in consumed), "a result handed out is still referenced"
    assert len(consumed) == 8


def test_threads_of_the_workers_block_the_stop_signals_and_the_main_thread_does_not():
    wanted = {signal.SIGINT, signal.SIGTERM}
    assert wanted <= set(interrupts.workers().submit(signal.pthread_sigmask, signal.SIG_BLOCK, []).result())
    assert not wanted & set(signal.pthread_sigmask(signal.SIG_BLOCK, []))


def test_a_main_thread_wait_wakes_every_slice():
    """The main thread returns to Python between slices (where a pending handler runs)."""
    slow = interrupts.workers().submit(time.sleep, 3 * interrupts.SLICE_S)
    calls = []
    real_wait = interrupts.cf.wait

    def counting_wait(*args, **kwargs):
        calls.append(kwargs.get("timeout"))
        return real_wait(*args, **kwargs)

    interrupts.cf.wait = counting_wait
    try:
        interrupts.result(slow)
    finally:
        interrupts.cf.wait = real_wait
    assert len(calls) >= 2 and set(calls) == {interrupts.SLICE_S}


def test_submitted_as_completed_keeps_at_most_its_window_submitted_and_stops_when_told():
    pool = interrupts.workers()
    submitted: list[int] = []
    most = 0
    yielded = 0

    def submit(item: int):
        submitted.append(item)
        return pool.submit(lambda: item)

    for future in interrupts.submitted_as_completed(submit, range(40), window=3):
        most = max(most, len(submitted) - yielded)
        yielded += 1
        assert future.result() in range(40)
    assert sorted(submitted) == list(range(40)) and yielded == 40 and most <= 3

    submitted.clear()
    go = threading.Event()
    go.set()
    for _ in interrupts.submitted_as_completed(submit, range(40), window=2, more=go.is_set):
        if len(submitted) >= 5:
            go.clear()  # a run that is stopping submits nothing more
    assert 5 <= len(submitted) <= 6
