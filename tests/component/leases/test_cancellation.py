"""A cancelled lease call is cancelled, whenever the cancellation lands.

The flaky ``test_real_time_failover_with_short_intervals`` had one cause: ``asyncio.wait_for`` on
Python 3.11 returns the inner result when the cancellation arrives after the inner call finished but
before the waiting task resumed (cpython gh-86296). A renewal loop cancelled in that instant went on
renewing for ever, and whoever awaited it hung. These tests cancel in exactly that instant.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kcl_daemon.clock import SystemClock
from kcl_daemon.core.leases.lease import Lease
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


class CountingTable(FakeTable):
    def __init__(self) -> None:
        super().__init__(shards(1))
        self.renewals = 0
        self.renewing = threading.Event()  # set after the third renewal

    def renew(self, lease: Lease) -> Lease:
        self.renewals += 1
        if self.renewals >= 3:
            self.renewing.set()
        return super().renew(lease)


async def test_a_cancelled_renewer_ends_and_no_renewal_follows() -> None:
    table = CountingTable()
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me", failover_s=0.6), SystemClock())
    await coordinator.take_once()
    renewer = asyncio.create_task(coordinator.run_renewer())
    assert await asyncio.to_thread(table.renewing.wait, 10)
    renewer.cancel()
    async with asyncio.timeout(2):
        with pytest.raises(asyncio.CancelledError):
            await renewer
    settled = table.renewals
    await asyncio.sleep(0.5)  # more than two renewal periods
    assert table.renewals == settled, "the lease was renewed after its renewer was cancelled"
