"""Each concern's slice of the settings: small frozen records, each built from :class:`Settings` in one
place (``settings.leases()``, ``settings.retrieval()``, ...), so a package reads what it is about and
nothing else. The values are the settings' (seconds as floats, the ``effective_*`` defaults applied);
what a concern derives from them (the renewal period, the lease timings) stays with that concern. The
slices have no defaults of their own: every default is stated once, in the key table
(``kcl_daemon.config.keys``) and :class:`Settings`; a test builds a slice from ``Settings(...)``.

The AWS clients' slice is ``kcl_daemon.aws.clients.client_settings_from``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from kcl_daemon.core.leader.table_names import legacy_table_names
from kcl_daemon.core.sequence import Sentinel
from kcl_daemon.core.shards.multi_stream import StreamSpec, parse_stream_list

if TYPE_CHECKING:
    from kcl_daemon.config.settings import Settings


@dataclass(frozen=True, slots=True)
class TableNames:
    """The application's tables: the lease table and the 3.0-3.4 layout's two side tables."""

    lease: str
    coordinator_state: str
    worker_metrics: str


@dataclass(frozen=True, slots=True)
class LeaseSlice:
    """Taking, keeping and balancing leases (the 2.x rules, and what the 3.x leader shares with them)."""

    failover_s: float
    max_leases_for_worker: int
    max_leases_to_steal_at_one_time: int
    enable_priority_lease_assignment: bool
    #: leaseExpiryCheckIntervalMillis, else min(1 s, failover / 10)
    expiry_check_s: float
    #: leaseAssignmentIntervalMillis, else 2 x failover
    assignment_interval_s: float
    max_lease_renewal_threads: int
    cleanup_leases_upon_shard_completion: bool
    cluster_separator: str
    #: leaseTableScanTotalSegments (0: Java's automatic sizing)
    scan_segments: int
    #: leaseRenewal: PER_LEASE (Java's) or PER_WORKER (one heartbeat per worker)
    lease_renewal: str


@dataclass(frozen=True, slots=True)
class ShardSlice:
    """Which stream(s) the leases cover, where new shards start, and how often they are listed."""

    #: the stream to read (streamArn's name, else streamName); None with streamNames only
    stream_name: str | None
    #: streamNames parsed (empty: the single stream ``stream_name``)
    streams: tuple[StreamSpec, ...]
    initial_position: Sentinel
    initial_timestamp: datetime | None
    ignore_unexpected_child_shards: bool
    sync_interval_s: float
    parent_poll_s: float
    former_streams_wait_s: float


@dataclass(frozen=True, slots=True)
class RetrievalSlice:
    """Reading records: polling (GetRecords) or enhanced fan-out, and the stream consumer."""

    max_records: int
    idle_between_reads_s: float
    reduced_tps_threshold_s: float
    at_timestamp: datetime | None
    #: retrievalMode as set (DEFAULT, POLLING, FANOUT)
    mode_setting: str
    #: what DEFAULT means by Java's rule (fan-out unless a polling key is set)
    mode_by_java_rule: str
    #: the settings came from a file (DEFAULT follows Java's rule only then)
    from_file: bool
    #: fanoutConfig.consumerName, else applicationName
    consumer_name: str | None
    consumer_arn: str | None
    stream_name: str | None
    stream_arn: str | None


@dataclass(frozen=True, slots=True)
class ConsumerSlice:
    """One shard's child and its conversation: timeouts, restarts, poison records, dead letters."""

    application_name: str
    action_timeout_s: float | None
    initialize_timeout_s: float | None
    process_records_timeout_s: float | None
    shutdown_timeout_s: float | None
    child_write_timeout_s: float
    child_stall_warning_s: float
    child_stop_timeout_s: float
    child_restart_backoff_s: float
    child_restart_max_backoff_s: float
    child_max_consecutive_failures: int
    call_process_records_even_for_empty_record_list: bool
    child_channel: bool
    poison_record_policy: str
    max_delivery_attempts: int
    dead_letter_destination: str | None


