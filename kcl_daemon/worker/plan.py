"""What the worker needs from the settings, resolved once (:class:`WorkerPlan`), from each concern's
slice: the scheduler's loops, the reader, the KCL 3.x lease mode, the tables, the streams."""

from __future__ import annotations

import socket
import uuid
from dataclasses import dataclass

from kcl_daemon.config.slices import (
    LeaderSlice,
    LeaseSlice,
    RetrievalSlice,
    ShardSlice,
    TableNames,
    WorkerSlice,
)
from kcl_daemon.core.leader.table_migration import TableLayoutConfig
from kcl_daemon.core.leader.table_names import LegacyTableNames, legacy_table_names
from kcl_daemon.core.shards.multi_stream import StreamSpec
from kcl_daemon.leader.configure import leader_mode_config
from kcl_daemon.leader.mode import LeaderModeConfig
from kcl_daemon.leases.coordinator import CoordinatorConfig
from kcl_daemon.lifecycle.shard_consumer import ConsumerSettings
from kcl_daemon.retrieval.settings import RetrievalSettings, retrieval_settings
from kcl_daemon.shards.sync import ShardSyncConfig
from kcl_daemon.worker.scheduler import SchedulerConfig


def default_worker_id() -> str:
    """Host name plus a random suffix: unique per process start, like Java's random UUID, but readable."""
    return f"{socket.gethostname()}:{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    """Everything the worker needs that comes from the settings, resolved."""

    worker_id: str
    stream_name: str
    table_name: str
    scheduler: SchedulerConfig
    retrieval: RetrievalSettings
    executable: tuple[str, ...]
    child_max_line_bytes: int
    #: KCL 3.x-aware lease assignment (None: the plain 2.x taker, as in tests that build plans by hand)
    lease_mode: LeaderModeConfig | None = None
    coordinator_table: str | None = None
    worker_metrics_table: str | None = None
    #: several streams per application (streamNames); empty: the single stream ``stream_name``
    streams: tuple[StreamSpec, ...] = ()
    #: shardsPerChild: lanes offered to each child (1: one child per shard, no offer)
    shards_per_child: int = 1
    former_streams_wait_s: float = 3600.0
    #: leaseTableLayout (what a new application gets; None: not set, chosen from the table)
    table_layout: TableLayoutConfig | None = None
    #: leaseTableScanTotalSegments (0: Java's automatic sizing)
    scan_segments: int = 0
    #: shardStallMillis: a shard behind the tip whose child finished nothing this long fails /readyz
    shard_stall_s: float = 300.0

    @property
    def side_tables(self) -> LegacyTableNames:
        """The coordinator-state and worker-metrics tables (the per-worker heartbeats live in the latter),
        as configured, else named after the lease table."""
        return legacy_table_names(
            None,
            self.table_name,
            coordinator_state=self.coordinator_table,
            worker_metrics=self.worker_metrics_table,
        )


@dataclass(frozen=True, slots=True)
class WorkerSlices:
    """The slices of the settings the worker is planned from (``settings.worker()``, ...)."""

    worker: WorkerSlice
    tables: TableNames | None
    leases: LeaseSlice
    shards: ShardSlice
    retrieval: RetrievalSlice
    leader: LeaderSlice


def worker_plan(
    slices: WorkerSlices,
    consumer: ConsumerSettings,
    *,
    worker_id: str | None = None,
    status_interval_s: float = 30.0,
) -> WorkerPlan:
    """The plan; ``worker_id`` overrides workerId (else a random one); ``consumer``: the shard consumer's."""
    shards, leases, tables = slices.shards, slices.leases, slices.tables
    stream = ",".join(spec.name for spec in shards.streams) if shards.streams else shards.stream_name
    if stream is None or tables is None or slices.worker.executable is None:
        raise ValueError("run needs executableName, applicationName and streamName (validate_for_run)")
    worker = worker_id or slices.worker.worker_id or default_worker_id()
    scheduler = SchedulerConfig(
        coordinator=CoordinatorConfig(
            worker_id=worker,
            failover_s=leases.failover_s,
            max_leases_for_worker=leases.max_leases_for_worker,
            max_leases_to_steal_at_one_time=leases.max_leases_to_steal_at_one_time,
            enable_priority_lease_assignment=leases.enable_priority_lease_assignment,
            expiry_check_s=leases.expiry_check_s,
            lease_renewal=leases.lease_renewal,
        ),
        shard_sync=ShardSyncConfig(
            stream_name=stream,
            initial_position=shards.initial_position,
            initial_timestamp=shards.initial_timestamp,
            ignore_unexpected_child_shards=shards.ignore_unexpected_child_shards,
            interval_s=shards.sync_interval_s,
        ),
        consumer=consumer,
        delete_completed_leases=leases.cleanup_leases_upon_shard_completion,
        parent_poll_s=shards.parent_poll_s,
        task_backoff_s=slices.worker.task_backoff_s,
        shutdown_grace_s=slices.worker.shutdown_grace_s,
        max_lease_renewal_threads=leases.max_lease_renewal_threads,
        status_interval_s=status_interval_s,
    )
    layout = slices.leader.table_layout
    return WorkerPlan(
        worker,
        stream,
        tables.lease,
        scheduler,
        retrieval_settings(slices.retrieval),
        slices.worker.executable,
        slices.worker.child_max_line_bytes,
        lease_mode=leader_mode_config(slices.leader, leases, worker),
        coordinator_table=tables.coordinator_state,
        worker_metrics_table=tables.worker_metrics,
        streams=shards.streams,
        shards_per_child=slices.worker.shards_per_child,
        former_streams_wait_s=shards.former_streams_wait_s,
        table_layout=None if layout is None else TableLayoutConfig(layout),
        scan_segments=leases.scan_segments,
        shard_stall_s=slices.worker.shard_stall_s,
    )
