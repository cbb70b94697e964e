"""Metrics: fleet figures, CloudWatch levels/dimensions/deltas, the CloudWatch exporter's queue and
failure handling, and the metric list of docs/monitoring.md."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.aws.cloudwatch import Datum
from kcl_daemon.core.fleet.figures import fleet_figures
from kcl_daemon.core.lease import Lease
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.errors import Throttled
from kcl_daemon.metrics.catalog import markdown_metrics
from kcl_daemon.metrics.cloudwatch import CloudWatchExporter
from kcl_daemon.metrics.cloudwatch_data import CloudWatchPlan, datums_from
from kcl_daemon.metrics.registry import DaemonMetrics
from tests.support.clocks import FakeClock
from tests.support.paths import REPO

NOW = datetime(2026, 1, 1, tzinfo=UTC)
MONITORING = (REPO / "docs" / "monitoring.md").read_text(encoding="utf-8")


def lease(key: str, owner: str | None, checkpoint: str = "TRIM_HORIZON") -> Lease:
    return Lease(key, ExtendedSequenceNumber(checkpoint), lease_owner=owner, lease_counter=1)


# --- fleet figures ------------------------------------------------------------------------------------


def test_fleet_figures_count_unclaimed_expired_finished_and_skew() -> None:
    leases = [
        lease("s0", "zone-a-1"),
        lease("s1", "zone-a-1"),
        lease("s2", "zone-b-1"),
        lease("s3", None),
        lease("s4", "zone-b-2", "SHARD_END"),
    ]
    figures = fleet_figures(leases, expired_keys=frozenset({"s2", "s3"}), total_shards=5)
    assert (figures.total_leases, figures.unclaimed, figures.expired, figures.finished) == (5, 1, 1, 1)
    assert figures.per_worker == {"zone-a-1": 2, "zone-b-1": 1, "zone-b-2": 1}
    assert figures.per_zone == {"zone": 4}
    assert (figures.skew, figures.workers, figures.total_shards) == (1, 3, 5)


owners = st.lists(st.one_of(st.none(), st.sampled_from(["a-1", "a-2", "b-1"])), max_size=30)


@given(owners)
def test_fleet_figures_add_up(lease_owners: list[str | None]) -> None:
    figures = fleet_figures([lease(f"s{i}", owner) for i, owner in enumerate(lease_owners)])
    assert sum(figures.per_worker.values()) + figures.unclaimed == figures.total_leases == len(lease_owners)
    assert sum(figures.per_zone.values()) == sum(figures.per_worker.values())
    assert 0 <= figures.skew <= max(figures.per_worker.values(), default=0)


# --- CloudWatch data points ---------------------------------------------------------------------------


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


# --- the exporter ---------------------------------------------------------------------------------------


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


def test_docs_metric_list_is_generated_from_the_catalog() -> None:
    start = MONITORING.index("<!-- metrics:start -->\n") + len("<!-- metrics:start -->\n")
    end = MONITORING.index("\n<!-- metrics:end -->")
    assert MONITORING[start:end] == markdown_metrics(), "regenerate with markdown_metrics()"


# --- live view rendering ------------------------------------------------------------------------------


def test_screen_shows_figures_and_bars_most_loaded_first() -> None:
    from kcl_daemon.inspection.watch import Snapshot, render_screen

    figures = fleet_figures([lease("s0", "a-1"), lease("s1", "b-1"), lease("s2", "b-1")], total_shards=3)
    screen = render_screen(Snapshot("lease table t", figures), at="12:00:00", every_s=2)
    assert "leases 3, shards 3, workers 2, unclaimed 0, expired 0, finished 0, skew 1" in screen
    assert screen.index("b-1  " + "#" * 40 + " 2") < screen.index("a-1  " + "#" * 20 + " 1")


def test_plot_draws_a_step_line_per_worker_and_unclaimed() -> None:
    from kcl_daemon.inspection.plot import Frame, render_html

    frames = [Frame(0, {"w1": 2}, 2), Frame(10, {"w1": 2, "w<2>": 2}, 0)]
    page = render_html(frames)
    assert page.count("<polyline") == 3 and "w&lt;2&gt;" in page and "unclaimed" in page
    assert render_html([]).startswith("<!doctype html>")
