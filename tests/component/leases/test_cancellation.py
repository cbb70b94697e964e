"""A cancelled lease call is cancelled, whenever the cancellation lands.

The flaky ``test_real_time_failover_with_short_intervals`` had one cause: ``asyncio.wait_for`` on
Python 3.11 returns the inner result when the cancellation arrives after the inner call finished but
before the waiting task resumed (cpython gh-86296). A renewal loop cancelled in that instant went on
renewing for ever, and whoever awaited it hung. These tests cancel in exactly that instant.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kcl_daemon.clock import SystemClock
from kcl_daemon.leases.coordinator import CoordinatorConfig, LeaseCoordinator
from tests.support.fakes import FakeTable, shards


def _coordinator() -> LeaseCoordinator:
    return LeaseCoordinator(FakeTable(shards(1)), CoordinatorConfig(worker_id="me"), SystemClock())


async def test_a_call_cancelled_as_its_answer_arrives_raises_cancelled_error() -> None:
    coordinator = _coordinator()
    pool = ThreadPoolExecutor(1)
    waiter: asyncio.Task[Any] | None = None
    original = coordinator._call

    def call(pool: ThreadPoolExecutor, fn: Callable[[], Any]) -> Any:
        future = asyncio.get_running_loop().run_in_executor(pool, fn)
        # the cancellation lands in the loop iteration in which the answer arrives
        future.add_done_callback(lambda _: waiter.cancel() if waiter is not None else None)
        return future

    coordinator._call = call  # type: ignore[method-assign]
    loop = asyncio.get_running_loop()
    waiter = asyncio.create_task(coordinator._bounded(pool, lambda: "answer", loop.time() + 5, "renew"))
    with pytest.raises(asyncio.CancelledError):
        await waiter
    coordinator._call = original  # type: ignore[method-assign]
    pool.shutdown()


async def test_a_cancelled_wait_for_the_lease_lock_is_a_cancellation_and_leaves_the_lock_free() -> None:
    coordinator = _coordinator()
    key = "shardId-000000000000"
    loop = asyncio.get_running_loop()
    holder_entered = asyncio.Event()
    release_holder = asyncio.Event()

    async def holder() -> None:
        async with coordinator._locked(key, loop.time() + 5):
            holder_entered.set()
            await release_holder.wait()

    async def waiter() -> None:
        async with coordinator._locked(key, loop.time() + 5):
            raise AssertionError("never entered: cancelled while waiting")

    first = asyncio.create_task(holder())
    await holder_entered.wait()
    second = asyncio.create_task(waiter())
    await asyncio.sleep(0)
    second.cancel()
    release_holder.set()
    with pytest.raises(asyncio.CancelledError):
        await second
    await first
    async with asyncio.timeout(1):
        async with coordinator._locked(key, loop.time() + 5):
            pass  # the lock was not left taken by the cancelled waiter
