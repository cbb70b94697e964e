"""From registry snapshots to CloudWatch data points (pure): levels, dimensions, deltas.

Rules (Java's ``metricsLevel`` and ``metricsEnabledDimensions``):

* a metric whose catalog level is above the configured level is not published; NONE publishes nothing;
* every data point has the ``Operation`` dimension; ``ShardId`` only at DETAILED and when enabled,
  ``WorkerIdentifier`` and ``StreamId`` when enabled (``ALL`` enables every one);
* a per-shard metric without its ShardId dimension is published once for the worker: counters summed,
  gauges as the maximum over shards; another label without a dimension is appended to the Operation
  (``Kinesis.GetRecords``, ``ChildAction.processRecords``);
* counters are published as the increase since the previous snapshot, gauges as they are, histograms
  as the average of the observations since the previous snapshot (nothing when there were none).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from kcl_daemon.aws.cloudwatch import Datum
from kcl_daemon.metrics.catalog import BY_NAME, CHILD_METRIC, DIMENSION_OF_LABEL, Kind, Level
from kcl_daemon.metrics.registry import Sample

ALL_DIMENSIONS = frozenset({"Operation", "ShardId", "WorkerIdentifier", "StreamId"})
_SERVICE_NAMES = {"dynamodb": "DynamoDB", "kinesis": "Kinesis"}
SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True, slots=True)
class CloudWatchPlan:
    namespace: str
    level: Level
    dimensions: frozenset[str]
    worker_id: str
    stream: str

    @classmethod
    def from_settings(
        cls, namespace: str, level: str, enabled: Iterable[str], worker_id: str, stream: str
    ) -> CloudWatchPlan:
        names = set(enabled)
        dims = ALL_DIMENSIONS if "ALL" in names else frozenset(names | {"Operation"})
        return cls(namespace, Level[level], dims, worker_id, stream)


#: What the previous snapshot said: counters' totals, histograms' (sum, count).
Previous = Mapping[SeriesKey, tuple[float, float]]


def datums_from(
    samples: Iterable[Sample], previous: Previous, plan: CloudWatchPlan, now: datetime
) -> tuple[list[Datum], dict[SeriesKey, tuple[float, float]]]:
    """The data points to publish now, and the new ``previous``."""
    remembered: dict[SeriesKey, tuple[float, float]] = {}
    datums: list[Datum] = []
    merged: dict[tuple[str, tuple[tuple[str, str], ...]], list[float]] = {}
    kinds: dict[str, Kind] = {}
    for sample in samples:
        spec = BY_NAME.get(sample.family)
        if spec is None or spec.level > plan.level:
            continue
        if spec.name == CHILD_METRIC:
            datum = _child_datum(sample, previous, remembered, plan, now)
            if datum is not None:
                datums.append(datum)
            continue
        key: SeriesKey = (sample.family, sample.labels)
        if spec.kind is Kind.GAUGE:
            value, count = sample.value, 0.0
        else:
            remembered[key] = (sample.value, sample.count)
            before = previous.get(key, (0.0, 0.0))
            value, count = sample.value - before[0], sample.count - before[1]
        order = {label: i for i, label in enumerate(spec.labels)}
        labels = tuple(sorted(sample.labels, key=lambda item: order.get(item[0], len(order))))
        dims = _dimensions(spec.operation, labels, plan)
        slot = merged.setdefault((spec.name, dims), [0.0, 0.0, 0.0])
        kinds[spec.name] = spec.kind
        if spec.kind is Kind.GAUGE:
            slot[0] = value if slot[2] == 0 else max(slot[0], value)
        else:
            slot[0] += value
            slot[1] += count
        slot[2] += 1
    for (name, dims), (value, count, _n) in merged.items():
        spec = BY_NAME[name]
        if kinds[name] is Kind.HISTOGRAM:
            if count <= 0:
                continue
            value = value / count
        datums.append(Datum(spec.cloudwatch, spec.unit, value * spec.scale, dims, now))
    return datums, remembered


def _child_datum(
    sample: Sample,
    previous: Previous,
    remembered: dict[SeriesKey, tuple[float, float]],
    plan: CloudWatchPlan,
    now: datetime,
) -> Datum | None:
    """A child's metric under its own name and unit: Count metrics as the sum since the last snapshot,
    the others as the average; its dimensions plus Operation=Child (and the enabled worker/stream ones)."""
    key: SeriesKey = (sample.family, sample.labels)
    remembered[key] = (sample.value, sample.count)
    before = previous.get(key, (0.0, 0.0))
    total, count = sample.value - before[0], sample.count - before[1]
    if count <= 0:
        return None
    labels = dict(sample.labels)
    dims = dict(pair.split("=", 1) for pair in labels["dimensions"].split(",") if "=" in pair)
    if "WorkerIdentifier" in plan.dimensions:
        dims.setdefault("WorkerIdentifier", plan.worker_id)
    if "StreamId" in plan.dimensions:
        dims.setdefault("StreamId", plan.stream)
    dims["Operation"] = "Child"
    unit = labels["unit"]
    value = total if unit == "Count" else total / count
    return Datum(labels["name"], unit, value, tuple(sorted(dims.items())), now)


def _dimensions(
    operation: str, labels: tuple[tuple[str, str], ...], plan: CloudWatchPlan
) -> tuple[tuple[str, str], ...]:
    dims: dict[str, str] = {}
    parts = [operation] if operation else []
    for label, value in labels:
        dimension = DIMENSION_OF_LABEL.get(label)
        if dimension == "ShardId":
            if plan.level >= Level.DETAILED and "ShardId" in plan.dimensions:
                dims["ShardId"] = value
            continue  # merged over shards otherwise
        if dimension is not None and dimension in plan.dimensions:
            dims[dimension] = value
        else:
            parts.append(_SERVICE_NAMES.get(value, value) if label == "service" else value)
    if "WorkerIdentifier" in plan.dimensions:
        dims.setdefault("WorkerIdentifier", plan.worker_id)
    if "StreamId" in plan.dimensions:
        dims["StreamId"] = plan.stream
    dims["Operation"] = ".".join(parts) or "Worker"
    return tuple(sorted(dims.items()))
