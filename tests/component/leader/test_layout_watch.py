"""The ``layout-check`` loop on in-memory tables: a KCL 3.0-3.4 worker beside a single table, and a
single-table worker beside the 3.0-3.4 layout, are named in a WARNING at most every 5 minutes, and
counted in a gauge (leader.layout_watch)."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import pytest

from kcl_daemon.core.leader.table_migration import TableMigrationStatus
from kcl_daemon.core.leader.worker_metrics import WorkerMetricStats
from kcl_daemon.leader.layout_watch import LayoutWatch, LayoutWatchConfig
from kcl_daemon.leader.tables import FleetMetrics, Tables
from kcl_daemon.metrics.registry import DaemonMetrics
from tests.support.clocks import FakeClock
from tests.support.fake_tables import fake_tables

NOW = 1_800_000_000.0
POOL = ThreadPoolExecutor(1)


def _watch(tables: Tables, clock: FakeClock, counts: list[int]) -> LayoutWatch:
    config = LayoutWatchConfig("py-a", interval_s=60.0, reporter_period_s=30.0)
    return LayoutWatch(
        tables, FleetMetrics(tables), config, clock, POOL, wall=lambda: NOW, count=counts.append
    )


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


async def test_a_3_0_to_3_4_worker_beside_a_single_table(caplog: pytest.LogCaptureFixture) -> None:
    tables = fake_tables("py-a", legacy=False)
    tables.start()
    assert tables.status is TableMigrationStatus.COMPLETE
    clock, counts = FakeClock(), []
    watch = _watch(tables, clock, counts)
    with caplog.at_level(logging.INFO, "kcl_daemon.leader.layout_watch"):
        assert await watch.check_once() == ()  # no side table: one DescribeTable, nothing else
        # Java 3.1.3 joins: it creates both side tables and publishes its metrics there
        tables.legacy.present = tables.legacy_metrics.present = True
        tables.legacy_metrics.publish(WorkerMetricStats("java-1", NOW - 2))
        for _ in range(6):  # every minute for 6 minutes: warned at 0 and at 5 minutes
            await watch.check_once()
            await clock.sleep(60.0)
        tables.legacy_metrics.rows.clear()  # it stopped
        await watch.check_once()
    warnings = _warnings(caplog)
    assert len(warnings) == 2
    for word in ("worker java-1", "KCL 3.0-3.4 layout", "single-table layout", "leaseTableLayout"):
        assert word in warnings[0]
    assert counts == [0, 1, 1, 1, 1, 1, 1, 0]
    assert any("any more" in r.getMessage() for r in caplog.records)


async def test_a_single_table_worker_beside_the_side_tables(caplog: pytest.LogCaptureFixture) -> None:
    tables = fake_tables("py-a", legacy=True)
    tables.start()
    assert tables.status is TableMigrationStatus.INIT
    fleet = FleetMetrics(tables)
    tables.lease_table_metrics.publish(WorkerMetricStats("py-old", NOW - 2))
    fleet.scan()  # the fleet's own scan (readiness monitor, leader, fleet CPU check): no scan of its own
    tables.lease_table.put(
        "Leader",
        {"ownerName": "py-old", "recordVersionNumber": "r1"},
        require_absent=True,
        entity_type="LEADER",
    )
    counts: list[int] = []
    watch = LayoutWatch(
        tables, fleet, LayoutWatchConfig("py-a"), FakeClock(), POOL, wall=lambda: NOW, count=counts.append
    )
    with caplog.at_level(logging.WARNING, "kcl_daemon.leader.layout_watch"):
        (stranger,) = await watch.check_once()
    assert stranger.worker_id == "py-old" and "lease table app" in stranger.message
    assert "Restart it" in _warnings(caplog)[0] and counts == [1]


def test_the_gauge_is_in_the_registry() -> None:
    metrics = DaemonMetrics(process_metrics=False)
    metrics.worker.incompatible_layout_workers(2)
    samples = {s.family: s.value for s in metrics.snapshot()}
    assert samples["kcl_incompatible_layout_workers"] == 2
