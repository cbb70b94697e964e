"""The one metrics registry of a daemon: Prometheus instruments made from the catalog, fed by observers.

:class:`DaemonMetrics` owns a ``prometheus_client`` registry (process metrics included) and hands out
observers: :meth:`DaemonMetrics.shard` for each shard consumer, :attr:`DaemonMetrics.worker` for the
lease coordinator. The CloudWatch and OTLP exporters read the same registry (:meth:`snapshot`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.process_collector import ProcessCollector

from kcl_daemon.core.inspection.distribution import cluster_of
from kcl_daemon.core.inspection.figures import FleetFigures, fleet_figures
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.metrics.catalog import CHILD_METRIC, METRICS, Kind

#: A metric's dimensions: (name, value) pairs.
Dims = tuple[tuple[str, str], ...]

#: Child-latency buckets (seconds): a no-op child answers in well under a millisecond.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


#: Distinct child metric series (name, unit, dimensions) one daemon keeps, over all its children.
MAX_CHILD_SERIES = 1000


@dataclass(frozen=True, slots=True)
class LastScan:
    """This worker's last full lease-table scan, kept as read (no copy) for the status page."""

    leases: Sequence[Lease]
    expired_keys: frozenset[str]
    figures: FleetFigures
    at: float  # time.monotonic() when it was reported


@dataclass(frozen=True, slots=True)
class Sample:
    """One value of the registry: family name, labels, and the value (counters: running total)."""

    family: str
    labels: tuple[tuple[str, str], ...]
    value: float
    count: float = 0.0  # histograms: number of observations (``value`` is their sum)


