"""Per-worker renewal (``leaseRenewal = PER_WORKER``) over an in-memory table and a stepped clock: the
leases stand still while the heartbeats move, a dead worker's leases are taken as its heartbeat stands
still, and a worker renewing per lease puts the fleet back on per-lease renewals."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from kcl_daemon.core.leases.heartbeat import RenewalMode
from kcl_daemon.core.leases.keeping import KeepTimings
from kcl_daemon.leases.heartbeat import PerWorkerRenewal
from kcl_daemon.leases.keeper import LeaseKeeper
from tests.support.fakes import HeartbeatFakeTable, shards
from tests.support.lease_fleet import CoordinatorFleet

PW = RenewalMode.PER_WORKER.value


def _counters(table: HeartbeatFakeTable) -> dict[str, int]:
    return {key: lease.lease_counter for key, lease in table.items.items()}


async def test_leases_stand_still_while_heartbeats_keep_them() -> None:
    table = HeartbeatFakeTable(shards(6))
    fleet = CoordinatorFleet(table, ["w-a", "w-b"], lease_renewal=PW)
    await fleet.run_until(lambda: sorted(fleet.owners().values()) == [3, 3], limit_s=600)
    counters, beats = _counters(table), table.heartbeats
    scans = {w: (c.lease_scans, c.heartbeat_passes) for w, c in fleet.coordinators.items()}
    start = fleet.clock.now
    await fleet.run_until(lambda: fleet.clock.now >= start + 60.0, limit_s=61)
    assert _counters(table) == counters  # not one lease write in a minute
    # the lease table is scanned at the full runs (every 2 x (L + ε)); the passes between read heartbeats
    for worker, coordinator in fleet.coordinators.items():
        lease_scans = coordinator.lease_scans - scans[worker][0]
        heartbeat_passes = coordinator.heartbeat_passes - scans[worker][1]
        assert lease_scans <= 60.0 / fleet.take_every + 1, (worker, lease_scans)
        assert heartbeat_passes >= 60.0 / coordinator.pass_every_s() - lease_scans - 2, (
            worker,
            heartbeat_passes,
        )
    # two workers, one heartbeat each per renewal period (failover / 3 - 25 ms)
    periods = 60.0 / fleet.renew_every
    assert 2 * (periods - 1) <= table.heartbeats - beats <= 2 * (periods + 1)
    assert all(c.renewal is not None and c.renewal.per_worker for c in fleet.coordinators.values())
    held = fleet.held()
    assert len(held["w-a"]) == len(held["w-b"]) == 3 and not held["w-a"] & held["w-b"]


async def test_a_dead_workers_leases_are_taken_once_its_heartbeat_stands_still() -> None:
    table = HeartbeatFakeTable(shards(6))
    fleet = CoordinatorFleet(table, ["w-a", "w-b"], lease_renewal=PW)
    await fleet.run_until(lambda: sorted(fleet.owners().values()) == [3, 3], limit_s=600)
    fleet.stopped.add("w-b")  # no heartbeat, no takes: as if killed
    took = await fleet.run_until(lambda: fleet.owners() == {"w-a": 6}, limit_s=120)
    bound = 10.0 + 2 * fleet.expiry_every + 0.5 * fleet.expiry_every + 0.2
    assert took <= bound, f"takeover took {took:.1f}s simulated, bound {bound:.1f}s"
    assert fleet.coordinators["w-a"].renewal is not None
    assert fleet.coordinators["w-a"].renewal.per_worker  # a dead worker is no foreign sign


async def test_a_worker_with_the_key_off_puts_the_fleet_back_within_a_full_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A worker with the key off is seen at the next lease scan (a full run: 2 x (L + ε)), and the one
    that saw it first withdraws its item a renewal period later, which the others read with the
    heartbeats."""
    table = HeartbeatFakeTable(shards(6))
    fleet = CoordinatorFleet(table, ["w-a", "w-b"], lease_renewal=PW)
    await fleet.run_until(lambda: sorted(fleet.owners().values()) == [3, 3], limit_s=600)
    caplog.set_level(logging.WARNING)
    fleet.add("w-c", lease_renewal="PER_LEASE")
    renewals = [fleet.coordinators[w].renewal for w in ("w-a", "w-b")]
    took = await fleet.run_until(lambda: not any(r is not None and r.per_worker for r in renewals), 30)
    read_every = fleet.coordinators["w-a"].config.timings.heartbeat_read_s
    bound = fleet.take_every + fleet.renew_every + 2 * read_every + 0.5
    assert took <= bound, f"the fleet fell back after {took:.1f}s simulated, bound {bound:.1f}s"
    assert "falls back to per-lease renewals" in caplog.text and "w-c" in caplog.text
    await fleet.run_until(lambda: not table.workers, limit_s=10)  # each fallen-back worker's item withdrawn
    # per lease from now on: counters move, and the fleet settles with nothing held twice
    await fleet.run_until(lambda: sorted(fleet.owners().values()) == [2, 2, 2], limit_s=300)
    counters = _counters(table)
    start = fleet.clock.now
    await fleet.run_until(lambda: fleet.clock.now >= start + 10.0, limit_s=11)
    assert all(_counters(table)[k] > counters[k] for k in counters)
    held = fleet.held()
    assert sum(len(h) for h in held.values()) == 6
    assert not (held["w-a"] & held["w-b"] or held["w-a"] & held["w-c"] or held["w-b"] & held["w-c"])


