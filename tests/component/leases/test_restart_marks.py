"""A worker stopping with a restart grace marks each lease it keeps as its last write (issue 28, point 1):
after a renewal in flight landed first, on what it reads; not at all once the lease moved on. A 2.x
worker back from its restart takes its marked leases at once; another worker's taker leaves them."""

from __future__ import annotations

from random import Random

from kcl_daemon.core.leases.restart_grace import grace_until
from kcl_daemon.leases.coordinator import CoordinatorConfig, LeaseCoordinator
from tests.support.clocks import SteppedClock
from tests.support.fakes import FakeTable, shards

NOW = 1_800_000_000.0
KEY = "shardId-000000000000"


def _coordinator(table: FakeTable, worker: str = "me", clock: SteppedClock | None = None) -> LeaseCoordinator:
    config = CoordinatorConfig(worker_id=worker, failover_s=2.0)
    return LeaseCoordinator(table, config, clock or SteppedClock(), rng=Random(1), wall=lambda: NOW)


async def test_each_kept_lease_is_marked_even_after_a_renewal_in_flight_landed_first() -> None:
    table = FakeTable(shards(2))
    coordinator = _coordinator(table)
    await coordinator.take_once()
    assert set(coordinator.held) == {KEY, "shardId-000000000001"}
    # a renewal sent before the stop lands after the keeper forgot the lease: our counter is stale
    table.items[KEY] = table.items[KEY].renewed()
    assert await coordinator.keep_for_restart(KEY, NOW + 30)
    assert await coordinator.keep_for_restart("shardId-000000000001", NOW + 30)
    assert all(grace_until(lease, NOW) == NOW + 30 for lease in table.items.values())
    assert not coordinator.held and coordinator.keeper.keys() == []


async def test_a_lease_that_moved_on_is_not_marked() -> None:
    table = FakeTable(shards(1))
    coordinator = _coordinator(table)
    await coordinator.take_once()
    table.items[KEY] = table.items[KEY].taken_by("thief")
    assert not await coordinator.keep_for_restart(KEY, NOW + 30)
    assert grace_until(table.items[KEY], NOW) is None and table.items[KEY].lease_owner == "thief"


async def test_the_worker_back_takes_its_marked_leases_and_another_leaves_them() -> None:
    table = FakeTable(shards(2))
    before = _coordinator(table)
    await before.take_once()
    for key in list(before.held):
        assert await before.keep_for_restart(key, NOW + 30)
    # every counter has stood still for ten failovers: expired and very old, but for the marks
    clock = SteppedClock()
    other = _coordinator(table, "other", clock)
    await other.take_once()
    clock.now += 20.0
    plan = await other.take_once()
    assert plan.all == () and plan.evictions == () and not other.held
    back = _coordinator(table)
    plan = await back.take_once()
    assert sorted(back.held) == sorted(table.items) and {t.kind.value for t in plan.takes} == {"available"}
    assert all(
        lease.lease_owner == "me" and grace_until(lease, NOW) is None for lease in table.items.values()
    )
