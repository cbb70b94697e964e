"""The leader's assignment loop between balance rounds (issue 17): expiry passes every min(1 s, failover /
10) move a dead worker's leases as soon as they expire, never to a dead worker, whatever the decider;
a gone worker's finished lease goes to a live worker; the leader tells itself of what it assigned itself."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kcl_daemon.aws.lease_table import ScanResult
from kcl_daemon.core.leader.passes import PassKind
from kcl_daemon.core.leader.worker_metrics import WorkerMetricStats
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.restart_grace import RESTART_ATTRIBUTE, RestartMark, mark_attribute
from kcl_daemon.core.sequence import SHARD_END, TRIM_HORIZON
from kcl_daemon.errors import LeaseConflict
from kcl_daemon.leader.assignment import AssignmentLoop
from kcl_daemon.leader.assignment_config import AssignmentConfig
from kcl_daemon.leader.mode import make_decider
from tests.support.clocks import FakeClock

WALL = 1_700_000_000.0
FAILOVER = 10.0


class _Table:
    """Leases in memory; ``assign`` is conditional on the counter, as LeaseTable3x's."""

    def __init__(self, leases: list[Lease]) -> None:
        self.leases = {lease.lease_key: lease for lease in leases}
        self.scans = 0

    def list_leases(self) -> ScanResult:
        self.scans += 1
        return ScanResult(tuple(self.leases.values()), ())

    def assign(self, lease: Lease, new_owner: str) -> Lease:
        current = self.leases[lease.lease_key]
        if current.lease_counter != lease.lease_counter:
            raise LeaseConflict("counter moved")
        moved = dataclasses.replace(
            current, lease_owner=new_owner, checkpoint_owner=None, lease_counter=current.lease_counter + 1
        )
        self.leases[lease.lease_key] = moved
        return moved

    def initiate_handoff(self, lease: Lease, new_owner: str) -> Lease:
        current = self.leases[lease.lease_key]
        moved = dataclasses.replace(current, checkpoint_owner=current.lease_owner, lease_owner=new_owner)
        self.leases[lease.lease_key] = moved
        return moved

    def renew(self, owner: str) -> None:
        """Every lease of ``owner`` renewed once."""
        for key, lease in self.leases.items():
            if lease.lease_owner == owner:
                self.leases[key] = dataclasses.replace(lease, lease_counter=lease.lease_counter + 1)

    def owned(self, owner: str) -> set[str]:
        return {k for k, lease in self.leases.items() if lease.lease_owner == owner}


class _Metrics:
    def __init__(self, workers: list[str]) -> None:
        self.workers = workers
        self.scans = 0

    def scan(self) -> tuple[list[WorkerMetricStats], list[str]]:
        self.scans += 1
        return [WorkerMetricStats(w, WALL) for w in self.workers], []  # all fresh: the dead one too

    def delete_stale(self, worker_id: str, last_update: float) -> None:
        return None


class _Election:
    def __init__(self) -> None:
        self.worker_id = "a"
        self.on_change: list[Any] = []
        self.gained = asyncio.Event()

    def is_leader(self) -> bool:
        return True

    def leader_suspect(self) -> bool:
        return False

    async def release(self, why: str) -> None:
        raise AssertionError(why)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(1) as executor:
        yield executor


def _loop(
    table: _Table, metrics: _Metrics, strategy: str, clock: FakeClock, pool: ThreadPoolExecutor
) -> AssignmentLoop:
    return AssignmentLoop(
        table,
        metrics,
        _Election(),  # type: ignore[arg-type]
        make_decider(strategy),
        AssignmentConfig(2 * FAILOVER, FAILOVER),
        clock,  # type: ignore[arg-type]
        pool,
        wall=lambda: WALL + clock.now,
    )


def _fleet() -> list[Lease]:
    owners = ["a", "a", "b", "b", "dead", "dead"]
    return [Lease(f"s{i}", TRIM_HORIZON, lease_owner=o, lease_counter=1) for i, o in enumerate(owners)]