class DaemonMetrics:
    def __init__(
        self,
        *,
        process_metrics: bool = True,
        zone_of: Callable[[str], str] = cluster_of,
    ) -> None:
        self.registry = CollectorRegistry()
        if process_metrics:
            ProcessCollector(registry=self.registry)
        self._zone_of = zone_of
        self._m: dict[str, MetricWrapperBase] = {}
        for spec in METRICS:
            common = {"name": spec.name, "documentation": spec.help, "labelnames": spec.labels}
            if spec.kind is Kind.COUNTER:
                self._m[spec.name] = Counter(registry=self.registry, **common)  # type: ignore[arg-type]
            elif spec.kind is Kind.GAUGE:
                self._m[spec.name] = Gauge(registry=self.registry, **common)  # type: ignore[arg-type]
            elif spec.kind is Kind.SUMMARY:
                self._m[spec.name] = Summary(registry=self.registry, **common)  # type: ignore[arg-type]
            else:
                self._m[spec.name] = Histogram(
                    registry=self.registry,
                    buckets=LATENCY_BUCKETS,
                    **common,  # type: ignore[arg-type]
                )
        self._lock = threading.Lock()
        self._fleet_workers: set[str] = set()
        self._fleet_zones: set[str] = set()
        self.fleet: FleetFigures | None = None
        #: the scan behind :attr:`fleet` (the status page lists its expired and unowned leases)
        self.last_scan: LastScan | None = None
        self._total_shards: int | None = None
        self._child_series: set[tuple[str, str, str]] = set()
        self.worker = WorkerMetrics(self)

    def counter(self, name: str) -> Counter:
        metric = self._m[name]
        assert isinstance(metric, Counter)
        return metric

    def gauge(self, name: str) -> Gauge:
        metric = self._m[name]
        assert isinstance(metric, Gauge)
        return metric

    def histogram(self, name: str) -> Histogram:
        metric = self._m[name]
        assert isinstance(metric, Histogram)
        return metric

    def zone_of(self, worker_id: str) -> str:
        """The zone a worker's leases count under (the fleet figures' grouping)."""
        return self._zone_of(worker_id)

    def shard(self, shard_id: str) -> ShardMetrics:
        return ShardMetrics(self, shard_id)

    def set_leases_held(self, count_now: Callable[[], int]) -> None:
        """Read the held-lease count at collection time."""
        self.gauge("kcl_worker_leases").set_function(lambda: float(count_now()))

    def call(self, service: str, operation: str, *, error: bool, throttled: bool) -> None:
        """One AWS call (:func:`kcl_daemon.aws.instrument.instrument` reports here, from any thread)."""
        self.counter("kcl_aws_calls").labels(service, operation).inc()
        if error:
            self.counter("kcl_aws_errors").labels(service, operation).inc()
        if throttled:
            self.counter("kcl_aws_throttles").labels(service, operation).inc()

    def child_metric(
        self, name: str, value: float, unit: str, dimensions: tuple[tuple[str, str], ...]
    ) -> bool:
        """One metric a child sent; False (dropped) beyond :data:`MAX_CHILD_SERIES` series in this daemon."""
        labels = (name, unit, ",".join(f"{k}={v}" for k, v in dimensions))
        with self._lock:
            if labels not in self._child_series:
                if len(self._child_series) >= MAX_CHILD_SERIES:
                    return False
                self._child_series.add(labels)
        summary = self._m[CHILD_METRIC]
        assert isinstance(summary, Summary)
        summary.labels(*labels).observe(value)
        return True

    # -- fleet -----------------------------------------------------------------------------------------

    def update_fleet(self, leases: Sequence[Lease], expired_keys: frozenset[str]) -> FleetFigures:
        figures = fleet_figures(
            leases, expired_keys=expired_keys, total_shards=self._total_shards, zone_of=self._zone_of
        )
        with self._lock:
            self.fleet = figures
            self.last_scan = LastScan(leases, expired_keys, figures, time.monotonic())
            self.gauge("kcl_fleet_total_leases").set(figures.total_leases)
            self.gauge("kcl_fleet_unclaimed_leases").set(figures.unclaimed)
            self.gauge("kcl_fleet_expired_leases").set(figures.expired)
            self.gauge("kcl_fleet_workers").set(figures.workers)
            self.gauge("kcl_fleet_lease_skew").set(figures.skew)
            self._replace_series("kcl_fleet_worker_leases", self._fleet_workers, figures.per_worker)
            self._replace_series("kcl_fleet_zone_leases", self._fleet_zones, figures.per_zone)
        return figures

    def _replace_series(self, name: str, known: set[str], values: dict[str, int] | object) -> None:
        gauge = self.gauge(name)
        assert isinstance(values, dict)
        for gone in known - set(values):
            gauge.remove(gone)
        known.clear()
        for label, value in values.items():
            gauge.labels(label).set(value)
            known.add(label)

    def update_total_shards(self, count: int) -> None:
        self._total_shards = count
        self.gauge("kcl_fleet_total_shards").set(count)

    # -- reading -----------------------------------------------------------------------------------

    def snapshot(self) -> list[Sample]:
        """Every catalog series now (process metrics left out), for the push exporters."""
        samples: list[Sample] = []
        for family in self.registry.collect():
            if family.name not in self._m:
                continue
            if family.type in ("histogram", "summary"):
                sums: dict[tuple[tuple[str, str], ...], list[float]] = {}
                for s in family.samples:
                    labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
                    if s.name.endswith("_sum"):
                        sums.setdefault(labels, [0.0, 0.0])[0] = s.value
                    elif s.name.endswith("_count"):
                        sums.setdefault(labels, [0.0, 0.0])[1] = s.value
                samples.extend(Sample(family.name, k, v[0], v[1]) for k, v in sums.items())
                continue
            for s in family.samples:
                if s.name.endswith("_created"):
                    continue
                samples.append(Sample(family.name, tuple(sorted(s.labels.items())), s.value))
        return samples


