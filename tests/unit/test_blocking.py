"""kcl_daemon.blocking: a bounded, named pool of daemon threads with a cheap path for coroutines."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from kcl_daemon.blocking import BlockingPool, run_blocking


async def test_run_returns_results_raises_errors_and_names_its_threads() -> None:
    pool = BlockingPool(4, "unit")
    try:
        assert await pool.run(lambda a, b: a + b, 2, 3) == 5
        assert (await pool.run(lambda: threading.current_thread().name)).startswith("unit_")
        with pytest.raises(KeyError, match="k"):
            await pool.run(lambda: {}["k"])
        loop = asyncio.get_running_loop()
        assert await loop.run_in_executor(pool, lambda: 7) == 7  # the Executor interface
        assert pool.submit(lambda: 8).result(5) == 8
    finally:
        pool.shutdown()


async def test_threads_start_only_for_calls_in_flight_up_to_the_bound() -> None:
    pool = BlockingPool(3, "unit")
    release = threading.Event()
    try:
        for _ in range(20):
            await pool.run(lambda: None)
        assert pool.threads == 1  # one call at a time: one thread reused
        blocked = [asyncio.ensure_future(pool.run(release.wait)) for _ in range(6)]
        await asyncio.sleep(0.05)
        assert pool.threads == 3
        release.set()
        assert await asyncio.gather(*blocked) == [True] * 6
        assert all(thread.daemon for thread in threading.enumerate() if thread.name.startswith("unit_"))
    finally:
        pool.shutdown()


async def test_a_cancelled_caller_skips_a_call_not_yet_begun() -> None:
    pool = BlockingPool(1, "unit")
    release = threading.Event()
    ran: list[str] = []
    try:
        first = asyncio.ensure_future(pool.run(release.wait))
        second = asyncio.ensure_future(pool.run(lambda: ran.append("second")))
        await asyncio.sleep(0.05)
        second.cancel()
        release.set()
        assert await first is True
        with pytest.raises(asyncio.CancelledError):
            await second
        await pool.run(lambda: None)
        assert ran == []
    finally:
        pool.shutdown()


async def test_run_blocking_takes_either_kind_of_pool() -> None:
    pool = BlockingPool(1, "unit")
    with ThreadPoolExecutor(1) as plain:
        assert await run_blocking(pool, lambda x: x * 2, 4) == 8
        assert await run_blocking(plain, lambda x: x * 3, 4) == 12
    pool.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        await pool.run(lambda: None)
    with pytest.raises(ValueError, match="at least 1"):
        BlockingPool(0, "none")


def test_a_call_that_ends_after_its_event_loop_closed_is_dropped_quietly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A second signal stops the daemon at once: the loop closes while a read is still on a thread.
    errors: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    pool = BlockingPool(1, "unit")
    started, release, done = threading.Event(), threading.Event(), threading.Event()

    def slow() -> int:
        started.set()
        release.wait(5)
        return 1

    loop = asyncio.new_event_loop()
    call = loop.create_task(pool.run(slow))
    loop.run_until_complete(asyncio.to_thread(started.wait, 5))
    call.cancel()
    loop.close()
    release.set()
    pool.submit(done.set).result(5)  # the thread went on to its next call: it did not die
    assert done.is_set() and errors == []
    pool.shutdown()
