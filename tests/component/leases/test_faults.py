"""LeaseCoordinator under lease-table faults, over an in-memory counter-fenced table and a fake clock.

Writes whose outcome is unknown (applied, then the reply is lost), corrupt items, a slow renewal next to
healthy ones, and a lease table deleted while running. The same faults against dynalite and moto_server,
through the fault-injecting proxy, are in ``tests/integration/leases/test_faults.py``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from random import Random

import pytest

from kcl_daemon.clock import SystemClock
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import CorruptLeaseItem
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.errors import (
    DependencyUnavailable,
    LeaseConflict,
    LeaseTableGone,
    Throttled,
    TransientNetwork,
)
from kcl_daemon.leases.coordinator import CoordinatorConfig, LeaseCoordinator
from tests.support.clocks import FakeClock, VirtualClock
from tests.support.fakes import FakeTable, Scan, owned_by, shards

KEY = "shardId-000000000000"
OTHER = "shardId-000000000001"


class FaultyTable(FakeTable):
    """A FakeTable whose next writes of a kind can apply and then fail (the reply lost), or fail."""

    def __init__(self, leases: list[Lease]) -> None:
        super().__init__(leases)
        self.faults: dict[str, list[str]] = {}  # method -> ["after" | "before" | "throttle" | "corrupt", ...]
        self.reads_fail = 0
        self.reads = 0

    def _fault(self, method: str, apply: Callable[[], Lease]) -> Lease:
        queue = self.faults.get(method, [])
        fault = queue.pop(0) if queue else None
        if fault == "before":
            raise TransientNetwork(f"{method}: InternalServerError (before)")
        if fault == "throttle":
            raise Throttled(f"{method}: ProvisionedThroughputExceededException")
        result = apply()
        if fault == "after":
            raise TransientNetwork(f"{method}: read timeout (after the write applied)")
        if fault == "corrupt":
            raise CorruptLeaseItem(result.lease_key, "throughputKBps", "'fast' is not a number")
        return result

    def get_lease(self, lease_key: str, *, consistent: bool = False) -> Lease | None:
        self.reads += 1
        if self.reads_fail:
            self.reads_fail -= 1
            raise TransientNetwork("get: connection reset")
        return super().get_lease(lease_key, consistent=consistent)

    def renew(self, lease: Lease) -> Lease:
        return self._fault("renew", lambda: FakeTable.renew(self, lease))

    def take(self, lease: Lease, owner: str) -> Lease:
        return self._fault("take", lambda: FakeTable.take(self, lease, owner))

    def checkpoint(self, lease: Lease, checkpoint: ExtendedSequenceNumber, **kw: object) -> Lease:
        return self._fault("checkpoint", lambda: FakeTable.checkpoint(self, lease, checkpoint, **kw))

    def release(self, lease: Lease) -> Lease:
        return self._fault("release", lambda: FakeTable.release(self, lease))


def coordinator_for(table: FakeTable, clock: object, failover_s: float = 10.0) -> LeaseCoordinator:
    config = CoordinatorConfig(worker_id="me", failover_s=failover_s)
    return LeaseCoordinator(table, config, clock, rng=Random(1))  # type: ignore[arg-type]


# -- 1. unknown outcomes -------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["after", "before"])
async def test_a_checkpoint_with_an_unknown_outcome_is_reconciled_and_the_lease_kept(
    fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    table = FaultyTable(shards(1))
    coordinator = coordinator_for(table, FakeClock())
    lost: list[str] = []
    coordinator.listeners.lost.append(lost.append)
    await coordinator.take_once()
    table.faults["checkpoint"] = [fault]
    written = await coordinator.checkpoint(KEY, ExtendedSequenceNumber("42"))
    assert written == table.items[KEY] and written.checkpoint == ExtendedSequenceNumber("42")
    await coordinator.renew_once()
    assert KEY in coordinator.held and not lost
    assert table.items[KEY].lease_owner == "me"
    assert "owner me, counter 2, checkpoint 42" in caplog.text or fault == "before"


@pytest.mark.parametrize("method", ["renew", "take", "release"])
async def test_other_writes_applied_before_the_reply_was_lost_are_not_mistaken_for_loss(method: str) -> None:
    table = FaultyTable(shards(1))
    coordinator = coordinator_for(table, FakeClock())
    lost: list[str] = []
    coordinator.listeners.lost.append(lost.append)
    if method == "take":
        table.faults["take"] = ["after"]
    await coordinator.take_once()
    assert KEY in coordinator.held, "a take applied before its reply was lost is ours"
    if method == "renew":
        table.faults["renew"] = ["after", "after"]
        await coordinator.renew_once()
        await coordinator.renew_once()
        assert KEY in coordinator.held and table.items[KEY].lease_counter == 3
    if method == "release":
        table.faults["release"] = ["after"]
        assert await coordinator.release(KEY)
        assert table.items[KEY].lease_owner is None
    await coordinator.renew_once()
    assert not lost


async def test_a_throttled_write_is_retried_without_a_re_read(caplog: pytest.LogCaptureFixture) -> None:
    table = FaultyTable(shards(1))
    coordinator = coordinator_for(table, FakeClock())
    lost: list[str] = []
    coordinator.listeners.lost.append(lost.append)
    await coordinator.take_once()
    table.faults["checkpoint"] = ["throttle", "throttle"]
    table.faults["renew"] = ["throttle"]
    with caplog.at_level(logging.WARNING):
        written = await coordinator.checkpoint(KEY, ExtendedSequenceNumber("7"))
        await coordinator.renew_once()
    assert written.checkpoint == ExtendedSequenceNumber("7") and KEY in coordinator.held and not lost
    assert table.reads == 0, "a throttled write was rejected unapplied: re-reading only adds load"
    # the first failed attempt of each write is a warning, the ones after it are debug lines
    assert caplog.text.count("ProvisionedThroughputExceededException") == 2


async def test_an_unknown_outcome_whose_re_read_fails_too_keeps_the_lease_and_retries() -> None:
    table = FaultyTable(shards(1))
    coordinator = coordinator_for(table, FakeClock())
    await coordinator.take_once()
    table.faults["checkpoint"] = ["after"]
    table.reads_fail = 1
    written = await coordinator.checkpoint(KEY, ExtendedSequenceNumber("7"))
    assert written.checkpoint == ExtendedSequenceNumber("7") and KEY in coordinator.held


async def test_only_a_different_owner_means_lost_and_the_log_says_what_was_seen(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = FaultyTable(shards(1))
    coordinator = coordinator_for(table, FakeClock())
    await coordinator.take_once()
    table.items[KEY] = table.items[KEY].taken_by("thief")
    with caplog.at_level(logging.INFO), pytest.raises(LeaseConflict, match="owner thief, counter 2"):
        await coordinator.checkpoint(KEY, ExtendedSequenceNumber("9"))
    assert KEY not in coordinator.held
    assert "lease shardId-000000000000 lost: the table shows owner thief, counter 2" in caplog.text


# -- 2. independent renewals, deadlines from the lease's remaining time ----------------------------


class BlockingTable(FakeTable):
    """Renewals of one lease hang (a stuck connection) until released."""

    def __init__(self, leases: list[Lease], stuck: str) -> None:
        super().__init__(leases)
        self.stuck = stuck
        self.release_stuck = threading.Event()
        self.renewals: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def renew(self, lease: Lease) -> Lease:
        with self._lock:
            self.renewals.setdefault(lease.lease_key, []).append(time.monotonic())
        if lease.lease_key == self.stuck:
            self.release_stuck.wait(10)
        with self._lock:
            return super().renew(lease)


async def test_a_hanging_renewal_delays_no_other_lease_and_stops_its_own_deliveries_in_time() -> None:
    failover = 1.5
    table = BlockingTable(shards(2), stuck=OTHER)
    coordinator = coordinator_for(table, SystemClock(), failover_s=failover)
    await coordinator.take_once()
    taken_at = time.monotonic()
    renewer = asyncio.create_task(coordinator.run_renewer())
    try:
        await asyncio.sleep(2.2)
        healthy = table.renewals.get(KEY, [])
        assert len(healthy) >= 4, f"the healthy lease was renewed {len(healthy)} times in 2.2s"
        assert coordinator.may_deliver(KEY, 0.0)
        assert not coordinator.may_deliver(OTHER, 0.0), "the lease whose renewal hangs delivers nothing"
        until = coordinator.keeper.deliver_until(OTHER)
        assert until <= taken_at + failover, "stopped before anyone else may see it expire"
        assert len(table.renewals[OTHER]) == 2, "one attempt and its hedged twin, both stuck: no more"
    finally:
        renewer.cancel()
        table.release_stuck.set()
        await asyncio.gather(renewer, return_exceptions=True)


async def test_deliveries_stop_at_the_local_expiry_and_the_lease_is_given_up_a_failover_later() -> None:
    table = FaultyTable(shards(1))
    clock = VirtualClock(1000.0)
    coordinator = coordinator_for(table, clock, failover_s=10.0)
    lost_at: list[float] = []
    coordinator.listeners.lost.append(lambda key: lost_at.append(clock.now))
    await coordinator.take_once()
    table.faults["renew"] = ["before"] * 100_000
    table.reads_fail = 100_000
    renewer = asyncio.create_task(coordinator.run_renewer())
    await clock.run(lambda: not coordinator.may_deliver(KEY, 0.0), limit_s=100)
    assert 1000.0 + 8.5 <= clock.now <= 1000.0 + 9.0 + 0.3, "deliveries stop at the local expiry"
    await clock.run(lambda: bool(lost_at), limit_s=100)
    renewer.cancel()
    await asyncio.gather(renewer, return_exceptions=True)
    assert lost_at and 1000.0 + 19.0 <= lost_at[0] <= 1000.0 + 19.0 + 0.3


# -- 3. corrupt items ---------------------------------------------------------------------------------


async def test_a_corrupt_held_lease_is_given_up_alone_and_the_renewer_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = FaultyTable(shards(2))
    coordinator = coordinator_for(table, FakeClock())
    lost: list[str] = []
    coordinator.listeners.lost.append(lost.append)
    await coordinator.take_once()
    await coordinator.take_once()
    assert set(coordinator.held) == {KEY, OTHER}
    corrupt_first = [KEY, OTHER][sorted(coordinator.held).index(KEY)]
    original = table.renew

    def renew(lease: Lease) -> Lease:
        if lease.lease_key == corrupt_first:
            raise CorruptLeaseItem(lease.lease_key, "throughputKBps", "'fast' is not a number")
        return original(lease)

    table.renew = renew  # type: ignore[method-assign]
    await coordinator.renew_once()  # must not raise
    assert lost == [corrupt_first] and set(coordinator.held) == {KEY, OTHER} - {corrupt_first}
    assert "throughputKBps" in caplog.text


async def test_the_steal_re_read_of_a_corrupt_item_skips_that_lease_only() -> None:
    table = FaultyTable(owned_by("victim", 4))
    coordinator = coordinator_for(table, FakeClock())

    def get_lease(lease_key: str, *, consistent: bool = False) -> Lease | None:
        raise CorruptLeaseItem(lease_key, "leaseCounter", "missing")

    table.get_lease = get_lease  # type: ignore[method-assign]
    plan = await coordinator.take_once()  # must not raise
    assert plan.steals and not coordinator.held


# -- 6. the lease table deleted while running -----------------------------------------------------


class DeletedTable(FakeTable):
    def __init__(self, leases: list[Lease]) -> None:
        super().__init__(leases)
        self.deleted = False

    def _gone(self) -> None:
        if self.deleted:
            raise DependencyUnavailable(
                "renew lease: ResourceNotFoundException: Requested resource not found"
            )

    def renew(self, lease: Lease) -> Lease:
        self._gone()
        return super().renew(lease)

    def list_leases(self, *, consistent: bool = False) -> Scan:
        self._gone()
        return super().list_leases()

    def get_lease(self, lease_key: str, *, consistent: bool = False) -> Lease | None:
        self._gone()
        return super().get_lease(lease_key)


async def test_a_deleted_lease_table_stops_deliveries_then_fails_the_renewer_after_the_failover_time() -> (
    None
):
    table = DeletedTable(shards(2))
    clock = VirtualClock(1000.0)
    coordinator = coordinator_for(table, clock)
    await coordinator.take_once()
    table.deleted = True
    deleted_at = clock.now
    renewer = asyncio.create_task(coordinator.run_renewer())
    stopped_at: dict[str, float] = {}

    def check() -> bool:
        for key in (KEY, OTHER):
            if not coordinator.may_deliver(key, 0.0):
                stopped_at.setdefault(key, clock.now)
        return renewer.done()

    await clock.run(check, limit_s=100)
    with pytest.raises(LeaseTableGone, match="not recreated"):
        renewer.result()
    assert set(stopped_at) == {KEY, OTHER}
    assert all(at <= deleted_at + 9.0 + 0.3 for at in stopped_at.values()), "children stopped in time"
    assert clock.now - deleted_at >= 10.0