def test_the_heartbeat_thread_beats_and_withdraws_the_item_when_it_stops() -> None:
    table = HeartbeatFakeTable(shards(1))
    keeper = LeaseKeeper(table, "w-a", KeepTimings.for_failover(0.3), ThreadPoolExecutor(1))
    renewal = PerWorkerRenewal(table, keeper, "w-a", 0.3, 0.05)
    renewal.start()
    deadline = time.monotonic() + 10
    while table.heartbeats < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert table.heartbeats >= 3 and "w-a" in table.workers
    renewal.stop()
    assert "w-a" not in table.workers and renewal.withdrawn


def test_a_stop_that_keeps_its_leases_for_a_restart_keeps_the_heartbeat_item() -> None:
    """A restart grace: the leases still name the worker, so its item stays (standing still) until it is
    back; its removal would be an owner without a heartbeat, a foreign sign to the rest of the fleet."""
    table = HeartbeatFakeTable(shards(1))
    keeper = LeaseKeeper(table, "w-a", KeepTimings.for_failover(0.3), ThreadPoolExecutor(1))
    renewal = PerWorkerRenewal(table, keeper, "w-a", 0.3, 0.05)
    renewal.start()
    deadline = time.monotonic() + 10
    while table.heartbeats < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    renewal.keep_item_on_stop = True
    renewal.stop()
    assert "w-a" in table.workers and not renewal.withdrawn


async def test_in_3x_mode_a_scan_tells_the_holder_of_a_hand_off_a_move_and_a_java_leader(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The 3.x follower's side (``LeaseCoordinator.observe_fleet``, given each scan of the assignment
    loop): a hand-off marked at the held counter is served as a renewal that returned it would be, a lease
    moved past it is lost, and a leader without a PER_WORKER heartbeat puts this worker back per lease."""
    table = HeartbeatFakeTable(shards(3))
    fleet = CoordinatorFleet(table, ["w-a"], lease_renewal=PW)
    coordinator = fleet.coordinators["w-a"]
    renewal = coordinator.renewal
    assert renewal is not None and renewal.beat_now()
    for key, lease in list(table.items.items()):
        table.items[key] = lease.taken_by("w-a")
        assert coordinator.adopt(table.items[key])
    await fleet.run_until(lambda: all(c.valid_for_s(k) > 0 for c in [coordinator] for k in table.items), 5)
    counters = {key: kept.lease.lease_counter for key, kept in coordinator.held.items()}
    s0, s1, s2 = sorted(table.items)
    held0 = coordinator.held[s0].lease
    table.items[s0] = dataclasses.replace(held0, lease_owner="w-b", checkpoint_owner="w-a")  # the mark
    table.items[s1] = coordinator.held[s1].lease.taken_by("w-c")  # assigned elsewhere
    for worker in ("w-b", "w-c"):  # kcl-daemon workers heartbeating too
        table.heartbeat(worker, RenewalMode.PER_WORKER)
    now = fleet.clock.now
    await coordinator.observe_fleet(table.list_leases(), table.heartbeat_items(), now, "w-a")
    assert coordinator.held[s0].lease.checkpoint_owner == "w-a"  # the hand-off watcher's to serve
    assert coordinator.held[s0].lease.lease_counter == counters[s0]
    beats = table.heartbeats
    fleet.clock.now += fleet.renew_every  # the next heartbeat's confirmation does not wipe the mark
    renewal.tick()
    coordinator.keeper.tick()
    await asyncio.sleep(0)
    assert table.heartbeats == beats + 1
    assert coordinator.held[s0].lease.checkpoint_owner == "w-a"
    assert s1 not in coordinator.held and s2 in coordinator.held
    assert renewal.per_worker  # this worker leads: no sign

    caplog.set_level(logging.WARNING)
    await coordinator.observe_fleet(table.list_leases(), table.heartbeat_items(), now + 1, "java-1")
    assert not renewal.per_worker
    assert "the 3.x leader java-1 does not heartbeat in PER_WORKER mode" in caplog.text
