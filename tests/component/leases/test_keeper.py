"""The lease keeper's thread: renewals keep their deadline when the event loop is busy, a hung attempt
gets a hedged twin, and the delivery fence needs no event loop (real time, failover 1-1.5 s)."""

from __future__ import annotations

import asyncio
import threading
import time

from kcl_daemon.clock import SystemClock
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.leases.coordinator import CoordinatorConfig, LeaseCoordinator
from tests.support.fakes import FakeTable, shards

KEY = "shardId-000000000000"


class CountingTable(FakeTable):
    def __init__(self, count: int = 2) -> None:
        super().__init__(shards(count))
        self.lock = threading.Lock()
        self.renewals: dict[str, int] = {}
        self.hang_first_renewal_s = 0.0

    def renew(self, lease: Lease) -> Lease:
        with self.lock:
            n = self.renewals.get(lease.lease_key, 0)
            self.renewals[lease.lease_key] = n + 1
        if n == 0 and self.hang_first_renewal_s:
            time.sleep(self.hang_first_renewal_s)
        with self.lock:
            return super().renew(lease)


async def test_renewals_keep_their_deadline_while_the_event_loop_is_blocked() -> None:
    table = CountingTable()
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me", failover_s=1.0), SystemClock())
    lost: list[str] = []
    coordinator.listeners.lost.append(lost.append)
    await coordinator.take_once()
    await coordinator.take_once()
    renewer = asyncio.create_task(coordinator.run_renewer())
    await asyncio.sleep(0.1)
    try:
        time.sleep(2.5)  # noqa: ASYNC251 - the point: the event loop does nothing for 2.5 failover times
        assert all(coordinator.may_deliver(key, 0.0) for key in coordinator.held), "the fence needs no loop"
        await asyncio.sleep(0.1)
    finally:
        renewer.cancel()
        await asyncio.gather(renewer, return_exceptions=True)
    # every ~0.31 s, loop or no loop (about 8); a loop-bound renewer would manage at most one. The bound
    # leaves room for a machine loaded by the rest of the suite.
    assert min(table.renewals.values()) >= 4, table.renewals
    assert not lost and len(coordinator.held) == 2


async def test_a_hung_attempt_gets_a_hedged_twin_that_keeps_the_lease() -> None:
    table = CountingTable(1)
    table.hang_first_renewal_s = 2.0  # far beyond the deadline (1.35 s)
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me", failover_s=1.5), SystemClock())
    await coordinator.take_once()
    renewer = asyncio.create_task(coordinator.run_renewer())
    try:
        await asyncio.sleep(1.6)
        assert table.renewals[KEY] >= 2 and coordinator.may_deliver(KEY, 0.0)
        assert table.items[KEY].lease_counter >= 2, "the twin, fenced on the same counter, landed"
    finally:
        renewer.cancel()
        await asyncio.gather(renewer, return_exceptions=True)


def test_renew_now_waits_for_a_renewal_sent_after_it_not_for_one_already_in_flight() -> None:
    """The renewal in flight may come back with the item as it was before the call (say, before a
    leader marked it for hand-off): :meth:`LeaseKeeper.renew_now` answers only with a later one."""
    from concurrent.futures import ThreadPoolExecutor

    from kcl_daemon.core.leases.keeping import KeepTimings
    from kcl_daemon.leases.keeper import LeaseKeeper

    gate = threading.Event()

    class GatedTable(CountingTable):
        def renew(self, lease: Lease) -> Lease:
            if not self.renewals:
                assert gate.wait(5)
            return super().renew(lease)

    table = GatedTable(1)
    lease = table.items[KEY]
    taken = table.take(lease, "me")
    with ThreadPoolExecutor(2) as pool:
        keeper = LeaseKeeper(table, "me", KeepTimings.for_failover(10.0), pool)
        keeper.hold(taken, time.monotonic(), validated=False)  # adopted: a renewal goes out at once
        waiter = keeper.renew_now(KEY)
        gate.set()
        deadline = time.monotonic() + 5
        while not waiter.done() and time.monotonic() < deadline:
            keeper.tick()
            time.sleep(0.01)
        assert waiter.done()
        assert table.renewals[KEY] == 2, "the renewal in flight, then one sent after the call"


