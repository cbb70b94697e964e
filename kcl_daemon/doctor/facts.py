"""What `kcl-daemon doctor` read, as plain values: the input of :mod:`kcl_daemon.doctor.checks`. Pure.

The shell (:mod:`kcl_daemon.doctor.reads`) fills these in; a read that failed leaves its ``error`` set
instead of raising, so one unreadable table never hides what the other checks would find.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from kcl_daemon.core.inspection.distribution import Distribution
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.shards.graph import Shard


@dataclass(frozen=True, slots=True)
class CredentialFacts:
    region: str | None
    #: botocore's name of the provider that found credentials (``env``, ``iam-role``, ...); None: none
    method: str | None
    anonymous: bool = False
    #: the caller's ARN (sts:GetCallerIdentity), when asked
    identity_arn: str | None = None
    identity_error: str | None = None
    #: False with custom endpoints (emulators, --local): there is no STS to ask
    identity_checked: bool = False
    error: str | None = None


@dataclass(frozen=True, slots=True)
class StreamFacts:
    name: str
    #: None: the stream does not exist (or could not be read: see ``error``)
    status: str | None = None
    open_shards: int | None = None
    retention_hours: int | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class TableDescription:
    """A DescribeTable answer, reduced to what the checks look at."""

    name: str
    exists: bool
    status: str | None = None
    key_schema: tuple[tuple[str, str], ...] = ()  # (attribute, HASH|RANGE)
    attribute_types: Mapping[str, str] = field(default_factory=dict)
    #: index name -> (status, key schema)
    indexes: Mapping[str, tuple[str, tuple[tuple[str, str], ...]]] = field(default_factory=dict)
    billing_mode: str | None = None
    read_capacity: int | None = None
    write_capacity: int | None = None
    error: str | None = None


class Outcome(enum.StrEnum):
    ALLOWED = "allowed"
    DENIED = "denied"
    NOT_TRIED = "not tried"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class ProbeResult:
    action: str
    resource: str  # the table, index, stream or consumer it was tried on
    outcome: Outcome
    detail: str = ""


@dataclass(frozen=True, slots=True)
class MetricsRow:
    """One WorkerMetricStats item as found: who, when, and the marks that tell its writer's version."""

    worker_id: str
    last_update_s: float | None
    place: str  # the table it was read from
    kcl_daemon: bool = False  # has kcl-daemon's ``kdx`` attribute
    support_code: int | None = None  # ``sup``: KCL 3.5 writes 1
    problem: str | None = None  # unreadable: why


@dataclass(frozen=True, slots=True)
class LayoutFacts:
    """What tells a table's layout and migration state (contract §9.2)."""

    lease_table: str
    coordinator_table: str
    coordinator_table_exists: bool
    #: Leader / Migration3.0 / TableMigration3.5 items found in the lease table and in the side table
    lease_table_items: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    legacy_items: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    metrics: tuple[MetricsRow, ...] = ()
    lease_owners: frozenset[str] = frozenset()
    #: leases carrying ``entityType`` (written by KCL 3.5 or kcl-daemon) and without it
    leases_with_entity_type: int = 0
    leases_without_entity_type: int = 0
    now_s: float = 0.0
    reporter_period_s: float = 30.0
    error: str | None = None
    #: the side worker-metrics table's name and whether it exists (None: not known; rows read from it say so)
    metrics_table: str = ""
    metrics_table_exists: bool | None = None


@dataclass(frozen=True, slots=True)
class LeaseFacts:
    table: str
    distribution: Distribution | None
    leases: tuple[Lease, ...] = ()
    skipped_items: tuple[str, ...] = ()
    #: how long apart the two scans were (0: one scan; expiry not judged)
    window_s: float = 0.0
    failover_s: float = 10.0
    shards: tuple[Shard, ...] | None = None
    shard_error: str | None = None
    #: lease key -> seconds since the first record after its checkpoint arrived (owned, live leases)
    oldest_unprocessed_s: Mapping[str, float] = field(default_factory=dict)
    stall_limit_s: float = 300.0
    error: str | None = None


@dataclass(frozen=True, slots=True)
class LeaderFacts:
    #: the fleet runs KCL 3.x leader-based assignment (Migration3.0 says 3.x)
    leader_mode: bool
    #: where the lock item was looked for (table name) and that table's partition key
    place: str | None
    key_name: str = "key"
    first: Mapping[str, object] | None = None
    second: Mapping[str, object] | None = None
    window_s: float = 0.0
    #: workers seen alive: current worker metrics, or a lease whose counter moved over the window
    live_workers: frozenset[str] = frozenset()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class WorkerMetricsFacts:
    table: str
    exists: bool
    key_name: str = "wid"
    rows: tuple[MetricsRow, ...] = ()
    now_s: float = 0.0
    reporter_period_s: float = 30.0
    #: the leader deletes entries older than this (Java's staleWorkerMetricsEntryCleanupDuration)
    cleanup_after_s: float = 86400.0
    leader_mode: bool = False
    lease_owners: frozenset[str] = frozenset()
    error: str | None = None