@pytest.mark.parametrize("strategy", ["COOPERATIVE", "VARIANCE", "LEASE_COUNT_BASED"])
async def test_an_expiry_pass_moves_a_dead_workers_leases_once_expired_and_never_to_it(
    strategy: str, pool: ThreadPoolExecutor
) -> None:
    table, clock = _Table(_fleet()), FakeClock()
    loop = _loop(table, _Metrics(["a", "b", "dead"]), strategy, clock, pool)
    await loop.run_once(PassKind.BALANCE)  # first sight of every counter
    for _ in range(10):  # a and b renew every second, "dead" never again
        clock.now += 1.0
        table.renew("a")
        table.renew("b")
        report = await loop.run_once(PassKind.EXPIRY)
        assert not report.moves, "nothing expired yet"
    clock.now += 0.1
    table.renew("a")
    table.renew("b")
    report = await loop.run_once(PassKind.EXPIRY)
    assert {m.lease_key for m in report.moves} == {"s4", "s5"} and report.applied == 2
    assert not table.owned("dead")
    # A lease freed later (a worker that stopped) is not given to the dead worker either, although its
    # metrics are still fresh and it now owns nothing.
    table.leases["s9"] = Lease("s9", TRIM_HORIZON, lease_counter=1)
    for kind in (PassKind.EXPIRY, PassKind.BALANCE):
        clock.now += 1.0
        table.renew("a")
        table.renew("b")
        await loop.run_once(kind)
        assert not table.owned("dead")
    assert table.leases["s9"].lease_owner in {"a", "b"}


async def test_an_expiry_pass_reads_no_metrics_and_moves_nothing_that_is_served(
    pool: ThreadPoolExecutor,
) -> None:
    leases = [Lease(f"s{i}", TRIM_HORIZON, lease_owner="a", lease_counter=1) for i in range(6)]
    table, metrics, clock = _Table(leases), _Metrics(["a", "b"]), FakeClock()
    loop = _loop(table, metrics, "COOPERATIVE", clock, pool)
    clock.now += 1.0
    assert await loop.run_once(PassKind.EXPIRY) and metrics.scans == 1  # the first pass balances
    handed = {k for k, lease in table.leases.items() if lease.checkpoint_owner == "a"}
    assert handed == table.owned("b") == {"s0", "s1"}, "the balance round started hand-offs"
    for _ in range(3):
        clock.now += 1.0
        table.renew("a")
        report = await loop.run_once(PassKind.EXPIRY)
        assert report.kind is PassKind.EXPIRY and not report.moves
    assert metrics.scans == 1 and table.scans == 4


async def test_a_gone_workers_finished_lease_goes_to_a_live_worker(pool: ThreadPoolExecutor) -> None:
    leases = [
        Lease("parent", SHARD_END, lease_owner="dead", lease_counter=4),
        Lease(
            "child", TRIM_HORIZON, lease_owner="a", lease_counter=1, parent_shard_ids=frozenset({"parent"})
        ),
    ]
    table, clock = _Table(leases), FakeClock()
    loop = _loop(table, _Metrics(["a"]), "COOPERATIVE", clock, pool)
    await loop.run_once(PassKind.BALANCE)
    clock.now += FAILOVER + 0.1
    table.renew("a")
    report = await loop.run_once(PassKind.EXPIRY)
    assert [(m.lease_key, m.to_worker) for m in report.moves] == [("parent", "a")]
    assert table.leases["parent"].lease_owner == "a"  # its ShardTask finds SHARD_END and cleans it up


async def test_the_leader_is_told_of_the_leases_it_assigned_itself(pool: ThreadPoolExecutor) -> None:
    table, clock = _Table([Lease("s0", TRIM_HORIZON, lease_counter=1)]), FakeClock()
    loop = _loop(table, _Metrics(["a"]), "COOPERATIVE", clock, pool)
    told: list[set[str]] = []
    adopted: list[tuple[Lease, float]] = []
    loop.on_assigned = told.append
    loop.adopt_own = lambda lease, sent_at: adopted.append((lease, sent_at))
    clock.now = 7.0
    await loop.run_once(PassKind.EXPIRY)
    assert told == [{"a"}]
    assert adopted == [(table.leases["s0"], 7.0)], "held at once, validated by the assign's send time"


