"""`RequestSlots`: never more than the limit in use, slots handed out first come first served, a
wait that gives up never keeps a slot, and a waiter's check can end its wait."""

from __future__ import annotations

import threading
import time

import pytest

from teammed.backends.slots import RequestSlots


def test_never_more_than_the_limit_in_use_across_threads():
    slots = RequestSlots(3)
    in_use, peak, lock = [0], [0], threading.Lock()

    def user() -> None:
        for _ in range(5):
            while not slots.acquire(timeout=0.2):
                pass
            with lock:
                in_use[0] += 1
                peak[0] = max(peak[0], in_use[0])
            time.sleep(0.005)
            with lock:
                in_use[0] -= 1
            slots.release()

    threads = [threading.Thread(target=user) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert peak[0] == 3 and in_use[0] == 0
    assert all(slots.acquire(timeout=0) for _ in range(3)) and not slots.acquire(timeout=0)


def test_waiting_threads_get_their_slots_in_the_order_they_asked():
    slots = RequestSlots(1)
    assert slots.acquire(timeout=0)
    order: list[int] = []

    def user(i: int) -> None:
        assert slots.acquire(timeout=10)
        order.append(i)
        slots.release()

    threads = []
    for i in range(6):
        threads.append(threading.Thread(target=user, args=(i,)))
        threads[-1].start()
        time.sleep(0.02)  # each is queued before the next asks
    slots.release()
    for t in threads:
        t.join(10)
    assert order == list(range(6))


def test_a_wait_that_times_out_or_is_given_up_by_its_check_keeps_no_slot():
    slots = RequestSlots(1, slice_s=0.02)
    assert slots.acquire(timeout=0)
    assert not slots.acquire(timeout=0.05)

    def stop() -> None:
        raise RuntimeError("the run is stopping")

    with pytest.raises(RuntimeError, match="stopping"):
        slots.acquire(check=stop)
    slots.release()
    assert slots.acquire(timeout=0) and not slots.acquire(timeout=0)


def test_a_limit_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        RequestSlots(0)
