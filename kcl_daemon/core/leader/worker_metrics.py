"""The ``WorkerMetricStats`` item (contract §3.9) and the leader's reading of it (contract §5.2, §5.4). Pure.

Item: ``wid`` (worker id; ``leaseKey`` in a single-table lease table, with ``entityType`` =
``WORKER_METRIC_STATS``), ``lut`` (last update, epoch **seconds**), ``sts`` (metric short name -> the
last N averaged samples; -1 = "capture failed in that interval"), ``opr`` (metric -> ``[maxUtilization]``),
and from KCL 3.5 ``sup`` (support code, 1 = supports the table migration) with ``slu`` (when ``sup`` was
last refreshed, epoch seconds). ``C`` is CPU percent. A worker with empty maps is a "default metric"
worker, balanced by throughput.

The leader ignores an entry without ``lut``, or whose metrics lack a non-zero operating range; it
treats an entry older than 2 x the reporter period as a dead worker; a worker whose latest sample of any
metric is -1 gets no new leases. The value of a metric is the EMA (alpha 0.5) of its samples, -1s skipped.

:func:`java_workers_without_cpu` finds live workers that are not kcl-daemons (no kcl-daemon extra
attribute) and report no CPU: a Java worker outside EC2/ECS/EKS. A Java leader balances such workers and
CPU-reporting ones as two separate groups, so a kcl-daemon worker that sees them reports no CPU either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from kcl_daemon.core.leader.zones import EXTRA_ATTRIBUTE

WORKER_ID: Final = "wid"
LAST_UPDATE: Final = "lut"
STATS: Final = "sts"
OPERATING_RANGE: Final = "opr"
SUPPORT_CODE: Final = "sup"
SUPPORT_UPDATED: Final = "slu"
ENTITY_TYPE: Final = "WORKER_METRIC_STATS"
CPU: Final = "C"
FAILED_SAMPLE: Final = -1.0
DEFAULT_EMA_ALPHA: Final = 0.5


class WorkerMetricsItemError(ValueError):
    """A WorkerMetricStats item that cannot be read (names the worker and the attribute)."""


@dataclass(frozen=True, slots=True)
class WorkerMetricStats:
    worker_id: str
    last_update_s: float | None
    stats: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    operating_range: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    #: kcl-daemon's extra attribute (zone, capacity, restart grace; core.zones), None for Java workers
    extra: Mapping[str, object] | None = None
    #: KCL 3.5: ``sup`` and ``slu`` (None when the writer predates 3.5)
    support_code: int | None = None
    support_updated_s: float | None = None

    @property
    def is_default_metric(self) -> bool:
        return (not self.stats and not self.operating_range) or "THROUGHPUT" in self.stats

    def is_valid(self) -> bool:
        if self.last_update_s is None:
            return False
        if self.is_default_metric:
            return True
        return all(self.operating_range.get(name, (0.0,))[:1] not in ((), (0.0,)) for name in self.stats)

    def is_dead(self, now_s: float, reporter_period_s: float) -> bool:
        """``lut`` older than 2 x the reporter period (epoch seconds)."""
        return self.last_update_s is None or now_s - self.last_update_s > 2 * reporter_period_s

    def latest_failed(self) -> bool:
        return any(samples and samples[-1] == FAILED_SAMPLE for samples in self.stats.values())

    def value(self, metric: str, alpha: float = DEFAULT_EMA_ALPHA) -> float | None:
        return ema(self.stats.get(metric, ()), alpha)


def ema(samples: Sequence[float], alpha: float = DEFAULT_EMA_ALPHA) -> float | None:
    """Java's ExponentialMovingAverage over the samples, oldest first, skipping failed (-1) ones."""
    value: float | None = None
    for sample in samples:
        if sample == FAILED_SAMPLE or sample < 0:
            continue
        value = sample if value is None else alpha * sample + (1 - alpha) * value
    return value


def append_sample(history: Sequence[float], sample: float, limit: int) -> tuple[float, ...]:
    """The bounded history after one report (oldest first, as Java stores it), rounded to 6 places."""
    return (*history, round(sample, 6))[-limit:] if limit > 0 else ()


def to_item(stats: WorkerMetricStats) -> dict[str, object]:
    """Plain attributes for an upsert (the key ``wid`` is the item's key, not included)."""
    item: dict[str, object] = {
        LAST_UPDATE: int(stats.last_update_s or 0),
        STATS: {name: list(values) for name, values in stats.stats.items()},
        # Java reads opr as List<Long>: "100.0" would fail its parse where the store keeps it as sent.
        OPERATING_RANGE: {
            name: [int(v) if float(v).is_integer() else v for v in values]
            for name, values in stats.operating_range.items()
        },
    }
    if stats.extra is not None:
        item[EXTRA_ATTRIBUTE] = dict(stats.extra)
    if stats.support_code is not None:
        item[SUPPORT_CODE] = stats.support_code
        item[SUPPORT_UPDATED] = int(stats.support_updated_s or stats.last_update_s or 0)
    return item


def _series(worker: str, attribute: str, raw: object) -> dict[str, tuple[float, ...]]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise WorkerMetricsItemError(f"worker metrics of {worker}: {attribute} is not a map")
    out: dict[str, tuple[float, ...]] = {}
    for name, values in raw.items():
        if not isinstance(values, list) or not all(isinstance(v, int | float) for v in values):
            raise WorkerMetricsItemError(
                f"worker metrics of {worker}: {attribute}.{name} is not a number list"
            )
        out[str(name)] = tuple(float(v) for v in values)
    return out


def from_item(item: Mapping[str, object], key_name: str = WORKER_ID) -> WorkerMetricStats:
    worker = item.get(key_name)
    if not isinstance(worker, str) or not worker:
        raise WorkerMetricsItemError(f"worker metrics item without a string {key_name}")
    lut = item.get(LAST_UPDATE)
    if lut is not None and not isinstance(lut, int | float):
        raise WorkerMetricsItemError(f"worker metrics of {worker}: {LAST_UPDATE} is not a number")
    extra = item.get(EXTRA_ATTRIBUTE)
    sup, slu = item.get(SUPPORT_CODE), item.get(SUPPORT_UPDATED)
    return WorkerMetricStats(
        worker,
        None if lut is None else float(lut),
        _series(worker, STATS, item.get(STATS)),
        _series(worker, OPERATING_RANGE, item.get(OPERATING_RANGE)),
        extra if isinstance(extra, Mapping) else None,
        int(sup) if isinstance(sup, int | float) else None,
        float(slu) if isinstance(slu, int | float) else None,
    )


def assignable(stats: WorkerMetricStats, now_s: float, reporter_period_s: float) -> bool:
    """May the leader give this worker leases? (valid, alive, latest sample not failed)"""
    return stats.is_valid() and not stats.is_dead(now_s, reporter_period_s) and not stats.latest_failed()


def java_workers_without_cpu(
    entries: Sequence[WorkerMetricStats], now_s: float, reporter_period_s: float
) -> tuple[str, ...]:
    """Live workers that are not kcl-daemons and publish no CPU (empty maps: Java outside EC2/ECS/EKS)."""
    return tuple(
        sorted(
            stats.worker_id
            for stats in entries
            if stats.extra is None
            and stats.is_valid()
            and not stats.is_dead(now_s, reporter_period_s)
            and CPU not in stats.stats
        )
    )