async def test_passes_run_at_the_expiry_interval_and_balance_at_the_assignment_interval(
    pool: ThreadPoolExecutor,
) -> None:
    table, metrics, clock = _Table(_fleet()), _Metrics(["a", "b", "dead"]), FakeClock()
    loop = _loop(table, metrics, "COOPERATIVE", clock, pool)
    loop._on_leadership(True)
    kinds: list[tuple[float, PassKind]] = []
    original = loop.run_once

    async def recording(kind: PassKind = PassKind.BALANCE) -> Any:
        table.renew("a")
        table.renew("b")
        report = await original(kind)
        kinds.append((clock.now, report.kind))
        if clock.now > 45:
            raise asyncio.CancelledError
        return report

    loop.run_once = recording  # type: ignore[method-assign]
    with pytest.raises(asyncio.CancelledError):
        await loop.run()
    balances = [t for t, k in kinds if k is PassKind.BALANCE]
    assert balances[:3] == pytest.approx(
        [0.0, FAILOVER + 0.1, 3 * FAILOVER + 0.1]
    )  # first one at L after gaining
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(kinds)]
    assert max(gaps) <= 1.0 + 1e-9
    assert not table.owned("dead")


async def test_a_hand_off_whose_serving_worker_died_moves_once_expired_not_after_the_hand_off_timeout(
    pool: ThreadPoolExecutor,
) -> None:
    leases = [
        Lease("moving", TRIM_HORIZON, lease_owner="b", checkpoint_owner="dead", lease_counter=5),
        Lease("s1", TRIM_HORIZON, lease_owner="a", lease_counter=1),
        Lease("s2", TRIM_HORIZON, lease_owner="b", lease_counter=1),
    ]
    table, clock = _Table(leases), FakeClock()
    loop = _loop(table, _Metrics(["a", "b"]), "COOPERATIVE", clock, pool)
    await loop.run_once(PassKind.BALANCE)
    for _ in range(10):
        clock.now += 1.0
        table.renew("a")
        table.renew("b")  # b's renewals do not touch the hand-off: "dead" serves it and renews it
        table.leases["moving"] = dataclasses.replace(table.leases["moving"], lease_counter=5)
        assert not (await loop.run_once(PassKind.EXPIRY)).moves
    clock.now += 0.5
    report = await loop.run_once(PassKind.EXPIRY)
    assert [m.lease_key for m in report.moves] == ["moving"]  # 10.5 s, not handoff timeout + failover
    assert table.leases["moving"].checkpoint_owner is None
    assert table.leases["moving"].lease_owner in {"a", "b"}


async def test_a_follower_that_suspects_the_leader_observes_and_moves_its_leases_once_it_leads(
    pool: ThreadPoolExecutor,
) -> None:
    """The leader "dead" stops renewing at t=0; follower "a" suspects it (a missed heartbeat) from t=3,
    observes the counters, takes the lock at t=11 and moves the dead leader's leases when they come due
    one failover after it first saw them (t=13), not one failover after it took the lock (t=21)."""
    table, clock = _Table(_fleet()), FakeClock()
    election = _Election()
    leading = False
    election.is_leader = lambda: leading  # type: ignore[method-assign]
    election.leader_suspect = lambda: not leading and clock.now >= 3.0  # type: ignore[method-assign]
    loop = AssignmentLoop(
        table,
        _Metrics(["a", "b"]),
        election,  # type: ignore[arg-type]
        make_decider("COOPERATIVE"),
        AssignmentConfig(2 * FAILOVER, FAILOVER),
        clock,  # type: ignore[arg-type]
        pool,
        wall=lambda: WALL + clock.now,
    )
    kinds: list[PassKind] = []
    original = loop.run_once

    async def recording(kind: PassKind = PassKind.BALANCE) -> Any:
        nonlocal leading
        table.renew("a")
        table.renew("b")
        if clock.now >= 11.0 and not leading:
            leading = True
            loop._on_leadership(True)
            kind = PassKind.BALANCE
        report = await original(kind)
        kinds.append(report.kind)
        if table.owned("dead") == set() or clock.now > 40:
            raise asyncio.CancelledError
        return report

    loop.run_once = recording  # type: ignore[method-assign]
    with pytest.raises(asyncio.CancelledError):
        await loop.run()
    assert kinds[0] is PassKind.OBSERVE and PassKind.BALANCE in kinds
    assert not table.owned("dead")
    assert clock.now < 14.0, f"moved at {clock.now:.1f}s"


