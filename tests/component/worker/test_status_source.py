"""The status page's gatherer (kcl_daemon.worker.status) over stand-ins of the scheduler's plain state: what
each shard shows (figures, notes for a hand-off, a park, a wait on parents), the records rate and the lag
history from the sampler, the lease mode and leader, and the fleet from the registry's last scan."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kcl_daemon.core.leader.client_version import Algorithm, ClientVersion
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.lifecycle.states import ShardState
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.core.worker.health import Phase
from kcl_daemon.metrics.registry import DaemonMetrics
from kcl_daemon.worker.status import HISTORY_SAMPLES, StatusInfo, WorkerStatus

ME = "worker-a"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lease(n: int, owner: str | None = ME, **changes: Any) -> Lease:
    return Lease(f"shardId-00000000000{n}", ExtendedSequenceNumber("TRIM_HORIZON"), owner, 3, **changes)


def consumer(records: int, lag: int | None = 1500, **changes: Any) -> SimpleNamespace:
    fields: dict[str, Any] = {
        "state": ShardState.PROCESSING,
        "millis_behind_latest": lag,
        "stats": SimpleNamespace(records_delivered=records, child_starts=2),
        "checkpoint": ExtendedSequenceNumber("4959"),
        "checkpointed_at": 95.0,
        "child_pid": 77,
        "last_stderr_line": "warn:\x1b[31m slow\n",
        "stalled": None,
    }
    fields.update(changes)
    return SimpleNamespace(**fields)


def scheduler(**changes: Any) -> Any:
    fields: dict[str, Any] = {
        "coordinator": SimpleNamespace(held={}),
        "tasks": {},
        "parked": {},
        "handing_off": frozenset(),
        "lease_mode": None,
        "phase": Phase.RUNNING,
        "keep_leases_until": None,
    }
    fields.update(changes)
    return SimpleNamespace(**fields)


def held(*leases: Lease) -> SimpleNamespace:
    return SimpleNamespace(held={x.lease_key: SimpleNamespace(lease=x) for x in leases})


def status(sched: Any, clock: Clock, metrics: DaemonMetrics | None = None) -> WorkerStatus:
    info = StatusInfo(ME, "orders", "orders-app", "zone-1", 30.0)
    return WorkerStatus(sched, info, metrics=metrics, monotonic=clock, wall=lambda: 1_800_000_000.0)


def test_a_processing_shard_shows_its_figures_rate_and_lag_history() -> None:
    clock = Clock()
    one = lease(1)
    running = consumer(records=100)
    sched = scheduler(
        coordinator=held(one),
        tasks={one.lease_key: SimpleNamespace(lease=one, waiting_on=(), consumer=running)},
    )
    source = status(sched, clock)
    source.sample()
    clock.now += 5.0
    running.stats.records_delivered, running.millis_behind_latest = 150, 500
    source.sample()
    clock.now += 1.0
    running.stats.records_delivered = 160
    (view,) = source.snapshot().shards
    assert view.shard_id == "shardId-000000000001" and view.state == "processing"
    assert view.millis_behind_latest == 500 and view.records_delivered == 160
    assert view.records_per_s == 10.0  # against the sample 1 s old
    assert view.checkpoint == "4959" and view.checkpoint_age_s == 11.0
    assert (view.child_pid, view.child_restarts) == (77, 1)
    assert view.last_stderr == "warn: [31m slow"
    assert view.lag_history[-3:] == (1500, 500, 500) and len(view.lag_history) == HISTORY_SAMPLES + 1
    assert view.note is None


def test_notes_for_a_hand_off_a_park_and_a_wait_on_parents() -> None:
    clock = Clock()
    handed = lease(1, "worker-b", checkpoint_owner=ME)  # the leader marked it: moving to worker-b
    parked, waiting = lease(2), lease(3)
    sched = scheduler(
        coordinator=held(handed, parked, waiting),
        tasks={
            handed.lease_key: SimpleNamespace(lease=handed, waiting_on=(), consumer=consumer(5)),
            waiting.lease_key: SimpleNamespace(
                lease=waiting, waiting_on=("shardId-000000000000",), consumer=None
            ),
        },
        parked={parked.lease_key: ("it failed 10 times in a row", None)},
    )
    views = {v.lease_key: v for v in status(sched, clock).snapshot().shards}
    assert views[handed.lease_key].note == "handing off to worker-b"
    assert views[parked.lease_key].state == "parked"
    assert views[parked.lease_key].note == "parked: it failed 10 times in a row"
    assert views[waiting.lease_key].state == "waiting-on-parents"
    assert views[waiting.lease_key].note == "waiting on parent shardId-000000000000"
    assert views[waiting.lease_key].checkpoint == "TRIM_HORIZON"


def test_the_worker_the_lease_mode_and_the_leader() -> None:
    clock = Clock()
    mode = SimpleNamespace(
        algorithm=Algorithm.LEADER,
        version=ClientVersion.V3X,
        election=SimpleNamespace(leader_seen="worker-b"),
    )
    snap = status(scheduler(lease_mode=mode, keep_leases_until=1e12), clock).snapshot()
    w = snap.worker
    assert w.lease_mode == "3.x leader (CLIENT_VERSION_3X)"
    assert (w.leader, w.leader_id) == (False, "worker-b")
    assert (w.worker_id, w.zone, w.stream, w.table, w.phase) == (
        ME,
        "zone-1",
        "orders",
        "orders-app",
        "running",
    )
    assert w.restart_grace_s == 30.0 and w.keeping_leases
    assert not w.readiness.ok  # no health source attached: said, not assumed
    taker = status(scheduler(), clock).snapshot().worker
    assert (taker.lease_mode, taker.leader, taker.leader_id) == ("2.x taker", None, None)


def test_the_fleet_is_the_last_scan_with_its_expired_and_unowned_leases() -> None:
    clock = Clock()
    metrics = DaemonMetrics(process_metrics=False)
    source = status(scheduler(), clock, metrics)
    assert source.snapshot().fleet.scanned_age_s is None  # no scan yet (a 3.x follower)
    leases = [lease(1), lease(2), lease(3, "worker-b"), lease(4, "worker-c"), lease(5, None)]
    metrics.worker.scanned(leases, frozenset({"shardId-000000000004"}))
    source.sample()
    fleet = source.snapshot().fleet
    assert fleet.scanned_age_s is not None and fleet.total_leases == 5
    assert [(w.worker_id, w.leases, w.history[-1]) for w in fleet.workers] == [
        (ME, 2, 2),
        ("worker-b", 1, 1),
        ("worker-c", 1, 1),
    ]
    assert fleet.expired == (("shardId-000000000004", "worker-c"),) and fleet.expired_count == 1
    assert fleet.unowned == ("shardId-000000000005",) and fleet.unowned_count == 1