@dataclass(frozen=True, slots=True)
class LeaderSlice:
    """KCL 3.x: client version, the leader's assignment, worker metrics, zones, the 3.5 table layout."""

    client_version_config: str
    strategy: str
    handoff_timeout_s: float
    graceful_handoff: bool
    worker_metrics_capture_s: float
    worker_metrics_report_s: float
    worker_metrics_history: int
    disable_worker_metrics: bool
    rebalance_threshold_percent: int
    dampening_percent: int
    allow_throughput_overshoot: bool
    balancing_frequency: int
    lock_duration_s: float
    lock_heartbeat_s: float
    migrate_all: bool
    complete_bake_s: float
    init_bake_s: float
    table_layout: str | None
    worker_zone: str | None
    zone_from_environment: bool
    max_handoffs_per_worker: int
    #: restartGraceMillis as set (it needs a fixed workerId: ``leader.configure.restart_grace_s``)
    restart_grace_s: float
    #: workerId is set (a restart grace needs a worker id that comes back)
    fixed_worker_id: bool


@dataclass(frozen=True, slots=True)
class MetricsSlice:
    """What the worker publishes where: CloudWatch level, dimensions and buffering."""

    application_name: str | None
    level: str
    enabled_dimensions: tuple[str, ...]
    buffer_s: float
    max_queue: int
    cloudwatch_endpoint: str | None
    #: kinesisEndpoint or dynamoDBEndpoint is set (an emulator: CloudWatch only when asked)
    custom_endpoints: bool
    cluster_separator: str


@dataclass(frozen=True, slots=True)
class WorkerSlice:
    """The worker itself: who it is, the processor it starts, how long a graceful stop may take."""

    worker_id: str | None
    executable: tuple[str, ...] | None
    child_max_line_bytes: int
    shards_per_child: int
    shard_stall_s: float
    shutdown_grace_s: float
    task_backoff_s: float


def table_names(settings: Settings) -> TableNames | None:
    """None without applicationName or tableName; the side tables default to ``{app}-CoordinatorState``
    and ``{app}-WorkerMetricStats`` (``app``: applicationName, else the lease table's name)."""
    lease = settings.lease_table_name
    if lease is None:
        return None
    coordinator, metrics = legacy_table_names(
        settings.application_name,
        lease,
        coordinator_state=settings.coordinator_state_table_name,
        worker_metrics=settings.worker_metrics_table_name,
    )
    return TableNames(lease, coordinator, metrics)


def lease_slice(settings: Settings) -> LeaseSlice:
    return LeaseSlice(
        failover_s=settings.failover_s,
        max_leases_for_worker=settings.max_leases_for_worker,
        max_leases_to_steal_at_one_time=settings.max_leases_to_steal_at_one_time,
        enable_priority_lease_assignment=settings.enable_priority_lease_assignment,
        expiry_check_s=settings.effective_lease_expiry_check_s,
        assignment_interval_s=settings.effective_lease_assignment_interval_s,
        max_lease_renewal_threads=settings.max_lease_renewal_threads,
        cleanup_leases_upon_shard_completion=settings.cleanup_leases_upon_shard_completion,
        cluster_separator=settings.lease_cluster_separator,
        scan_segments=settings.lease_table_scan_total_segments,
        lease_renewal=settings.lease_renewal,
    )


def shard_slice(settings: Settings) -> ShardSlice:
    return ShardSlice(
        stream_name=settings.effective_stream_name,
        streams=parse_stream_list(settings.stream_names) if settings.stream_names else (),
        initial_position=settings.initial_position,
        initial_timestamp=settings.initial_position_timestamp,
        ignore_unexpected_child_shards=settings.ignore_unexpected_child_shards,
        sync_interval_s=settings.shard_sync_interval_s,
        parent_poll_s=settings.parent_shard_poll_interval_s,
        former_streams_wait_s=settings.former_streams_leases_deletion_wait_s,
    )