async def test_a_hand_off_to_a_worker_judged_dead_is_placed_at_once_not_completed_to_it(
    pool: ThreadPoolExecutor,
) -> None:
    """b serves a hand-off to "dead" (renewing it); "dead" stops renewing its own leases at t=0. Once its
    leases expire it is judged dead, and the hand-off is placed on a live worker by a plain assign,
    not left for b to complete to a dead worker (or for the hand-off timeout)."""
    leases = [
        *_fleet(),
        Lease("moving", TRIM_HORIZON, lease_owner="dead", checkpoint_owner="b", lease_counter=1),
    ]
    table, clock = _Table(leases), FakeClock()
    loop = _loop(table, _Metrics(["a", "b", "dead"]), "COOPERATIVE", clock, pool)
    await loop.run_once(PassKind.BALANCE)
    for _ in range(13):
        clock.now += 1.0
        table.renew("a")
        table.renew("b")
        moving = table.leases["moving"]
        if moving.checkpoint_owner == "b":  # b renews the hand-off it serves
            table.leases["moving"] = dataclasses.replace(moving, lease_counter=moving.lease_counter + 1)
        await loop.run_once(PassKind.EXPIRY)
    moved = table.leases["moving"]
    assert moved.lease_owner in {"a", "b"} and moved.checkpoint_owner is None
    assert not table.owned("dead")


async def test_a_joining_worker_gets_its_share_in_catch_up_rounds_not_one_interval_per_two_leases(
    pool: ThreadPoolExecutor,
) -> None:
    """20 leases on "a", "b" joins: two hand-offs per worker and round, so five rounds. They follow each
    other half a failover apart (hand-offs complete at once here), not one assignment interval (20 s)."""
    leases = [Lease(f"s{i:02}", TRIM_HORIZON, lease_owner="a", lease_counter=1) for i in range(20)]
    table, clock = _Table(leases), FakeClock()
    loop = _loop(table, _Metrics(["a", "b"]), "COOPERATIVE", clock, pool)
    loop._on_leadership(True)
    original = loop.run_once

    async def recording(kind: PassKind = PassKind.BALANCE) -> Any:
        table.renew("a")
        table.renew("b")
        for key, lease in table.leases.items():  # the owners complete every hand-off at once
            if lease.checkpoint_owner is not None:
                table.leases[key] = dataclasses.replace(
                    lease, checkpoint_owner=None, lease_counter=lease.lease_counter + 1
                )
        report = await original(kind)
        if len(table.owned("b")) >= 10 or clock.now > 120:
            raise asyncio.CancelledError
        return report

    loop.run_once = recording  # type: ignore[method-assign]
    with pytest.raises(asyncio.CancelledError):
        await loop.run()
    assert len(table.owned("b")) == 10
    assert clock.now <= 4 * FAILOVER / 2 + 1.0, f"balanced at {clock.now:.1f}s"


@pytest.mark.parametrize("strategy", ["COOPERATIVE", "VARIANCE", "LEASE_COUNT_BASED"])
async def test_a_second_worker_killed_seconds_later_receives_none_of_the_first_ones_leases(
    pool: ThreadPoolExecutor, strategy: str
) -> None:
    """ "x" stops renewing at t=0, "y" at t=3 (both with fresh metrics, neither expired yet when x's
    leases move at t=10): y renewed nothing for half a failover, so it gets none of them."""
    owners = ["a", "a", "x", "x", "y", "y"]  # balanced: the first round moves nothing
    leases = [Lease(f"s{i}", TRIM_HORIZON, lease_owner=o, lease_counter=1) for i, o in enumerate(owners)]
    table, clock = _Table(leases), FakeClock()
    loop = _loop(table, _Metrics(["a", "x", "y"]), strategy, clock, pool)
    await loop.run_once(PassKind.BALANCE)
    for _ in range(12):
        clock.now += 1.0
        table.renew("a")
        if clock.now < 3.0:
            table.renew("y")
        await loop.run_once(PassKind.EXPIRY)
    assert not table.owned("x")
    assert table.owned("y") == {"s4", "s5"}, "x's leases went to a, not to the quiet y"


