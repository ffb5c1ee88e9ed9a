"""`RequestSlots`: threads and coroutines share a deployment's request slots; coroutines wait
without polling, a cancelled wait never keeps a slot, and closing ends every wait."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from teammed.backends.slots import RequestSlots


def test_never_more_than_the_limit_in_use_across_threads_and_coroutines():
    slots = RequestSlots(3)
    in_use, peak, lock = [0], [0], threading.Lock()

    def enter() -> None:
        with lock:
            in_use[0] += 1
            peak[0] = max(peak[0], in_use[0])

    def leave() -> None:
        with lock:
            in_use[0] -= 1

    def thread_user() -> None:
        for _ in range(5):
            while not slots.acquire(timeout=0.2):
                pass
            enter()
            time.sleep(0.005)
            leave()
            slots.release()

    async def coroutine_user() -> None:
        for _ in range(5):
            await slots.aacquire()
            enter()
            await asyncio.sleep(0.005)
            leave()
            slots.release()

    async def coroutines() -> None:
        await asyncio.gather(*(coroutine_user() for _ in range(6)))

    threads = [threading.Thread(target=thread_user) for _ in range(4)]
    threads.append(threading.Thread(target=asyncio.run, args=(coroutines(),)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert peak[0] == 3 and in_use[0] == 0
    assert all(slots.acquire(timeout=0) for _ in range(3)) and not slots.acquire(timeout=0)


def test_waiting_coroutines_get_their_slots_in_order_without_polling():
    """200 coroutines wait on one slot held for 0.5 s: the wait costs next to no CPU (the old
    wait woke every 5 ms per coroutine), and the slots go out first come, first served."""
    slots = RequestSlots(1)
    order: list[int] = []

    async def user(i: int) -> None:
        await slots.aacquire()
        order.append(i)
        slots.release()

    async def go() -> float:
        await slots.aacquire()  # held while the others queue
        tasks = [asyncio.create_task(user(i)) for i in range(200)]
        await asyncio.sleep(0.05)
        cpu = time.process_time()
        await asyncio.sleep(0.5)
        spent = time.process_time() - cpu
        slots.release()
        await asyncio.gather(*tasks)
        return spent

    spent = asyncio.run(go())
    assert order == list(range(200))
    assert spent < 0.05, spent


def test_a_wait_cancelled_before_or_after_its_slot_came_keeps_no_slot():
    slots = RequestSlots(2)

    async def go() -> None:
        await slots.aacquire()
        await slots.aacquire()
        waiting = [asyncio.create_task(slots.aacquire()) for _ in range(3)]
        await asyncio.sleep(0.01)
        waiting[0].cancel()  # cancelled while waiting
        slots.release()  # handed to waiting[1]; cancelled before it runs: passed on to waiting[2]
        waiting[1].cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        assert waiting[2].done() and not waiting[2].cancelled()
        slots.release()
        slots.release()  # waiting[2]'s and the last of the first two

    asyncio.run(go())
    assert slots.acquire(timeout=0) and slots.acquire(timeout=0) and not slots.acquire(timeout=0)


def test_a_thread_releasing_hands_the_slot_to_a_coroutine_on_another_thread():
    slots = RequestSlots(1)
    assert slots.acquire(timeout=0)
    got = threading.Event()

    async def wait() -> None:
        await slots.aacquire()
        got.set()

    runner = threading.Thread(target=asyncio.run, args=(wait(),))
    runner.start()
    time.sleep(0.1)
    assert not got.is_set()
    slots.release()
    assert got.wait(5)
    runner.join(5)


def test_failing_the_waiters_ends_every_wait_and_refuses_new_ones():
    slots = RequestSlots(1)

    async def go() -> None:
        await slots.aacquire()
        waiting = [asyncio.create_task(slots.aacquire()) for _ in range(3)]
        await asyncio.sleep(0.01)
        slots.fail_waiters(RuntimeError("closed"))
        for task in waiting:
            with pytest.raises(RuntimeError, match="closed"):
                await task
        with pytest.raises(RuntimeError, match="closed"):
            await slots.aacquire()

    asyncio.run(go())


def test_a_limit_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        RequestSlots(0)


def test_threads_and_coroutines_take_turns_first_come_first_served():
    """One slot, a thread and coroutines all asking again and again: the thread is never starved
    (a release used to hand every slot to a waiting coroutine)."""
    slots = RequestSlots(1)
    thread_got = [0]
    stop = threading.Event()

    def thread_user() -> None:
        while not stop.is_set():
            if slots.acquire(timeout=0.2):
                thread_got[0] += 1
                time.sleep(0.002)
                slots.release()

    async def coroutine_user() -> None:
        while not stop.is_set():
            await slots.aacquire()
            await asyncio.sleep(0.002)
            slots.release()

    async def coroutines() -> None:
        await asyncio.gather(*(coroutine_user() for _ in range(4)))

    threads = [threading.Thread(target=thread_user), threading.Thread(target=asyncio.run, args=(coroutines(),))]
    for t in threads:
        t.start()
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join(10)
    assert thread_got[0] >= 20  # about a fifth of ~250 turns


def test_a_waiter_on_a_loop_that_stopped_is_passed_over_and_the_slot_stays_usable():
    slots = RequestSlots(1)
    assert slots.acquire(timeout=0)
    loop = asyncio.new_event_loop()
    waiter = loop.create_task(slots.aacquire())
    loop.run_until_complete(asyncio.sleep(0.05))  # queued; then its loop stops running
    releasing = threading.Thread(target=slots.release)
    releasing.start()
    releasing.join(5)
    waiter.cancel()
    loop.close()
    assert slots.acquire(timeout=0.5)  # the slot was not handed to a loop that could not take it
