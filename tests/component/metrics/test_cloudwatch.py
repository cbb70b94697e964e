"""The CloudWatch exporter: a bounded queue, failures counted and logged once per interval, and what it
collected published."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from kcl_daemon.aws.cloudwatch import Datum
from kcl_daemon.errors import Throttled
from kcl_daemon.metrics.cloudwatch import CloudWatchExporter
from kcl_daemon.metrics.cloudwatch_data import CloudWatchPlan
from kcl_daemon.metrics.registry import DaemonMetrics
from tests.support.clocks import FakeClock

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def plan(level: str = "DETAILED", dims: tuple[str, ...] = ("ALL",)) -> CloudWatchPlan:
    return CloudWatchPlan.from_settings("app", level, dims, "w1", "stream")


def two_shards() -> DaemonMetrics:
    metrics = DaemonMetrics(process_metrics=False)
    metrics.shard("shard-0").batch(10, 100, 5, 50.0)
    metrics.shard("shard-1").batch(20, 200, 7, 70.0)
    metrics.shard("shard-1").action_done("processRecords", 0.002)
    metrics.call("kinesis", "GetRecords", error=False, throttled=False)
    return metrics


async def test_exporter_bounds_its_queue_and_counts_and_logs_failures_once_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = two_shards()
    calls: list[int] = []

    def failing_put(namespace: str, datums: object) -> int:
        calls.append(len(datums))  # type: ignore[arg-type]
        raise Throttled("PutMetricData: slow down")

    exporter = CloudWatchExporter(metrics, plan(), failing_put, FakeClock(), max_queue=5, now=lambda: NOW)
    assert exporter.collect() == 5
    dropped = metrics.counter("kcl_metrics_dropped")._value.get()
    assert dropped > 0
    with caplog.at_level(logging.WARNING):
        await exporter.flush()
        exporter.collect()
        await exporter.flush()
        exporter._log_failures()
        exporter._log_failures()
    assert calls and calls[0] == 5
    assert metrics.counter("kcl_cloudwatch_put_failures")._value.get() == 2
    warnings = [r for r in caplog.records if "PutMetricData" in r.getMessage()]
    assert len(warnings) == 1 and "2 PutMetricData call(s) failed" in warnings[0].getMessage()


async def test_exporter_publishes_what_it_collected() -> None:
    metrics = two_shards()
    published: list[Datum] = []

    def put(namespace: str, datums: list[Datum]) -> int:
        assert namespace == "app"
        published.extend(datums)
        return 1

    exporter = CloudWatchExporter(metrics, plan(), put, FakeClock(), now=lambda: NOW)  # type: ignore[arg-type]
    queued = exporter.collect()
    await exporter.flush()
    assert len(published) == queued == exporter.published > 0