async def test_a_lease_given_to_a_kcl_daemon_worker_that_never_adopts_it_is_placed_again(
    pool: ThreadPoolExecutor,
) -> None:
    """ "b" (a kcl-daemon worker: it publishes the extras) died owning nothing, so no rule can tell; the
    lease it is given is never renewed, and after half a failover it goes to a live worker, a failover
    before it would expire. A Java worker ("j") given a lease is left alone: it adopts later."""

    class _Ours(_Metrics):
        def scan(self) -> tuple[list[WorkerMetricStats], list[str]]:
            self.scans += 1
            return [WorkerMetricStats(w, WALL, extra=None if w == "j" else {}) for w in self.workers], []

    table, clock = _Table([Lease("s0", TRIM_HORIZON, lease_counter=1)]), FakeClock()
    loop = _loop(table, _Ours(["b"]), "COOPERATIVE", clock, pool)
    loop.adopt_own = lambda lease, sent_at: None
    await loop.run_once(PassKind.BALANCE)
    assert table.owned("b") == {"s0"}
    loop._metrics = _Ours(["a", "b"])  # "a" (the leader) joins; b never renews s0
    await loop.run_once(PassKind.BALANCE)
    for _ in range(6):
        clock.now += 1.0
        table.renew("a")
        await loop.run_once(PassKind.EXPIRY)
    assert table.owned("b") == set() and table.owned("a") == {"s0"}, "placed again past 5 s, not at 10 s"

    java_table = _Table([Lease("s1", TRIM_HORIZON, lease_counter=1)])
    java = _loop(java_table, _Ours(["j"]), "COOPERATIVE", FakeClock(), pool)
    await java.run_once(PassKind.BALANCE)
    assert java_table.owned("j") == {"s1"}
    assert not java._assigned, "a Java worker's assignment is not watched"


