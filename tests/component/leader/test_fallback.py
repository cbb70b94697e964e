"""A follower's fallback taker in its assignment loop, with fakes (issue 28 point 6): under a leader whose
lock looks alive but who reassigns nothing (a dead Java leader within its 120 s lock), the follower
takes the dead owners' leases once they have stood still past failover + grace, fenced on the counter,
scanning every half failover (not every second); a live owner's lease, a RESTARTING worker's within its
grace and an unowned lease are left alone; a take that loses the race to the leader's assign is skipped."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kcl_daemon.aws.lease_table import ScanResult
from kcl_daemon.core.leader.decider import WorkerState
from kcl_daemon.core.leader.fallback import FallbackConfig
from kcl_daemon.core.leader.worker_metrics import WorkerMetricStats
from kcl_daemon.core.leader.zones import WorkerExtras, extras_to_attribute
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.restart_grace import RESTART_ATTRIBUTE, RestartMark, mark_attribute
from kcl_daemon.core.leases.taker import PlannedTake, TakeKind
from kcl_daemon.core.sequence import TRIM_HORIZON
from kcl_daemon.errors import LeaseConflict
from kcl_daemon.leader.assignment import AssignmentLoop
from kcl_daemon.leader.assignment_config import AssignmentConfig
from kcl_daemon.leader.fallback import FallbackTaker
from kcl_daemon.leader.mode import make_decider
from tests.support.clocks import FakeClock

WALL = 1_700_000_000.0
FAILOVER = 10.0
ME = "py-a"


class _Table:
    """Leases in memory; ``take`` is fenced on the counter, as the lease table's."""

    def __init__(self, leases: list[Lease]) -> None:
        self.leases = {lease.lease_key: lease for lease in leases}
        self.scans = 0
        #: called before each take is applied (a leader's assign racing it)
        self.before_take: list[Any] = []

    def list_leases(self) -> ScanResult:
        self.scans += 1
        return ScanResult(tuple(self.leases.values()), ())

    def take(self, lease: Lease, owner: str) -> Lease:
        for hook in self.before_take:
            hook(lease.lease_key)
        current = self.leases[lease.lease_key]
        if current.lease_counter != lease.lease_counter:
            raise LeaseConflict("counter moved")
        taken = dataclasses.replace(
            current, lease_owner=owner, checkpoint_owner=None, lease_counter=current.lease_counter + 1
        )
        self.leases[lease.lease_key] = taken
        return taken

    def renew(self, owner: str) -> None:
        for key, lease in self.leases.items():
            if lease.lease_owner == owner:
                self.leases[key] = dataclasses.replace(lease, lease_counter=lease.lease_counter + 1)

    def owned(self, owner: str) -> set[str]:
        return {k for k, lease in self.leases.items() if lease.lease_owner == owner}


class _Metrics:
    def __init__(self, rows: list[WorkerMetricStats]) -> None:
        self.rows = rows
        self.scans = 0

    def scan(self) -> tuple[list[WorkerMetricStats], list[str]]:
        self.scans += 1
        return list(self.rows), []


class _Follower:
    """An election that never leads, and whose leader's lock looks alive (a Java lock: 120 s)."""

    def __init__(self) -> None:
        self.worker_id = ME
        self.on_change: list[Any] = []
        self.gained = asyncio.Event()

    def is_leader(self) -> bool:
        return False

    def leader_suspect(self) -> bool:
        return False

    async def release(self, why: str) -> None:
        raise AssertionError(why)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(1) as executor:
        yield executor


def _ours(
    worker: str, state: WorkerState = WorkerState.ACTIVE, grace_until: float | None = None
) -> WorkerMetricStats:
    extras = WorkerExtras(state=state, grace_until_epoch_s=grace_until)
    return WorkerMetricStats(worker, WALL, extra=extras_to_attribute(extras))


def _follower(
    table: _Table, metrics: _Metrics, clock: FakeClock, pool: ThreadPoolExecutor
) -> tuple[AssignmentLoop, list[tuple[Lease, float]]]:
    loop = AssignmentLoop(
        table,
        metrics,
        _Follower(),  # type: ignore[arg-type]
        make_decider("COOPERATIVE"),
        AssignmentConfig(2 * FAILOVER, FAILOVER),
        clock,
        pool,
        wall=lambda: WALL + clock.now,
    )
    taken: list[tuple[Lease, float]] = []

    async def take(planned: Sequence[PlannedTake]) -> list[Lease]:
        done = []
        for p in planned:
            assert p.kind is TakeKind.FALLBACK
            try:
                done.append(table.take(p.lease, ME))
            except LeaseConflict:
                continue
        taken.extend((lease, clock.now) for lease in done)
        return done

    loop.fallback = FallbackTaker(
        ME,
        FallbackConfig.derive(FAILOVER, 2 * FAILOVER),
        metrics,
        loop.worker_views,
        take,
        lambda: len(taken),
        clock,
        pool,
        wall=lambda: WALL + clock.now,
    )
    return loop, taken


