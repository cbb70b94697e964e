"""LeaseCoordinator over an in-memory, counter-fenced lease table and a fake clock (no real waiting).

The integration tests run the same scenarios against moto_server and dynalite; these check the shell's
timing logic exactly, in simulated seconds.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import replace
from random import Random

import pytest

from kcl_daemon.core.leases.expiry import DUE_EPSILON_S
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.errors import LeaseConflict
from kcl_daemon.leases.coordinator import CoordinatorConfig, LeaseCoordinator
from tests.support.clocks import SteppedClock, VirtualClock
from tests.support.fakes import FakeTable, Scan, owned_by, shards
from tests.support.lease_fleet import CoordinatorFleet


async def test_three_workers_converge_and_two_take_over_when_one_stops() -> None:
    fleet = CoordinatorFleet(FakeTable(shards(12)), ["w-a", "w-b", "w-c"])
    await fleet.run_until(lambda: sorted(fleet.owners().values()) == [4, 4, 4], limit_s=600)

    fleet.stopped.add("w-c")  # stops renewing and taking, as if killed
    took = await fleet.run_until(lambda: sorted(fleet.owners().values()) == [6, 6], limit_s=120)
    # expiry passes: failover after the last renewal was seen, plus one pass (Java: two taker runs)
    bound = 10.0 + 2 * fleet.expiry_every + 0.2
    assert took <= bound, f"takeover took {took:.1f}s simulated, bound {bound:.1f}s"
    # the old owner's view: its leases are lost by its own clock once it cannot renew
    held = fleet.held()
    assert sum(len(h) for h in held.values()) == 12 and not held["w-a"] & held["w-b"]


async def test_a_replacement_worker_gets_a_dead_workers_leases_within_a_failover_of_the_death() -> None:
    """A replacement started after a worker died would, by its own observation, wait a failover from its
    first scan; the survivors, at their target, may not take more. They evict the dead worker's expired
    leases instead (taker step 7), and the replacement takes them at once."""
    fleet = CoordinatorFleet(FakeTable(shards(9)), ["w-a", "w-b", "w-c"])
    await fleet.run_until(lambda: sorted(fleet.owners().values()) == [3, 3, 3], limit_s=600)

    fleet.stopped.add("w-c")
    started = fleet.clock.now
    # the replacement starts 5 s after the death: its observation of w-c's leases begins then
    await fleet.run_until(lambda: fleet.clock.now >= started + 5.0, limit_s=10)
    fleet.add("w-d")
    await fleet.run_until(lambda: "w-c" not in fleet.owners(), limit_s=120)
    took = fleet.clock.now - started
    # Java's rule alone: not before the replacement's first scan (5 s) + failover; here: the failover
    # after the last renewal seen, half an expiry pass of grace, and a pass or two
    bound = 10.0 + 2 * fleet.expiry_every + 0.5 * fleet.expiry_every + 0.2
    assert took <= bound, f"the dead worker's leases moved after {took:.1f}s simulated, bound {bound:.1f}s"
    assert fleet.owners()["w-d"] >= 1


async def test_the_taker_wakes_when_an_expired_lease_is_due_for_eviction() -> None:
    table = FakeTable(owned_by("dead", 1))
    clock = VirtualClock(1000.0)
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me"), clock, rng=Random(1))
    await coordinator.take_once(steals=False)  # first seen now, owned: counts as renewed now
    assert coordinator.next_expiry() == pytest.approx(1010.0 + DUE_EPSILON_S)
    clock.now = 1010.2  # expired, not yet due for eviction (half a 1 s expiry pass of grace)
    assert coordinator.next_expiry() == pytest.approx(1010.5 + DUE_EPSILON_S)
    clock.now = 1010.6
    assert coordinator.next_expiry() is None


async def test_a_lease_whose_counter_moved_is_lost_on_the_next_renewal() -> None:
    table = FakeTable(shards(1))
    clock = SteppedClock()
    lost: list[str] = []
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me"), clock, rng=Random(1))
    coordinator.listeners.lost.append(lost.append)
    await coordinator.take_once()
    assert set(coordinator.held) == {"shardId-000000000000"}
    stolen = table.items["shardId-000000000000"].taken_by("thief")
    table.items[stolen.lease_key] = stolen
    await coordinator.renew_once()
    assert lost == ["shardId-000000000000"] and not coordinator.held


async def test_past_its_deadline_a_lease_delivers_nothing_until_a_renewal_lands() -> None:
    table = FakeTable(shards(2))
    clock = SteppedClock()
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me"), clock, rng=Random(1))
    await coordinator.take_once()
    key = "shardId-000000000000"
    assert coordinator.may_deliver(key, 0.0)
    clock.now += 10.5  # e.g. the renewals could not get through; the table still names us
    assert key in coordinator.held and not coordinator.may_deliver(key, 0.0)
    await coordinator.renew_once()  # nobody took it: the renewal lands, the records flow again
    assert set(coordinator.held) == {key, "shardId-000000000001"} and coordinator.may_deliver(key, 0.0)


async def test_a_lease_not_renewed_for_a_failover_time_past_its_deadline_is_given_up() -> None:
    table = FakeTable(shards(2))
    clock = SteppedClock()
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me"), clock, rng=Random(1))
    lost: list[str] = []
    coordinator.listeners.lost.append(lost.append)
    await coordinator.take_once()
    clock.now += 30.0  # past deadline (9 s) + the give-up time (10 s): lost without a write
    await coordinator.renew_once()
    await asyncio.sleep(0)
    assert not coordinator.held and sorted(lost) == ["shardId-000000000000", "shardId-000000000001"]


class SlowScanTable(FakeTable):
    """The scan returns the state at its start; while it ran, the owners renewed (or a lease moved)."""

    def __init__(self, leases: list[Lease], during_scan: dict[str, str | None]) -> None:
        super().__init__(leases)
        self.during_scan = during_scan  # lease key -> new owner (None: the same owner just renewed)

    def list_leases(self, *, consistent: bool = False) -> Scan:
        snapshot = super().list_leases()
        for key, new_owner in self.during_scan.items():
            lease = self.items[key]
            self.items[key] = lease.renewed() if new_owner is None else lease.taken_by(new_owner)
        return snapshot


async def test_a_steal_after_a_slow_scan_uses_the_fresh_counter() -> None:
    leases = owned_by("victim", 4)
    table = SlowScanTable(leases, dict.fromkeys((lease.lease_key for lease in leases), None))
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me"), SteppedClock(), rng=Random(3))
    plan = await coordinator.take_once()
    assert len(plan.steals) == 1
    assert set(coordinator.held) == {plan.steals[0].lease_key}, (
        "the fenced take used the scan's stale counter"
    )


async def test_a_lease_that_changed_hands_during_the_scan_is_not_stolen() -> None:
    leases = owned_by("victim", 4)
    table = SlowScanTable(leases, dict.fromkeys((lease.lease_key for lease in leases), "someone-else"))
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me"), SteppedClock(), rng=Random(3))
    plan = await coordinator.take_once()
    assert len(plan.steals) == 1 and not coordinator.held
    assert all(lease.lease_owner == "someone-else" for lease in table.items.values())


async def test_checkpoints_and_renewals_of_one_lease_never_fence_each_other_out() -> None:
    table = FakeTable(shards(1))
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me"), SteppedClock())
    await coordinator.take_once()
    key = "shardId-000000000000"
    for n in range(1, 6):
        await asyncio.gather(
            coordinator.renew_once(), coordinator.checkpoint(key, ExtendedSequenceNumber(str(n)))
        )
    assert key in coordinator.held and table.items[key].checkpoint == ExtendedSequenceNumber("5")
    assert table.items[key].lease_counter == 1 + 2 * 5


async def test_a_checkpoint_on_a_lost_lease_is_refused_and_reported_lost() -> None:
    table = FakeTable(shards(1))
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me"), SteppedClock())
    lost: list[str] = []
    coordinator.listeners.lost.append(lost.append)
    await coordinator.take_once()
    key = "shardId-000000000000"
    table.items[key] = table.items[key].taken_by("thief")
    with pytest.raises(LeaseConflict):
        await coordinator.checkpoint(key, ExtendedSequenceNumber("9"))
    assert lost == [key] and not coordinator.held
    with pytest.raises(LeaseConflict, match="not held"):
        await coordinator.checkpoint(key, ExtendedSequenceNumber("10"))


async def test_release_gives_the_lease_back_without_a_lost_event() -> None:
    table = FakeTable(shards(2))
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me"), SteppedClock())
    lost: list[str] = []
    coordinator.listeners.lost.append(lost.append)
    await coordinator.take_once()
    assert await coordinator.release("shardId-000000000001")
    assert not await coordinator.release("shardId-000000000001")
    assert table.items["shardId-000000000001"].lease_owner is None and not lost
    assert set(coordinator.held) == {"shardId-000000000000"}


async def test_release_named_gives_up_leases_assigned_but_not_adopted_and_hands_back_hand_offs() -> None:
    """Issue 17: a graceful stop right after start-up left the leases a leader had just assigned to this
    worker owned by it (it held none of them yet); a hand-off to it went nowhere."""

    class _Table3x(FakeTable):
        def assign(self, lease: Lease, new_owner: str) -> Lease:
            self._check(lease)
            moved = replace(
                lease, lease_owner=new_owner, checkpoint_owner=None, lease_counter=lease.lease_counter + 1
            )
            self.items[lease.lease_key] = moved
            return moved

    leases = shards(4)
    table = _Table3x(
        [
            leases[0].taken_by("me"),  # held: released by release(), not by the sweep
            leases[1].taken_by("me"),  # assigned by the leader, not adopted yet
            replace(leases[2].taken_by("me"), checkpoint_owner="old"),  # a hand-off to us, not begun
            leases[3].taken_by("other"),
        ]
    )
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me"), SteppedClock())
    coordinator.adopt(table.items["shardId-000000000000"])
    assert await coordinator.release_named() == 2
    assert table.items["shardId-000000000001"].lease_owner is None
    assert table.items["shardId-000000000002"].lease_owner == "old"
    assert table.items["shardId-000000000002"].checkpoint_owner is None
    assert table.items["shardId-000000000000"].lease_owner == "me"  # held: not the sweep's
    assert table.items["shardId-000000000003"].lease_owner == "other"
    assert await coordinator.release_named() == 0


async def test_the_taker_loop_takes_a_dead_workers_leases_as_they_expire() -> None:
    """run_taker itself: expiry passes between Java's full runs take a dead worker's leases as they
    expire (Java's cadence alone: at the second full run, 20 s)."""
    table = FakeTable(owned_by("dead", 4))
    clock = VirtualClock(1000.0)
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me"), clock, rng=Random(1))
    taker = asyncio.create_task(coordinator.run_taker())
    try:
        took = await clock.run(lambda: len(coordinator.held) == 4, limit_s=60)
    finally:
        taker.cancel()
        await asyncio.gather(taker, return_exceptions=True)
    # first seen (a full run, which also steals one) at 0 s; expired past 10 s: taken by the pass the
    # taker schedules for that moment, not the next 1 s pass
    assert took < 12.0  # (the clock may step once more before the check runs)
    taken_at = sorted(held.renewed_at - 1000.0 for held in coordinator.held.values())
    assert taken_at[-3:] == pytest.approx([10.05] * 3)  # (no renewer runs: the stolen one is retaken too)


async def test_the_taker_loop_steals_only_at_its_full_runs() -> None:
    table = FakeTable(owned_by("busy", 4))
    clock = VirtualClock(1000.0)
    passes: list[tuple[float, bool, int]] = []
    coordinator = LeaseCoordinator(table, CoordinatorConfig(worker_id="me"), clock, rng=Random(1))
    take_once = coordinator.take_once

    async def spy(*, steals: bool = True) -> object:
        for lease in table.items.values():  # "busy" renews: nothing ever expires
            if lease.lease_owner == "busy":
                table.items[lease.lease_key] = replace(lease, lease_counter=lease.lease_counter + 1)
        plan = await take_once(steals=steals)
        passes.append((clock.now - 1000.0, steals, len(coordinator.held)))
        return plan

    coordinator.take_once = spy  # type: ignore[method-assign]
    taker = asyncio.create_task(coordinator.run_taker())
    try:
        await clock.run(lambda: clock.now >= 1045.0, limit_s=60)
    finally:
        taker.cancel()
        await asyncio.gather(taker, return_exceptions=True)
    full_runs = [at for at, allowed, _ in passes if allowed]
    assert full_runs == pytest.approx([0.0, 20.05, 40.1])
    assert len(passes) >= 40  # an expiry pass about every second in between
    # one steal per full run (maxLeasesToStealAtOneTime) up to the target of 2; none in between
    counts = [(0.0, True, 0), *passes]
    grew = [(at, allowed) for (_, _, before), (at, allowed, n) in itertools.pairwise(counts) if n > before]
    assert grew == [(0.0, True), (pytest.approx(20.05), True)]
