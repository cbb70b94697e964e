"""A kcl-daemon worker that sees live Java workers without CPU reports none either (logged once), so a
Java leader balances the whole fleet as one group (contract §5.2); with the Java workers gone it reports
CPU again."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kcl_daemon.core.leader.client_version import ClientVersionConfig
from kcl_daemon.core.leader.worker_metrics import WorkerMetricStats
from kcl_daemon.leader.cpu import CpuSampler
from kcl_daemon.leader.mode import LeaderMode, LeaderModeConfig
from kcl_daemon.leader.worker_metrics import WorkerMetricsConfig, WorkerMetricsPublisher
from kcl_daemon.metrics.observer import NULL_WORKER_OBSERVER
from tests.support.clocks import FakeClock
from tests.support.fake_tables import FakeMetricsTable, fake_tables

NOW = 1_800_000_000.0
POOL = ThreadPoolExecutor(1)


def _publisher(table: object, disabled: bool = False) -> WorkerMetricsPublisher:
    clock = FakeClock()
    sampler = CpuSampler(lambda: (1.0, 1.0), clock.monotonic)
    config = WorkerMetricsConfig("py-1", disabled=disabled)
    return WorkerMetricsPublisher(table, config, clock, sampler, POOL, wall=lambda: NOW)


def test_reporting_follows_the_fleet_and_is_logged_on_each_change(caplog: pytest.LogCaptureFixture) -> None:
    publisher = _publisher(object())
    publisher._samples = [40.0]
    assert "C" in publisher.next_stats().stats
    with caplog.at_level(logging.INFO, "kcl_daemon.leader.worker_metrics"):
        publisher.align_with_fleet(("java-1", "java-2"))
        publisher.align_with_fleet(("java-1",))  # still Java workers: no second message
        stats = publisher.next_stats()
        assert (stats.stats, stats.operating_range, stats.support_code) == ({}, {}, 1)
        publisher.align_with_fleet(())
        publisher._samples = [40.0]
        assert "C" in publisher.next_stats().stats
    messages = [r.getMessage() for r in caplog.records]
    assert sum("report no CPU" in m for m in messages) == 1
    assert sum("reporting CPU again" in m for m in messages) == 1
    # disableWorkerMetrics: never CPU, nothing to align or log
    disabled = _publisher(object(), disabled=True)
    disabled.align_with_fleet(("java-1",))
    assert disabled.cpu_off_because is None and disabled.next_stats().stats == {}


class _Scheduler:
    def __init__(self) -> None:
        self.coordinator = self
        self.observer = NULL_WORKER_OBSERVER
        self.loops: list[str] = []

    async def run_taker(self) -> None:
        await asyncio.Event().wait()

    def bytes_delivered(self, key: str) -> int | None:
        return None

    def stop_shard(self, key: str) -> None:
        return None

    def adopt_written(self, lease: object, sent_at: float) -> bool:
        return False

    def add_loop(self, name: str, factory: Callable[[], Coroutine[Any, Any, None]]) -> asyncio.Task[None]:
        self.loops.append(name)

        async def idle() -> None:
            await asyncio.Event().wait()

        return asyncio.create_task(idle(), name=name)


class _Table:
    throughput_source: object = None


async def test_a_worker_joining_a_fleet_with_a_java_35_worker_reports_no_cpu_from_its_first_report() -> None:
    tables = fake_tables("py-1", legacy=False)  # a KCL 3.5 single-table application
    java_row = WorkerMetricStats("java-1", NOW - 3, support_code=1, support_updated_s=NOW - 3)
    rows: FakeMetricsTable = tables.lease_table_metrics  # type: ignore[assignment]
    rows.rows["java-1"] = java_row
    tables.lease_table.items["Migration3.0"] = {  # type: ignore[attr-defined]
        "cv": "CLIENT_VERSION_3X",
        "entityType": "CLIENT_VERSION_MIGRATION",
    }
    mode = LeaderMode(
        LeaderModeConfig("py-1", ClientVersionConfig.V3X, metrics=WorkerMetricsConfig("py-1")),
        _Table(),
        tables,
        FakeClock(),
        wall=lambda: NOW,
    )
    scheduler: Any = _Scheduler()
    await mode.start(scheduler)
    assert mode.publisher is not None and mode.publisher.cpu_off_because is not None
    assert "fleet-cpu-check" in scheduler.loops
    await mode.publisher.publish_once()
    ours = rows.rows["py-1"]
    assert (ours.stats, ours.support_code) == ({}, 1)
    for task in asyncio.all_tasks():
        if task is not asyncio.current_task():
            task.cancel()