async def test_the_keeper_thread_sleeps_between_renewals() -> None:
    """The keeper thread wakes for what is due, not in a loop: with two leases renewed every ~3.3 s it
    passes a handful of times a second at most (a thread woken by its own passes spun, taking a core and
    the GIL from the event loop)."""
    table = CountingTable()
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me", failover_s=10.0), SystemClock())
    await coordinator.take_once()
    await coordinator.take_once()
    passes = 0
    tick = coordinator.keeper.tick

    def counted() -> float:
        nonlocal passes
        passes += 1
        return tick()

    coordinator.keeper.tick = counted  # type: ignore[method-assign]
    cpu = time.thread_time
    renewer = asyncio.create_task(coordinator.run_renewer())
    started = cpu()
    try:
        await asyncio.sleep(1.0)
    finally:
        renewer.cancel()
        await asyncio.gather(renewer, return_exceptions=True)
    assert len(coordinator.held) == 2
    # at most one pass per MAX_SLEEP_S plus the renewals' and answers' wake-ups; a spinning thread makes
    # tens of thousands
    assert passes <= 20, passes
    assert cpu() - started < 0.5


def test_checkpoints_wake_the_keeper_thread_only_for_what_is_due_sooner() -> None:
    """A checkpoint asked for is stepped where it is asked, and its answer where it arrives: neither makes
    the keeper thread pass over every lease (with 256 leases checkpointing each batch, a pass per
    answer kept the thread busy and took the GIL from the event loop). Its passes follow the renewals."""
    from concurrent.futures import ThreadPoolExecutor

    from kcl_daemon.core.leases.keeping import KeepTimings
    from kcl_daemon.core.sequence import ExtendedSequenceNumber
    from kcl_daemon.leases.keeper import LeaseKeeper

    table = CountingTable(64)
    with ThreadPoolExecutor(8) as pool:
        keeper = LeaseKeeper(table, "me", KeepTimings.for_failover(10.0), pool)
        now = time.monotonic()
        for lease in list(table.items.values()):
            keeper.hold(table.take(lease, "me"), now)
        passes = 0
        tick = keeper.tick

        def counted() -> float:
            nonlocal passes
            passes += 1
            return tick()

        keeper.tick = counted  # type: ignore[method-assign]
        keeper.start()
        try:
            keys = list(table.items)
            for n in range(640):
                keeper.checkpoint(keys[n % 64], ExtendedSequenceNumber(str(1000 + n))).result(5)
        finally:
            keeper.stop()
    assert all(
        table.items[key].checkpoint == ExtendedSequenceNumber(str(1576 + i)) for i, key in enumerate(keys)
    )
    # 1,280 events (640 asks, 640 answers); a pass for each of them is what this guards against
    assert passes <= 40, passes


async def test_renewals_never_queue_behind_checkpoints() -> None:
    """A checkpoint's first attempt runs on the checkpoint pool; renewals, and the hedged twin that keeps
    a lease whose checkpoint hangs, on the renewal pool. Both checkpoint threads hang here: the third
    lease's renewals and the two checkpoints' twins go on regardless."""
    from kcl_daemon.blocking import BlockingPool

    gate = threading.Event()

    class HangingCheckpoints(CountingTable):
        def __init__(self) -> None:
            super().__init__(3)
            self.threads: list[tuple[str, str]] = []

        def checkpoint(self, lease: Lease, checkpoint: ExtendedSequenceNumber, **kwargs: object) -> Lease:
            pool = threading.current_thread().name.rpartition("_")[0]
            self.threads.append(("checkpoint", pool))
            if pool == "lease-checkpoint":
                assert gate.wait(10)
            with self.lock:
                return super().checkpoint(lease, checkpoint, **kwargs)

    table = HangingCheckpoints()
    coordinator = LeaseCoordinator(
        table,
        CoordinatorConfig(worker_id="me", failover_s=1.5),
        SystemClock(),
        renew_pool=BlockingPool(2, thread_name_prefix="lease-renew"),
        checkpoint_pool=BlockingPool(2, thread_name_prefix="lease-checkpoint"),
    )
    for _ in range(3):
        await coordinator.take_once()
    first, second, third = sorted(coordinator.held)
    renewer = asyncio.create_task(coordinator.run_renewer())
    try:
        renewed_before = table.renewals.get(third, 0)
        written = await asyncio.wait_for(
            asyncio.gather(
                coordinator.checkpoint(first, ExtendedSequenceNumber("1")),
                coordinator.checkpoint(second, ExtendedSequenceNumber("2")),
            ),
            5,
        )
        assert [lease.checkpoint.sequence_number for lease in written] == ["1", "2"]
        await asyncio.sleep(1.0)  # three renewal periods of the third lease, the checkpoint pool stuck
        assert not gate.is_set()
        assert table.renewals.get(third, 0) >= renewed_before + 2, table.renewals
        assert all(coordinator.may_deliver(key, 0.0) for key in (first, second, third))
    finally:
        gate.set()
        renewer.cancel()
        await asyncio.gather(renewer, return_exceptions=True)
    assert table.threads[:2] == [("checkpoint", "lease-checkpoint")] * 2, "first attempts: their pool"
    assert ("checkpoint", "lease-renew") in table.threads[2:], "the twins: the renewal pool"
