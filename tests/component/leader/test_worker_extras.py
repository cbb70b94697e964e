"""kcl-daemon's extra worker-metrics attribute, from the publisher through the item to the leader's views."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kcl_daemon.core.leader.assignor import CooperativeAssignor
from kcl_daemon.core.leader.decider import WorkerState, WorkerView
from kcl_daemon.core.leader.worker_metrics import WorkerMetricStats, from_item, to_item
from kcl_daemon.core.leader.zones import EXTRA_ATTRIBUTE
from kcl_daemon.leader.assignment import AssignmentLoop
from kcl_daemon.leader.assignment_config import AssignmentConfig
from kcl_daemon.leader.mode import make_decider
from kcl_daemon.leader.worker_metrics import WorkerMetricsConfig, WorkerMetricsPublisher
from tests.support.clocks import FakeClock

WALL = 1_700_000_000.0


class _Table:
    def __init__(self) -> None:
        self.items: list[WorkerMetricStats] = []

    def publish(self, stats: WorkerMetricStats) -> None:
        self.items.append(stats)

    def delete(self, worker_id: str) -> None:
        raise AssertionError("a worker with a restart grace must not delete its item")


class _Sampler:
    def due(self) -> bool:
        return True

    def sample(self) -> float:
        return 12.0


class _Election:
    def __init__(self) -> None:
        self.on_change: list[Any] = []


def test_item_round_trip_keeps_the_extra_map_and_java_items_have_none() -> None:
    stats = WorkerMetricStats(
        "w", WALL, {"C": (1.0,)}, {"C": (100.0,)}, extra={"zone": "az1", "capacity": 2.0}
    )
    item = {"wid": "w", **to_item(stats)}
    assert item[EXTRA_ATTRIBUTE] == {"zone": "az1", "capacity": 2.0}
    assert from_item(item) == stats
    java = {"wid": "j", "lut": int(WALL), "sts": {}, "opr": {}}
    assert from_item(java).extra is None and EXTRA_ATTRIBUTE not in to_item(from_item(java))


def test_publisher_sends_zone_and_declares_a_restart_grace() -> None:
    table = _Table()
    config = WorkerMetricsConfig("w1", zone="az2", capacity=2.0)
    with ThreadPoolExecutor(1) as pool:
        publisher = WorkerMetricsPublisher(table, config, FakeClock(), _Sampler(), pool, wall=lambda: WALL)  # type: ignore[arg-type]
        publisher.capture()
        asyncio.run(publisher.publish_once())
        assert asyncio.run(publisher.declare_restart(30.0))
        asyncio.run(publisher.publish_once())  # nothing more after the declaration
    active, restarting = table.items
    assert active.extra == {"zone": "az2", "capacity": 2.0, "state": "active"}
    assert restarting.extra == {
        "zone": "az2",
        "capacity": 2.0,
        "state": "restarting",
        "graceUntil": WALL + 30,
    }
    assert restarting.stats == active.stats


def test_leader_views_carry_zone_capacity_and_a_grace_on_its_own_clock() -> None:
    clock = FakeClock(500.0)
    loop = AssignmentLoop(
        None,
        None,
        _Election(),
        CooperativeAssignor(),
        AssignmentConfig(20.0, 10.0),
        clock,
        None,
        wall=lambda: WALL,  # type: ignore[arg-type]
    )
    lut = WALL - 120  # dead by its age, but restarting within its grace
    entries = [
        WorkerMetricStats("a", WALL, extra={"zone": "az1", "capacity": 2, "state": "active"}),
        WorkerMetricStats("r", lut, extra={"zone": "az2", "state": "restarting", "graceUntil": WALL + 40}),
        WorkerMetricStats("late", lut, extra={"state": "restarting", "graceUntil": WALL - 1}),
        WorkerMetricStats("java", WALL),
        WorkerMetricStats("bad", WALL, extra={"state": "sleeping"}),
    ]
    views = {v.worker_id: v for v in loop._workers(entries, 500.0)}
    assert views["a"] == WorkerView("a", zone="az1", capacity=2.0, last_update=WALL)
    assert views["r"].state is WorkerState.RESTARTING and views["r"].grace_until == 540.0
    assert "late" not in views  # grace over and metrics stale: gone
    assert views["java"] == WorkerView("java", last_update=WALL)
    assert views["bad"].state is WorkerState.ACTIVE  # an unreadable extra is ignored, with a warning


def test_cooperative_is_a_strategy() -> None:
    assert make_decider("COOPERATIVE").name == "cooperative"
    assert make_decider("VARIANCE").name == "variance"


def test_a_restart_grace_needs_a_fixed_worker_id() -> None:
    from kcl_daemon.config.settings import Settings
    from kcl_daemon.leader.configure import restart_grace_s

    assert restart_grace_s(Settings(worker_id="w1", restart_grace_s=30.0).leader()) == 30.0
    assert restart_grace_s(Settings(restart_grace_s=30.0).leader()) == 0.0