def retrieval_slice(settings: Settings) -> RetrievalSlice:
    return RetrievalSlice(
        max_records=settings.max_records,
        idle_between_reads_s=settings.idle_time_between_reads_s,
        reduced_tps_threshold_s=settings.millis_behind_latest_threshold_for_reduced_tps_s,
        at_timestamp=settings.initial_position_timestamp,
        mode_setting=settings.retrieval_mode,
        mode_by_java_rule=settings.effective_retrieval_mode,
        from_file=bool(settings.sources),
        consumer_name=settings.fanout_consumer_name or settings.application_name,
        consumer_arn=settings.fanout_consumer_arn,
        stream_name=settings.effective_stream_name,
        stream_arn=settings.stream_arn,
    )


def consumer_slice(settings: Settings) -> ConsumerSlice:
    return ConsumerSlice(
        application_name=settings.application_name or "",
        action_timeout_s=settings.action_timeout_s,
        initialize_timeout_s=settings.initialize_timeout_s,
        process_records_timeout_s=settings.process_records_timeout_s,
        shutdown_timeout_s=settings.shutdown_timeout_s,
        child_write_timeout_s=settings.child_write_timeout_s,
        child_stall_warning_s=settings.child_stall_warning_s,
        child_stop_timeout_s=settings.child_stop_timeout_s,
        child_restart_backoff_s=settings.child_restart_backoff_s,
        child_restart_max_backoff_s=settings.child_restart_max_backoff_s,
        child_max_consecutive_failures=settings.child_max_consecutive_failures,
        call_process_records_even_for_empty_record_list=settings.call_process_records_even_for_empty_record_list,
        child_channel=settings.child_channel,
        poison_record_policy=settings.poison_record_policy,
        max_delivery_attempts=settings.max_delivery_attempts,
        dead_letter_destination=settings.dead_letter_destination,
    )


def leader_slice(settings: Settings) -> LeaderSlice:
    return LeaderSlice(
        client_version_config=settings.client_version_config,
        strategy=settings.lease_assignment_strategy,
        handoff_timeout_s=settings.graceful_lease_handoff_timeout_s,
        graceful_handoff=settings.graceful_lease_handoff,
        worker_metrics_capture_s=settings.worker_metrics_capture_s,
        worker_metrics_report_s=settings.worker_metrics_report_s,
        worker_metrics_history=settings.worker_metrics_history,
        disable_worker_metrics=settings.disable_worker_metrics,
        rebalance_threshold_percent=settings.rebalance_threshold_percent,
        dampening_percent=settings.dampening_percent,
        allow_throughput_overshoot=settings.allow_throughput_overshoot,
        balancing_frequency=settings.variance_balancing_frequency,
        lock_duration_s=settings.effective_leader_lock_duration_s,
        lock_heartbeat_s=settings.effective_leader_lock_heartbeat_s,
        migrate_all=settings.migrate_all_entities_to_lease_table,
        complete_bake_s=settings.table_migration_complete_bake_s,
        init_bake_s=settings.table_migration_init_bake_s,
        table_layout=settings.lease_table_layout,
        worker_zone=settings.worker_zone,
        zone_from_environment=settings.zone_from_environment,
        max_handoffs_per_worker=settings.max_handoffs_per_worker,
        restart_grace_s=settings.restart_grace_s,
        fixed_worker_id=bool(settings.worker_id),
    )


def metrics_slice(settings: Settings) -> MetricsSlice:
    return MetricsSlice(
        application_name=settings.application_name,
        level=settings.metrics_level,
        enabled_dimensions=settings.metrics_enabled_dimensions,
        buffer_s=settings.metrics_buffer_time_s,
        max_queue=settings.metrics_max_queue_size,
        cloudwatch_endpoint=settings.cloudwatch_endpoint,
        custom_endpoints=bool(settings.kinesis_endpoint or settings.dynamodb_endpoint),
        cluster_separator=settings.lease_cluster_separator,
    )


def worker_slice(settings: Settings) -> WorkerSlice:
    return WorkerSlice(
        worker_id=settings.worker_id,
        executable=settings.executable,
        child_max_line_bytes=settings.child_max_line_bytes,
        shards_per_child=settings.shards_per_child,
        shard_stall_s=settings.shard_stall_s,
        shutdown_grace_s=settings.shutdown_grace_s,
        task_backoff_s=settings.task_backoff_s,
    )