@pytest.mark.parametrize("strategy", ["COOPERATIVE", "VARIANCE", "LEASE_COUNT_BASED"])
async def test_a_worker_restarting_with_a_grace_is_never_judged_whatever_the_metrics_read_said(
    strategy: str, pool: ThreadPoolExecutor, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 28: the leader read the metrics (ACTIVE) just before "dead" stopped; the next metrics read is
    a balance round away. The worker's last write of its leases marks its grace: for the whole grace,
    expiry and balance passes alike neither judge it quiet or dead nor move its leases."""
    caplog.set_level(logging.INFO)
    table, clock = _Table(_fleet()), FakeClock()
    loop = _loop(table, _Metrics(["a", "b", "dead"]), strategy, clock, pool)
    await loop.run_once(PassKind.BALANCE)  # the metrics as they were before the stop
    for key in table.owned("dead"):  # the stopping worker's last write: a renewal that marks its grace
        lease = table.leases[key]
        mark = RestartMark("dead", lease.lease_counter + 1, WALL + clock.now + 3 * FAILOVER)
        table.leases[key] = dataclasses.replace(
            lease, lease_counter=lease.lease_counter + 1, extra={RESTART_ATTRIBUTE: mark_attribute(mark)}
        )
    while clock.now < 3 * FAILOVER - 1:
        clock.now += 1.0
        table.renew("a")
        table.renew("b")
        kind = PassKind.BALANCE if clock.now % (2 * FAILOVER) < 1 else PassKind.EXPIRY
        report = await loop.run_once(kind)
        assert not report.moves, (clock.now, report.moves)
    assert table.owned("dead") == {"s4", "s5"}
    assert "looks dead" not in caplog.text and "renewed nothing" not in caplog.text
    assert "worker dead is restarting (its leases say so)" in caplog.text
    clock.now += 2.0  # the grace is over: its leases are expired, and move
    table.renew("a")
    table.renew("b")
    report = await loop.run_once(PassKind.EXPIRY)
    assert {m.lease_key for m in report.moves} == {"s4", "s5"}


async def test_a_lease_handed_to_a_java_worker_waits_two_failovers_for_its_first_renewal(
    pool: ThreadPoolExecutor,
) -> None:
    """A Java worker ("j", no extras) discovers a lease moved to it only at its next lease discovery, once
    a failover, and renews it up to a third of a failover later: the lease stays its own until two
    failovers after the move (Java's own leader looks again only then), and j is not judged dead for
    it. A lease it held for long and stopped renewing expires at one failover, as before."""

    class _Ours(_Metrics):
        def scan(self) -> tuple[list[WorkerMetricStats], list[str]]:
            self.scans += 1
            return [WorkerMetricStats(w, WALL, extra=None if w == "j" else {}) for w in self.workers], []

    table = _Table([Lease("s0", TRIM_HORIZON, lease_owner="a", lease_counter=1)])
    table.leases["old"] = Lease("old", TRIM_HORIZON, lease_owner="j", lease_counter=1)
    clock = FakeClock()
    loop = _loop(table, _Ours(["a", "j"]), "COOPERATIVE", clock, pool)
    loop.adopt_own = lambda lease, sent_at: None
    await loop.run_once(PassKind.BALANCE)  # both first seen: no arrival
    table.leases["s0"] = dataclasses.replace(table.leases["s0"], lease_owner="j", lease_counter=2)  # handed
    for _ in range(13):  # 13 s: discovery after a failover, the first renewal a third of one later
        clock.now += 1.0
        table.renew("a")
        await loop.run_once(PassKind.EXPIRY)
    assert table.owned("j") == {"s0"}, "the moved lease stays with j past one failover"
    assert "old" in table.owned("a"), "the lease j held all along and never renewed expired at a failover"
    table.renew("j")  # j discovered s0 and renews it
    for _ in range(15):
        clock.now += 1.0
        table.renew("a")
        table.renew("j")
        await loop.run_once(PassKind.EXPIRY)
    assert table.owned("j") == {"s0"}


class _Heartbeats:
    """The heartbeat place: ``beat(worker)`` advances a worker's heartbeat (leaseRenewal = PER_WORKER)."""

    def __init__(self) -> None:
        self.beats: dict[str, int] = {}

    def beat(self, worker: str) -> None:
        self.beats[worker] = self.beats.get(worker, 0) + 1

    def heartbeat_items(self) -> list[dict[str, dict[str, str]]]:
        return [
            {"wid": {"S": w}, "kdhb": {"N": str(n)}, "kdrm": {"S": "PER_WORKER"}, "lut": {"N": "0"}}
            for w, n in self.beats.items()
        ]


@pytest.mark.parametrize("per_worker", [True, False], ids=["per-worker", "per-lease"])
async def test_the_leader_judges_expiry_through_the_heartbeats_of_a_fleet_renewing_per_worker(
    per_worker: bool, pool: ThreadPoolExecutor
) -> None:
    """Leases kept by heartbeat: "a" and "b" write none (their counters stand still), "c" renews its
    lease per lease. A leader renewing per worker moves none of them while the heartbeats advance, and
    b's once its heartbeat stops; a leader judging counters alone (Java's rule) takes a's and b's."""
    leases = [Lease(f"s{i}", TRIM_HORIZON, lease_owner=o, lease_counter=1) for i, o in enumerate("aabbc")]
    table, clock, beats = _Table(leases), FakeClock(), _Heartbeats()
    loop = AssignmentLoop(
        table,
        _Metrics(["a", "b", "c"]),
        _Election(),  # type: ignore[arg-type]
        make_decider("LEASE_COUNT_BASED"),
        AssignmentConfig(2 * FAILOVER, FAILOVER),
        clock,  # type: ignore[arg-type]
        pool,
        wall=lambda: WALL + clock.now,
        heartbeats=beats if per_worker else None,
    )
    await loop.run_once(PassKind.BALANCE)
    moved: set[str] = set()
    for _ in range(15):  # 15 s: past the failover, heartbeats every second, no lease write of a or b
        clock.now += 1.0
        beats.beat("a")
        beats.beat("b")
        table.renew("c")
        moved |= {m.lease_key for m in (await loop.run_once(PassKind.EXPIRY)).moves}
    assert moved == (set() if per_worker else {"s0", "s1", "s2", "s3"})
    if not per_worker:
        return
    for _ in range(11):  # "b" stops: its leases go once its heartbeat stood still for the failover
        clock.now += 1.0
        beats.beat("a")
        table.renew("c")
        moved |= {m.lease_key for m in (await loop.run_once(PassKind.EXPIRY)).moves}
    assert moved == {"s2", "s3"} and not table.owned("b")
    assert table.owned("a") >= {"s0", "s1"}