def _lease(key: str, owner: str | None, counter: int = 1) -> Lease:
    return Lease(key, TRIM_HORIZON, lease_owner=owner, lease_counter=counter)


async def _run_until(loop: AssignmentLoop, clock: FakeClock, until: float) -> None:
    done = asyncio.Event()
    clock.on_sleep.append(lambda: done.set() if clock.now >= until else None)
    task = asyncio.ensure_future(loop.run())
    try:
        await done.wait()
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_dead_leaders_leases_are_taken_past_failover_and_grace_with_a_scan_every_half_failover(
    pool: ThreadPoolExecutor,
) -> None:
    leases = [
        _lease("java-1", "java-leader"),
        _lease("java-2", "java-leader"),
        _lease("py-b-1", "py-b"),
        _lease("restart-1", "py-r"),
        _lease("new-1", None),
    ]
    table, clock = _Table(leases), FakeClock()
    metrics = _Metrics(
        [
            WorkerMetricStats("java-leader", WALL),
            _ours(ME),
            WorkerMetricStats("py-b", WALL),  # a live worker, Java or kcl-daemon
            _ours("py-r", WorkerState.RESTARTING, grace_until=WALL + 1000),
        ]
    )
    loop, taken = _follower(table, metrics, clock, pool)
    died_at = 20.0
    renewed = {"at": 0.0}

    def world() -> None:  # py-b renews every failover/3; the Java leader until it dies at 20 s
        if clock.now - renewed["at"] >= FAILOVER / 3:
            renewed["at"] = clock.now
            table.renew("py-b")
            if clock.now < died_at:
                table.renew("java-leader")

    clock.on_sleep.append(world)
    await _run_until(loop, clock, died_at + 60.0)
    assert table.owned(ME) == {"java-1", "java-2"}
    assert table.owned("py-b") == {"py-b-1"}  # live: never taken
    assert table.owned("py-r") == {"restart-1"}  # RESTARTING within its grace: waits for it
    assert table.owned(ME).isdisjoint({"new-1"})  # unowned under a live-looking leader: the leader's
    # the last renewal came at most a renewal period before the death, and the follower first saw it at
    # most a watch interval (failover / 2) after it: taken past failover + grace (2 s) from that sighting
    grace = FallbackConfig.derive(FAILOVER, 2 * FAILOVER).grace_s
    for _, at in taken:
        assert (
            died_at - FAILOVER / 3 + FAILOVER + grace < at <= died_at + FAILOVER + grace + FAILOVER / 2 + 1.1
        )
    assert 80 / (FAILOVER / 2) <= table.scans <= 80 / (FAILOVER / 2) + 3  # one scan per 5 s, and at dues
    assert len(taken) == 2


async def test_a_take_that_loses_the_race_to_the_leaders_assign_is_skipped(pool: ThreadPoolExecutor) -> None:
    table, clock = _Table([_lease("s-1", "java-dead"), _lease("s-2", "java-dead")]), FakeClock()
    loop, taken = _follower(table, _Metrics([_ours(ME)]), clock, pool)

    def leader_assigns_first(key: str) -> None:
        if key == "s-1":  # the (slow) leader's assign lands between the follower's scan and its take
            lease = table.leases[key]
            table.leases[key] = dataclasses.replace(
                lease, lease_owner="java-2", lease_counter=lease.lease_counter + 1
            )

    table.before_take.append(leader_assigns_first)
    await _run_until(loop, clock, 30.0)
    assert table.owned(ME) == {"s-2"} and table.owned("java-2") == {"s-1"}
    assert [lease.lease_key for lease, _ in taken] == ["s-2"]


async def test_a_lease_marked_with_its_owners_restart_grace_waits_whatever_the_metrics_say(
    pool: ThreadPoolExecutor,
) -> None:
    """The restart grace marked on the lease (kcl_daemon.core.leases.restart_grace) holds for the
    fallback too:
    the stopping worker's metrics item was last read ACTIVE (or is gone), its lease stands still past
    failover + grace, and still the follower leaves it for the worker's return; an unmarked lease of the
    same dead-looking owner is taken."""
    marked = _lease("kept-1", "py-r", counter=2)
    mark = RestartMark("py-r", 2, WALL + 1000)
    marked = dataclasses.replace(marked, extra={RESTART_ATTRIBUTE: mark_attribute(mark)})
    table, clock = _Table([marked, _lease("dead-1", "py-d")]), FakeClock()
    loop, taken = _follower(table, _Metrics([_ours(ME), _ours("py-r"), _ours("py-d")]), clock, pool)
    await _run_until(loop, clock, 4 * FAILOVER)
    assert table.owned("py-r") == {"kept-1"}
    assert [lease.lease_key for lease, _ in taken] == ["dead-1"]
