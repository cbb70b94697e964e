"""Every metric the daemon exports, as data: its Prometheus, CloudWatch and OpenTelemetry names.

The registry creates its instruments from :data:`METRICS`; the CloudWatch and OTLP exporters translate
with it; the README's metric list is generated from it (:func:`markdown_metrics`). Levels follow Java's
``metricsLevel``: SUMMARY metrics are published at SUMMARY and DETAILED, DETAILED ones only at DETAILED.
Per-shard metrics get their ShardId dimension only at DETAILED; at SUMMARY they are published summed
(counters) or as the maximum over shards (gauges), without it (see :mod:`.cloudwatch_data`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final


class Kind(enum.Enum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"
    SUMMARY = "summary"  # count and sum only: the child's own metrics


class Level(enum.IntEnum):
    NONE = 0
    SUMMARY = 1
    DETAILED = 2


#: Prometheus label -> CloudWatch dimension (labels without one become part of the Operation).
DIMENSION_OF_LABEL: Final = {"shard": "ShardId", "worker": "WorkerIdentifier"}
#: Prometheus label -> OpenTelemetry attribute (KCL 3.5 names where it has one).
ATTRIBUTE_OF_LABEL: Final = {
    "shard": "aws.kinesis.shard.id",
    "worker": "aws.kinesis.worker.id",
    "zone": "aws.kinesis.worker.zone",
    "action": "aws.kinesis.child.action",
    "kind": "aws.kinesis.lease.take.kind",
    "service": "rpc.service",
    "operation": "rpc.method",
    "reason": "error.type",
    "name": "aws.kinesis.child.metric.name",
    "unit": "aws.kinesis.child.metric.unit",
    "dimensions": "aws.kinesis.child.metric.dimensions",
}
#: The family of the child's own metrics: published under the child's names (see cloudwatch_data).
CHILD_METRIC: Final = "kcl_child_metric"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str  # Prometheus family name (counters get "_total" on the wire)
    kind: Kind
    help: str
    labels: tuple[str, ...]
    cloudwatch: str  # CloudWatch metric name
    unit: str  # CloudWatch unit
    operation: str  # CloudWatch Operation dimension (Java's task names where they match)
    level: Level
    otel: str  # OpenTelemetry instrument name
    otel_unit: str
    scale: float = 1.0  # Prometheus value x scale = CloudWatch/OTel value (seconds -> ms)


def _m(
    name: str,
    kind: Kind,
    help: str,
    labels: tuple[str, ...],
    cloudwatch: str,
    unit: str,
    operation: str,
    level: Level,
    otel: str,
    otel_unit: str = "1",
    scale: float = 1.0,
) -> MetricSpec:
    return MetricSpec(name, kind, help, labels, cloudwatch, unit, operation, level, otel, otel_unit, scale)


C, G, H = Kind.COUNTER, Kind.GAUGE, Kind.HISTOGRAM
S, D = Level.SUMMARY, Level.DETAILED
SHARD = ("shard",)
P = "aws.kinesis.client."

METRICS: Final[tuple[MetricSpec, ...]] = (
    # --- per shard
    _m("kcl_shard_millis_behind_latest", G, "MillisBehindLatest of the last GetRecords page delivered",
       SHARD, "MillisBehindLatest", "Milliseconds", "ProcessTask", S, "consumer.lag.duration", "ms"),
    _m("kcl_shard_last_record_age_millis", G, "Age of the last record delivered (now - its arrival time)",
       SHARD, "RecordAgeMillis", "Milliseconds", "ProcessTask", S, P + "record.age", "ms"),
    _m("kcl_shard_records", C, "Records delivered to the child (de-aggregated)",
       SHARD, "RecordsProcessed", "Count", "ProcessTask", S, P + "records.processed"),
    _m("kcl_shard_bytes", C, "Payload bytes delivered to the child",
       SHARD, "DataBytesProcessed", "Bytes", "ProcessTask", S, P + "bytes.processed", "By"),
    _m("kcl_shard_batches", C, "processRecords calls",
       SHARD, "Batches", "Count", "ProcessTask", S, P + "batches"),
    _m("kcl_child_action_seconds", H, "Time the child took to answer each action",
       ("shard", "action"), "ChildActionTime", "Milliseconds", "ChildAction", D,
       P + "child.action.duration", "ms", 1000.0),
    _m("kcl_shard_checkpoints", C, "Checkpoints written",
       SHARD, "Checkpoints", "Count", "ProcessTask", S, P + "checkpoints"),
    _m("kcl_checkpoint_seconds", H, "Time a checkpoint write took (retries included)",
       (), "CheckpointTime", "Milliseconds", "ProcessTask", S, P + "checkpoint.duration", "ms", 1000.0),
    _m("kcl_child_restarts", C, "Child processes restarted after a failure",
       SHARD, "ChildRestarts", "Count", "ProcessTask", S, P + "child.restarts"),
    _m("kcl_shard_parks", C, "Shards parked after the child failed too often",
       SHARD, "ShardsParked", "Count", "ProcessTask", S, P + "shards.parked"),
    _m("kcl_shard_poison_events", C, "Poison records: exception (swallowed by the wrapper), "
       "failed_delivery, redelivered (records), skipped, dead_lettered, dead_letter_write_failed",
       ("shard", "event"), "PoisonEvents", "Count", "ProcessTask", S, P + "shard.poison.events"),
    # --- the child's log/metric channel
    _m("kcl_child_log_lines", C, "Log lines children sent on the channel, by level",
       ("level",), "ChildLogLines", "Count", "Child", S, P + "child.log.lines"),
    _m("kcl_child_channel_dropped", C, "Channel lines dropped: invalid, rate_limited or cardinality",
       ("reason",), "ChildChannelDropped", "Count", "Child", S, P + "child.channel.dropped"),
    _m("kcl_child_metric", Kind.SUMMARY, "Metrics children sent (dimensions as k=v,k=v)",
       ("name", "unit", "dimensions"), "(the child's name)", "(the child's unit)", "Child", S,
       P + "child.metric"),
    # --- per worker
    _m("kcl_worker_leases", G, "Leases this worker holds",
       (), "CurrentLeases", "Count", "Worker", S, P + "leases.held"),
    _m("kcl_leases_taken", C,
       "Leases taken, by kind: available, priority, steal; assigned (3.x leader); fallback (3.x follower)",
       ("kind",), "LeasesTaken", "Count", "TakeLeases", S, P + "leases.taken"),
    _m("kcl_leases_lost", C, "Leases lost (another worker took them, or renewals failed)",
       (), "LostLeases", "Count", "RenewAllLeases", S, P + "leases.lost"),
    _m("kcl_leases_handed_off", C, "Leases released on purpose (graceful shutdown)",
       (), "LeasesHandedOff", "Count", "Worker", S, P + "leases.handed_off"),
    _m("kcl_lease_renew_seconds", H, "Time a lease renewal took",
       (), "RenewLeaseTime", "Milliseconds", "RenewAllLeases", S, P + "lease.renew.duration", "ms", 1000.0),
    _m("kcl_lease_renew_failures", C, "Lease renewals that failed (the lease may still be kept)",
       (), "RenewLeaseFailures", "Count", "RenewAllLeases", S, P + "lease.renew.failures"),
    _m("kcl_aws_calls", C, "DynamoDB and Kinesis calls, by operation",
       ("service", "operation"), "Calls", "Count", "", S, P + "aws.calls"),
    _m("kcl_aws_throttles", C, "Throttled DynamoDB and Kinesis calls, by operation",
       ("service", "operation"), "Throttles", "Count", "", S, P + "aws.throttles"),
    _m("kcl_aws_errors", C, "Failed DynamoDB and Kinesis calls (throttles included), by operation",
       ("service", "operation"), "Errors", "Count", "", S, P + "aws.errors"),
    # --- fleet, from this worker's last lease-table scan
    _m("kcl_fleet_total_leases", G, "Leases in the lease table",
       (), "TotalLeases", "Count", "Fleet", S, P + "fleet.leases.total"),
    _m("kcl_fleet_total_shards", G, "Shards ListShards returned at the last shard sync",
       (), "TotalShards", "Count", "Fleet", S, P + "fleet.shards.total"),
    _m("kcl_fleet_unclaimed_leases", G, "Leases without an owner",
       (), "UnclaimedLeases", "Count", "Fleet", S, P + "fleet.leases.unclaimed"),
    _m("kcl_fleet_expired_leases", G, "Owned leases not renewed for failoverTimeMillis",
       (), "ExpiredLeases", "Count", "Fleet", S, P + "fleet.leases.expired"),
    _m("kcl_fleet_workers", G, "Workers owning at least one lease",
       (), "Workers", "Count", "Fleet", S, P + "fleet.workers"),
    _m("kcl_fleet_lease_skew", G, "Most minus fewest leases of any worker",
       (), "LeaseSkew", "Count", "Fleet", S, P + "fleet.leases.skew"),
    _m("kcl_fleet_worker_leases", G, "Leases per worker",
       ("worker",), "WorkerLeases", "Count", "Fleet", D, P + "fleet.worker.leases"),
    _m("kcl_fleet_zone_leases", G, "Leases per zone (worker id before leaseClusterSeparator)",
       ("zone",), "ZoneLeases", "Count", "Fleet", D, P + "fleet.zone.leases"),
    _m("kcl_incompatible_layout_workers", G,
       "Live workers of a table layout this application cannot share its table with (see the log)",
       (), "IncompatibleLayoutWorkers", "Count", "Fleet", S, P + "fleet.workers.incompatible_layout"),
    # --- the exporters themselves
    _m("kcl_cloudwatch_put_failures", C, "PutMetricData calls that failed",
       (), "PutMetricDataFailures", "Count", "Metrics", S, P + "cloudwatch.put.failures"),
    _m("kcl_metrics_dropped", C, "Data points dropped: CloudWatch queue full (metricsMaxQueueSize)",
       (), "MetricsDropped", "Count", "Metrics", S, P + "metrics.dropped"),
)  # fmt: skip

BY_NAME: Final[dict[str, MetricSpec]] = {spec.name: spec for spec in METRICS}


def markdown_metrics() -> str:
    """The README's metric list (a test keeps the two in sync)."""
    lines = [
        "| Prometheus | labels | CloudWatch (level) | OpenTelemetry | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for spec in METRICS:
        wire = spec.name + ("_total" if spec.kind is Kind.COUNTER else "")
        labels = ", ".join(spec.labels) or "-"
        cw = f"{spec.cloudwatch} ({spec.level.name})"
        lines.append(f"| `{wire}` | {labels} | {cw} | `{spec.otel}` | {spec.help} |")
    return "\n".join(lines)
