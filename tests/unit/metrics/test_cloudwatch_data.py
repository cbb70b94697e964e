"""CloudWatch data points from the metrics registry: levels, dimensions and counter deltas."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.aws.cloudwatch import Datum
from kcl_daemon.metrics.cloudwatch_data import CloudWatchPlan, datums_from
from kcl_daemon.metrics.registry import DaemonMetrics

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


def by_name(datums: list[Datum], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {d.dimensions: d.value for d in datums if d.name == name}


def test_detailed_publishes_per_shard_with_every_dimension() -> None:
    datums, _ = datums_from(two_shards().snapshot(), {}, plan(), NOW)
    records = by_name(datums, "RecordsProcessed")
    key = (
        ("Operation", "ProcessTask"),
        ("ShardId", "shard-1"),
        ("StreamId", "stream"),
        ("WorkerIdentifier", "w1"),
    )
    assert records[key] == 20 and len(records) == 2
    assert by_name(datums, "ChildActionTime") == {
        (("Operation", "ChildAction.processRecords"), ("ShardId", "shard-1"), ("StreamId", "stream"),
         ("WorkerIdentifier", "w1")): pytest.approx(2.0)
    }  # fmt: skip
    assert (
        ("Operation", "Kinesis.GetRecords"),
        ("StreamId", "stream"),
        ("WorkerIdentifier", "w1"),
    ) in by_name(datums, "Calls")


def test_summary_merges_shards_sums_counters_takes_the_max_gauge_and_drops_detailed_metrics() -> None:
    datums, _ = datums_from(two_shards().snapshot(), {}, plan("SUMMARY", ("Operation",)), NOW)
    assert by_name(datums, "RecordsProcessed") == {(("Operation", "ProcessTask"),): 30}
    assert by_name(datums, "MillisBehindLatest") == {(("Operation", "ProcessTask"),): 7}
    assert by_name(datums, "ChildActionTime") == {}  # DETAILED only
    assert all(dict(d.dimensions).keys() == {"Operation"} for d in datums)


def test_none_publishes_nothing_and_counters_are_deltas() -> None:
    metrics = two_shards()
    assert datums_from(metrics.snapshot(), {}, plan("NONE"), NOW)[0] == []
    _first, previous = datums_from(metrics.snapshot(), {}, plan("SUMMARY", ()), NOW)
    metrics.shard("shard-0").batch(5, 50, 0, 1.0)
    second, _ = datums_from(metrics.snapshot(), previous, plan("SUMMARY", ()), NOW)
    assert by_name(second, "RecordsProcessed") == {(("Operation", "ProcessTask"),): 5}
    assert by_name(second, "ChildActionTime") == {}  # no new observations: nothing


@given(st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=10))
def test_counter_deltas_add_up_to_the_total(increments: list[int]) -> None:
    metrics = DaemonMetrics(process_metrics=False)
    shard = metrics.shard("s")
    previous: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[float, float]] = {}
    published = 0.0
    for n in increments:
        shard.batch(n, n, None, 0.0)
        datums, previous = datums_from(metrics.snapshot(), previous, plan("SUMMARY", ()), NOW)
        published += sum(by_name(datums, "RecordsProcessed").values())
    assert published == sum(increments)