class ShardMetrics:
    """The observer of one shard consumer: label children bound once, so each report is one add."""

    __slots__ = (
        "_actions",
        "_age",
        "_batches",
        "_bytes",
        "_checkpoint_time",
        "_checkpoints",
        "_lag",
        "_latency",
        "_metrics",
        "_parks",
        "_records",
        "_restarts",
        "shard_id",
    )

    def __init__(self, metrics: DaemonMetrics, shard_id: str) -> None:
        self._metrics = metrics
        self.shard_id = shard_id
        self._records = metrics.counter("kcl_shard_records").labels(shard_id)
        self._bytes = metrics.counter("kcl_shard_bytes").labels(shard_id)
        self._batches = metrics.counter("kcl_shard_batches").labels(shard_id)
        self._lag = metrics.gauge("kcl_shard_millis_behind_latest").labels(shard_id)
        self._age = metrics.gauge("kcl_shard_last_record_age_millis").labels(shard_id)
        self._checkpoints = metrics.counter("kcl_shard_checkpoints").labels(shard_id)
        self._checkpoint_time = metrics.histogram("kcl_checkpoint_seconds")
        self._restarts = metrics.counter("kcl_child_restarts").labels(shard_id)
        self._parks = metrics.counter("kcl_shard_parks").labels(shard_id)
        self._latency = metrics.histogram("kcl_child_action_seconds")
        self._actions: dict[str, Histogram] = {}

    def batch(
        self, records: int, payload_bytes: int, millis_behind_latest: int | None, age_ms: float
    ) -> None:
        self._records.inc(records)
        self._bytes.inc(payload_bytes)
        self._batches.inc()
        if millis_behind_latest is not None:
            self._lag.set(millis_behind_latest)
        if records:
            self._age.set(max(age_ms, 0.0))

    def action_done(self, action: str, seconds: float) -> None:
        child = self._actions.get(action)
        if child is None:
            child = self._actions[action] = self._latency.labels(self.shard_id, action)
        child.observe(seconds)

    def checkpoint(self, seconds: float) -> None:
        self._checkpoints.inc()
        self._checkpoint_time.observe(seconds)

    def child_restart(self) -> None:
        self._restarts.inc()

    def parked(self) -> None:
        self._parks.inc()

    def poison(self, event: str, count: int = 1) -> None:
        self._metrics.counter("kcl_shard_poison_events").labels(self.shard_id, event).inc(count)

    def child_log(self, level_name: str) -> None:
        self._metrics.counter("kcl_child_log_lines").labels(level_name.lower()).inc()

    def child_metric(
        self, name: str, value: float, unit: str, dimensions: tuple[tuple[str, str], ...]
    ) -> None:
        if not self._metrics.child_metric(name, value, unit, dimensions):
            self.channel_dropped("cardinality")

    def channel_dropped(self, reason: str) -> None:
        self._metrics.counter("kcl_child_channel_dropped").labels(reason).inc()

    def closed(self) -> None:
        """Gauges of a shard this worker no longer reads would freeze at their last value: drop them."""
        for name in ("kcl_shard_millis_behind_latest", "kcl_shard_last_record_age_millis"):
            with contextlib.suppress(KeyError):
                self._metrics.gauge(name).remove(self.shard_id)


class WorkerMetrics:
    """The observer of the lease coordinator and the shard sync."""

    def __init__(self, metrics: DaemonMetrics) -> None:
        self._metrics = metrics
        self._taken = metrics.counter("kcl_leases_taken")
        self._lost = metrics.counter("kcl_leases_lost")
        self._handed_off = metrics.counter("kcl_leases_handed_off")
        self._renew = metrics.histogram("kcl_lease_renew_seconds")
        self._renew_failures = metrics.counter("kcl_lease_renew_failures")

    def lease_taken(self, kind: str) -> None:
        self._taken.labels(kind).inc()

    def lease_lost(self) -> None:
        self._lost.inc()

    def lease_handed_off(self) -> None:
        self._handed_off.inc()

    def renewed(self, seconds: float) -> None:
        self._renew.observe(seconds)

    def renew_failed(self) -> None:
        self._renew_failures.inc()

    def scanned(self, leases: Sequence[Lease], expired_keys: frozenset[str]) -> None:
        self._metrics.update_fleet(leases, expired_keys)

    def shards_listed(self, shard_count: int) -> None:
        self._metrics.update_total_shards(shard_count)

    def incompatible_layout_workers(self, count: int) -> None:
        self._metrics.gauge("kcl_incompatible_layout_workers").set(count)
