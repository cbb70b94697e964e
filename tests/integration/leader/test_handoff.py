"""Graceful hand-off against both emulators: the normal path, forced, and the cases that leave Java
leases stuck with a ``checkpointOwner`` (KCL#1718 fast shutdown, #1729 restart, #1743/#1765 a consumer
that never initialized), plus two leaders deciding at once. Components over the real lease table;
time is a fake clock (nothing sleeps for real)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.aws.lease_table_3x import LeaseTable3x
from kcl_daemon.core.leader.decider import DeciderConfig
from kcl_daemon.core.leader.lease_count import LeaseCountDecider
from kcl_daemon.core.leader.worker_metrics import WorkerMetricStats
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import ExtendedSequenceNumber, Sentinel
from kcl_daemon.errors import LeaseConflict
from kcl_daemon.leader.assignment import AssignmentLoop
from kcl_daemon.leader.assignment_config import AssignmentConfig
from kcl_daemon.leader.discovery import LeaseDiscovery
from kcl_daemon.leader.handoff import HandoffWatcher
from kcl_daemon.leases.coordinator import CoordinatorConfig, LeaseCoordinator
from tests.support.clocks import FakeClock

pytestmark = pytest.mark.integration
FAILOVER_S = 10.0
POOL = ThreadPoolExecutor(2, thread_name_prefix="test-3x")


@pytest.fixture
def table(aws_clients: AwsClients, lease_table: DynamoLeaseTable) -> LeaseTable3x:
    return LeaseTable3x(aws_clients.dynamodb, lease_table.table_name)


def _create(table: LeaseTable3x, key: str = "shardId-000000000000") -> Lease:
    lease = Lease(key, ExtendedSequenceNumber(Sentinel.TRIM_HORIZON.value))
    assert table.create_lease(lease)
    got = table.get_lease(key, consistent=True)
    assert got is not None
    return got


def _coordinator(table: LeaseTable3x, worker: str, clock: FakeClock) -> LeaseCoordinator:
    return LeaseCoordinator(table, CoordinatorConfig(worker, failover_s=FAILOVER_S), clock, io_pool=POOL)


class _Election:
    def __init__(self) -> None:
        self.on_change: list[Any] = []
        self.gained = asyncio.Event()

    def is_leader(self) -> bool:
        return True

    def leader_suspect(self) -> bool:
        return False

    async def release(self, why: str) -> None:
        raise AssertionError(why)


class _Metrics:
    def __init__(self, *workers: str) -> None:
        self.workers = workers

    def scan(self) -> tuple[list[WorkerMetricStats], list[str]]:
        import time

        return [WorkerMetricStats(w, time.time()) for w in self.workers], []

    def delete_stale(self, worker_id: str, lut: float) -> None:
        raise AssertionError("nothing is stale here")


def _leader(table: LeaseTable3x, clock: FakeClock, *workers: str) -> AssignmentLoop:
    config = AssignmentConfig(
        interval_s=2 * FAILOVER_S, failover_s=FAILOVER_S, handoff_timeout_s=30.0, decider=DeciderConfig()
    )
    election: Any = _Election()
    return AssignmentLoop(table, _Metrics(*workers), election, LeaseCountDecider(), config, clock, POOL)


async def test_handoff_transfers_after_the_processor_finishes(table: LeaseTable3x) -> None:
    clock = FakeClock()
    lease = table.assign(_create(table), "a")
    a = _coordinator(table, "a", clock)
    assert a.adopt(lease)
    table.initiate_handoff(lease, "b")
    await a.renew_once()  # the renewal returns the marked item
    assert a.held["shardId-000000000000"].lease.checkpoint_owner == "a"
    runner = asyncio.create_task(asyncio.sleep(0))  # the shard task, finishing at once
    watcher = HandoffWatcher(table, a, lambda key: runner, clock, POOL, timeout_s=30.0)
    assert watcher.pending() == ["shardId-000000000000"]
    watcher.check_once()
    for _ in range(50):
        if watcher.completed:
            break
        await asyncio.sleep(0.05)
    assert watcher.completed == [("shardId-000000000000", "b", False)]
    item = table.get_lease("shardId-000000000000", consistent=True)
    assert item is not None and (item.lease_owner, item.checkpoint_owner) == ("b", None)
    assert "shardId-000000000000" not in a.held
    b = _coordinator(table, "b", clock)
    discovery = LeaseDiscovery(table, b, clock, POOL, interval_s=5.0)
    assert await discovery.discover_once() == ["shardId-000000000000"]


async def test_a_processor_that_never_returns_is_handed_off_by_force(table: LeaseTable3x) -> None:
    clock = FakeClock()
    lease = table.assign(_create(table), "a")
    a = _coordinator(table, "a", clock)
    a.adopt(lease)
    table.initiate_handoff(lease, "b")
    await a.renew_once()
    lost: list[str] = []
    a.listeners.lost.append(lost.append)
    stuck = asyncio.create_task(asyncio.Event().wait())
    watcher = HandoffWatcher(table, a, lambda key: stuck, clock, POOL, timeout_s=30.0)
    await watcher.hand_off_now("shardId-000000000000")
    assert clock.now >= 30.0
    assert watcher.completed == [("shardId-000000000000", "b", True)]
    assert lost == ["shardId-000000000000"]  # the still-running task is told leaseLost
    stuck.cancel()


async def test_uninitialized_consumer_transfers_at_once_kcl_1743_1765(table: LeaseTable3x) -> None:
    clock = FakeClock()
    lease = table.assign(_create(table), "a")
    a = _coordinator(table, "a", clock)
    a.adopt(lease)
    table.initiate_handoff(lease, "b")
    await a.renew_once()
    watcher = HandoffWatcher(table, a, lambda key: None, clock, POOL, timeout_s=30.0)
    await watcher.hand_off_now("shardId-000000000000")
    assert clock.now == 0.0  # no wait for a processor that does not exist
    item = table.get_lease("shardId-000000000000", consistent=True)
    assert item is not None and (item.lease_owner, item.checkpoint_owner) == ("b", None)


@pytest.mark.parametrize("renewed_since_the_mark", [True, False])
async def test_fast_shutdown_mid_handoff_leaves_no_checkpoint_owner_kcl_1718(
    table: LeaseTable3x, renewed_since_the_mark: bool
) -> None:
    clock = FakeClock()
    lease = table.assign(_create(table), "a")
    a = _coordinator(table, "a", clock)
    a.adopt(lease)
    table.initiate_handoff(lease, "b")
    if renewed_since_the_mark:
        await a.renew_once()
    assert await a.release("shardId-000000000000")
    item = table.get_lease("shardId-000000000000", consistent=True)
    assert item is not None and (item.lease_owner, item.checkpoint_owner) == (None, None)


async def test_restart_and_dead_old_owner_are_resolved_by_the_leader_kcl_1729(table: LeaseTable3x) -> None:
    clock = FakeClock()
    lease = table.assign(_create(table), "a")
    table.initiate_handoff(lease, "b")  # then "a" dies: nobody completes the hand-off
    b = _coordinator(table, "b", clock)
    discovery = LeaseDiscovery(table, b, clock, POOL, interval_s=5.0)
    assert await discovery.discover_once() == []  # b restarts: it must not adopt a pending hand-off
    leader = _leader(table, clock, "b")
    report = await leader.run_once()
    assert report.moves == []  # pending hand-off left alone until timeout + failover
    clock.now += 30.0 + FAILOVER_S + 1
    report = await leader.run_once()
    assert [(m.lease_key, m.to_worker, m.graceful) for m in report.moves] == [
        ("shardId-000000000000", "b", False)
    ]
    item = table.get_lease("shardId-000000000000", consistent=True)
    assert item is not None and (item.lease_owner, item.checkpoint_owner) == ("b", None)
    assert await discovery.discover_once() == ["shardId-000000000000"]


async def test_two_leaders_deciding_at_once_move_a_lease_once(table: LeaseTable3x) -> None:
    lease = _create(table)
    table.assign(lease, "x")  # the first leader's move, on the counter both read
    with pytest.raises(LeaseConflict):
        table.assign(lease, "y")  # the second leader's move on the same read
    owned = table.assign(table.get_lease(lease.lease_key, consistent=True) or lease, "y")
    table.initiate_handoff(owned, "x")
    with pytest.raises(LeaseConflict):
        table.initiate_handoff(owned, "z")  # a hand-off is already pending
    item = table.get_lease(lease.lease_key, consistent=True)
    assert item is not None and (item.lease_owner, item.checkpoint_owner) == ("x", "y")


class _MoveEverything:
    name = "move-everything"

    def decide(self, leases: Any, workers: Any, now: float, state: Any, config: Any) -> Any:
        from kcl_daemon.core.leader.decider import Decision, Move

        return Decision(tuple(Move(v.lease_key, v.lease_counter, v.owner, "b", False) for v in leases), state)


async def test_the_leader_never_moves_a_finished_lease_whatever_the_decider_says(table: LeaseTable3x) -> None:
    clock = FakeClock()
    done = Lease("shardId-000000000009", ExtendedSequenceNumber(Sentinel.SHARD_END.value))
    assert table.create_lease(done)
    _create(table)
    leader = _leader(table, clock, "b")
    leader.decider = _MoveEverything()
    report = await leader.run_once()
    moves = {m.lease_key: m for m in report.moves}
    assert set(moves) == {"shardId-000000000000", "shardId-000000000009"}
    # not the decider's move: the loop's own rule gives an unowned finished lease (its worker stopped) to a
    # live worker, whose cleanup deletes it (issue 17); otherwise nobody would in leader mode
    assert moves["shardId-000000000009"].reason == "finished lease of a gone worker"
    finished = table.get_lease("shardId-000000000009", consistent=True)
    assert finished is not None and finished.lease_owner == moves["shardId-000000000009"].to_worker
