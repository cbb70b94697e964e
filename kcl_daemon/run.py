"""`kcl-daemon run` and `leases`: build the worker (or the report) from the settings.

The composition root: settings -> AWS clients -> lease table, Kinesis reader, polling sources, child
launcher -> :class:`Scheduler`. The first SIGTERM/SIGINT/SIGHUP starts the graceful shutdown (final
checkpoints, leases released; during start-up the start is abandoned at once); a second one kills the
children and stops at once (``kcl_daemon.stopping``). Exit codes: 0 after a graceful shutdown, 130 after
a second signal, 1 when the worker cannot start (the lease table cannot be created or reached, after the
``STARTUP`` retries) or cannot go on (a background loop kept failing, or the lease table was deleted
while running: then the worker shuts down as on SIGTERM first).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import resource
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from kcl_daemon.aws.clients import AwsClients, ClientSettings, build_clients, client_settings_from
from kcl_daemon.aws.coordinator_state import LEASE_TABLE_KEY, CoordinatorStore
from kcl_daemon.aws.fanout import Fanout
from kcl_daemon.aws.instrument import TableContact, watch_table
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.lease_table import DynamoLeaseTable, ScanResult
from kcl_daemon.aws.lease_table_3x import LeaseTable3x
from kcl_daemon.aws.streams import describe_stream_identity
from kcl_daemon.aws.table_facts import read_table_facts
from kcl_daemon.aws.worker_metrics_table import WorkerMetricsTable
from kcl_daemon.blocking import BlockingPool
from kcl_daemon.clock import Clock, SystemClock
from kcl_daemon.config.settings import Settings
from kcl_daemon.core.leader.client_version import ClientVersionConfig
from kcl_daemon.core.leader.decider import DeciderConfig
from kcl_daemon.core.leader.layout import LayoutReport, describe_layout
from kcl_daemon.core.leader.table_migration import TableLayoutConfig, effective_complete_bake_s
from kcl_daemon.core.leader.zones import resolve_zone
from kcl_daemon.core.leases.keeping import attempt_timeout_for
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.shards.multi_stream import StreamSpec, parse_stream_list, recreated_stream
from kcl_daemon.core.stream_identity import parse_stream_identity, split_lease_key
from kcl_daemon.errors import ConfigError, DependencyUnavailable, ExitStatus, KclError
from kcl_daemon.inspection.stream_shards import configured_shard_lister
from kcl_daemon.inspection.table import LeaseTableReport, inspect_lease_table
from kcl_daemon.leader.assignment import AssignmentConfig
from kcl_daemon.leader.mode import LeaderMode, LeaderModeConfig
from kcl_daemon.leader.tables import Tables, TablesConfig
from kcl_daemon.leader.worker_metrics import WorkerMetricsConfig
from kcl_daemon.leader.zone_lookup import zone_from_environment
from kcl_daemon.leases.coordinator import CoordinatorConfig
from kcl_daemon.lifecycle.configure import consumer_settings
from kcl_daemon.lifecycle.shard_consumer import make_child_launcher
from kcl_daemon.metrics.prometheus import PrometheusEndpoint
from kcl_daemon.metrics.registry import DaemonMetrics
from kcl_daemon.metrics.runtime import MetricsOptions, MetricsRuntime, build_metrics
from kcl_daemon.retrieval.efo_consumer import ConsumerResolver
from kcl_daemon.retrieval.fanout import FanoutRecordSource
from kcl_daemon.retrieval.polling import PollingRecordSource
from kcl_daemon.retrieval.settings import RetrievalSettings, resolve_mode
from kcl_daemon.retrieval.source import ShardRecordSource
from kcl_daemon.retry import KINESIS
from kcl_daemon.shards.multi_stream import MultiStreamSyncConfig, MultiStreamSyncer
from kcl_daemon.shards.sync import ShardSyncConfig
from kcl_daemon.stopping import StopSignals
from kcl_daemon.supervise import EventLoopWatchdog
from kcl_daemon.worker.health import HealthSettings, WorkerHealth
from kcl_daemon.worker.scheduler import SYNC_THREADS, Scheduler, SchedulerConfig
from kcl_daemon.worker.status import StatusInfo, WorkerStatus

logger = logging.getLogger(__name__)

#: GetRecords calls in flight at once, across all shards of this worker: enough for 256 shards read every
#: 200 ms at 50 ms a call (Java runs one thread per shard). Threads start only as the calls in flight need
#: them (kcl_daemon.blocking reuses an idle one first), so an idle or small worker keeps a few.
READ_THREADS = 64
#: Enhanced fan-out: one thread per subscribed shard (a subscription blocks its thread).
FANOUT_THREADS = 512


def raise_open_file_limit() -> None:
    """Raise the soft limit on open files to the hard limit, as the JVM does for the Java daemon.

    Each child takes four descriptors (three pipes and the pidfd that reports its exit): a worker with
    256 shards needs over 1,000, above the soft limit of 1,024 many systems start processes with.
    """
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            logger.debug("open file limit raised from %d to %d", soft, target)
    except (ValueError, OSError) as exc:  # a container may refuse it: the worker runs with what it has
        logger.info("open file limit left at its soft value: %s", exc)


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
    former_streams_wait_s: float = 3600.0
    #: leaseTableLayout (what a new application gets; None: not set, chosen from the table)
    table_layout: TableLayoutConfig | None = None
    #: leaseTableScanTotalSegments (0: Java's automatic sizing)
    scan_segments: int = 0
    #: shardStallMillis: a shard behind the tip whose child finished nothing this long fails /readyz
    shard_stall_s: float = 300.0


def plan_worker(
    settings: Settings, *, worker_id: str | None = None, status_interval_s: float = 30.0
) -> WorkerPlan:
    streams = parse_stream_list(settings.stream_names) if settings.stream_names else ()
    stream = ",".join(spec.name for spec in streams) if streams else settings.effective_stream_name
    table = settings.lease_table_name
    if stream is None or table is None or settings.executable is None:
        raise ValueError("run needs executableName, applicationName and streamName (validate_for_run)")
    worker = worker_id or settings.worker_id or default_worker_id()
    scheduler = SchedulerConfig(
        coordinator=CoordinatorConfig(
            worker_id=worker,
            failover_s=settings.failover_s,
            max_leases_for_worker=settings.max_leases_for_worker,
            max_leases_to_steal_at_one_time=settings.max_leases_to_steal_at_one_time,
            enable_priority_lease_assignment=settings.enable_priority_lease_assignment,
            expiry_check_s=settings.effective_lease_expiry_check_s,
        ),
        shard_sync=ShardSyncConfig(
            stream_name=stream,
            initial_position=settings.initial_position,
            initial_timestamp=settings.initial_position_timestamp,
            ignore_unexpected_child_shards=settings.ignore_unexpected_child_shards,
            interval_s=settings.shard_sync_interval_s,
        ),
        consumer=consumer_settings(settings, return_when_parked=False),
        delete_completed_leases=settings.cleanup_leases_upon_shard_completion,
        parent_poll_s=settings.parent_shard_poll_interval_s,
        task_backoff_s=settings.task_backoff_s,
        shutdown_grace_s=settings.shutdown_grace_s,
        max_lease_renewal_threads=settings.max_lease_renewal_threads,
        status_interval_s=status_interval_s,
    )
    retrieval = RetrievalSettings(
        max_records=settings.max_records,
        idle_between_reads_s=settings.idle_time_between_reads_s,
        reduced_tps_threshold_s=settings.millis_behind_latest_threshold_for_reduced_tps_s,
        at_timestamp=settings.initial_position_timestamp,
        mode=resolve_mode(
            settings.retrieval_mode, settings.effective_retrieval_mode, from_file=bool(settings.sources)
        ),
        consumer_name=settings.fanout_consumer_name or settings.application_name,
        consumer_arn=settings.fanout_consumer_arn,
    )
    app = settings.application_name or table
    return WorkerPlan(
        worker,
        stream,
        table,
        scheduler,
        retrieval,
        settings.executable,
        settings.child_max_line_bytes,
        lease_mode=leader_mode_config(settings, worker),
        coordinator_table=settings.coordinator_state_table_name or f"{app}-CoordinatorState",
        worker_metrics_table=settings.worker_metrics_table_name or f"{app}-WorkerMetricStats",
        streams=streams,
        former_streams_wait_s=settings.former_streams_leases_deletion_wait_s,
        table_layout=None
        if settings.lease_table_layout is None
        else TableLayoutConfig(settings.lease_table_layout),
        scan_segments=settings.lease_table_scan_total_segments,
        shard_stall_s=settings.shard_stall_s,
    )


def leader_mode_config(settings: Settings, worker_id: str) -> LeaderModeConfig:
    """The KCL 3.x settings (contract §4.3 timings: assignment every 2 x failover; discovery, as the leader's
    expiry passes, every min(1 s, failover / 10))."""
    interval = settings.effective_lease_assignment_interval_s
    return LeaderModeConfig(
        worker_id=worker_id,
        client_version=ClientVersionConfig(settings.client_version_config),
        strategy=settings.lease_assignment_strategy,
        assignment=AssignmentConfig(
            interval_s=interval,
            failover_s=settings.failover_s,
            expiry_interval_s=settings.effective_lease_expiry_check_s,
            handoff_timeout_s=settings.graceful_lease_handoff_timeout_s,
            graceful_handoff=settings.graceful_lease_handoff,
            reporter_period_s=settings.worker_metrics_report_s,
            decider=DeciderConfig(
                failover_s=settings.failover_s,
                max_leases_for_worker=settings.max_leases_for_worker,
                rebalance_threshold_percent=settings.rebalance_threshold_percent,
                dampening_percent=settings.dampening_percent,
                allow_throughput_overshoot=settings.allow_throughput_overshoot,
                graceful_handoff=settings.graceful_lease_handoff,
                max_handoffs_per_worker=settings.max_handoffs_per_worker,
            ),
        ),
        metrics=WorkerMetricsConfig(
            worker_id,
            capture_s=settings.worker_metrics_capture_s,
            report_s=settings.worker_metrics_report_s,
            history=settings.worker_metrics_history,
            disabled=settings.disable_worker_metrics,
            zone=worker_zone(settings, worker_id),
        ),
        # Java queries at half the assignment interval (10 s at the defaults); a KEYS_ONLY query of one key
        # every min(1 s, failover / 10) lets a worker start a lease moved to it within about a second
        discovery_s=min(max(interval / 2 - 0.025, 0.1), settings.effective_lease_expiry_check_s),
        lock_duration_s=settings.effective_leader_lock_duration_s,
        lock_heartbeat_s=settings.effective_leader_lock_heartbeat_s,
        handoff_timeout_s=settings.graceful_lease_handoff_timeout_s,
        balancing_frequency=settings.variance_balancing_frequency,
        restart_grace_s=restart_grace_s(settings),
        migrate_all=settings.migrate_all_entities_to_lease_table,
        complete_bake_s=effective_complete_bake_s(settings.table_migration_complete_bake_s)[0],
        init_bake_s=settings.table_migration_init_bake_s,
    )


def restart_grace_s(settings: Settings) -> float:
    """``restartGraceMillis``, only with a configured workerId: a random one never comes back."""
    if settings.restart_grace_s > 0 and not settings.worker_id:
        logger.warning(
            "restartGraceMillis ignored: it needs a fixed workerId (a restart gets a new random one)"
        )
        return 0.0
    return settings.restart_grace_s


def worker_zone(settings: Settings, worker_id: str) -> str | None:
    """workerZone, else the environment (zoneFromEnvironment), else the workerId prefix (core.zones)."""
    from_environment = zone_from_environment() if settings.zone_from_environment else None
    zone = resolve_zone(worker_id, settings.lease_cluster_separator, settings.worker_zone, from_environment)
    logger.info("worker %s: zone %s", worker_id, zone or "none")
    return zone


def threads_calling_aws(plan: WorkerPlan) -> int:
    """botocore's connection pool must be at least this large, or calls queue for a connection."""
    return plan.scheduler.threads_calling_aws + READ_THREADS


class RecentListings:
    """ListShards of a stream, shared by the shard sources created within ``max_age_s`` of one another.

    Every new shard source looks its shard up in a listing (is it closed, where does it end). A worker
    that starts with 256 leases would otherwise list the whole stream 256 times at once, parsing
    256 x 256 shards; one listing serves them all. A listing a few seconds old is as good for this as a
    fresh one: a shard that closed since is found closed by the reader itself (its last GetRecords
    page), which lists the shards again then. Thread-safe: the sources are made on the lease-io pool.
    """

    def __init__(self, kinesis: Kinesis, clock: Clock, max_age_s: float = 5.0) -> None:
        self._kinesis = kinesis
        self._clock = clock
        self._max_age_s = max_age_s
        self._lock = threading.Lock()
        self._listings: dict[str, tuple[float, dict[str, Shard]]] = {}

    def shards(self, stream_name: str) -> dict[str, Shard]:
        """The stream's shards by id, listed at most ``max_age_s`` ago; ListShards errors propagate."""
        with self._lock:  # one listing at a time: the threads that wait get the one just made
            cached = self._listings.get(stream_name)
            now = self._clock.monotonic()
            if cached is not None and now - cached[0] <= self._max_age_s:
                return cached[1]
            listed = {s.shard_id: s for s in KINESIS.call(self._kinesis.list_shards, stream_name)}
            self._listings[stream_name] = (self._clock.monotonic(), listed)
            return listed


def build_scheduler(
    plan: WorkerPlan,
    clients: AwsClients,
    *,
    clock: Clock,
    cwd: str | None = None,
    metrics: DaemonMetrics | None = None,
) -> Scheduler:
    table = LeaseTable3x(clients.dynamodb, plan.table_name, scan_segments=plan.scan_segments)
    kinesis = Kinesis(clients.kinesis)
    read_pool = BlockingPool(READ_THREADS, thread_name_prefix="kinesis-read")
    fanout = None
    consumers: dict[str, ConsumerResolver] = {}
    if plan.retrieval.mode == "FANOUT":
        fanout_pool = ThreadPoolExecutor(FANOUT_THREADS, thread_name_prefix="fanout")
        fanout = Fanout(clients.kinesis)

    def consumer_of(stream_name: str) -> ConsumerResolver:
        """One registered stream consumer per stream (a configured consumer ARN names one stream only)."""
        assert fanout is not None
        if stream_name not in consumers:
            consumers[stream_name] = ConsumerResolver(
                fanout,
                stream_name,
                plan.retrieval.consumer_name or plan.table_name,
                None if plan.streams else plan.retrieval.consumer_arn,
            )
        return consumers[stream_name]

    listings = RecentListings(kinesis, clock)

    def source_of(stream_name: str, from_lease: Shard) -> ShardRecordSource:
        """Runs on a worker thread. ListShards' view of the shard says whether it is closed and where it
        ends, which ends closed shards on emulators that never send ChildShards."""
        shard = from_lease
        try:
            shard = listings.shards(stream_name).get(from_lease.shard_id, from_lease)
        except KclError as exc:
            logger.warning("shard %s: ListShards failed, reading without it: %s", from_lease.shard_id, exc)
        if fanout is not None:
            arn = consumer_of(stream_name).arn()
            return FanoutRecordSource(fanout, arn, shard, fanout_pool, plan.retrieval, clock=clock)
        return PollingRecordSource(kinesis, stream_name, shard, read_pool, plan.retrieval, clock=clock)

    def make_source(from_lease: Shard) -> ShardRecordSource:
        return source_of(plan.stream_name, from_lease)

    def make_stream_source(from_lease: Shard, stream_identifier: str) -> ShardRecordSource:
        """Reads by stream name, so a lease of a former stream re-created under the same name must not be
        read: it would read the new stream's shard of the same id (its leases are deleted after the
        former-stream wait). A deleted stream is read on until a read finds it gone (contract §6.6:
        kcl-daemon then tells the child leaseLost and leaves the lease as it is)."""
        identity = parse_stream_identity(stream_identifier)
        current = syncer.identities.get(identity.stream_name) if syncer is not None else None
        refused = recreated_stream(stream_identifier, current)
        if refused is not None:
            raise DependencyUnavailable(refused)
        return source_of(identity.stream_name, from_lease)

    def child_shards_of(lease_key: str) -> Sequence[str] | None:
        """For cleanup: the children ListShards knows; None if the shard or the stream is gone."""
        identity, shard_id = split_lease_key(lease_key)
        try:
            shards = KINESIS.call(
                kinesis.list_shards, plan.stream_name if identity is None else identity.stream_name
            )
        except DependencyUnavailable:
            return None
        if not any(shard.shard_id == shard_id for shard in shards):
            return None
        return [shard.shard_id for shard in shards if shard_id in shard.parent_shard_ids]

    launch = make_child_launcher(plan.executable, line_limit_bytes=plan.child_max_line_bytes, cwd=cwd)
    lease_mode = None
    if plan.lease_mode is not None:
        coordinator_table = plan.coordinator_table or f"{plan.table_name}-CoordinatorState"
        metrics_table = plan.worker_metrics_table or f"{plan.table_name}-WorkerMetricStats"
        tables = Tables(
            CoordinatorStore(clients.dynamodb, coordinator_table),
            CoordinatorStore(clients.dynamodb, plan.table_name, LEASE_TABLE_KEY),
            WorkerMetricsTable(clients.dynamodb, metrics_table),
            WorkerMetricsTable(clients.dynamodb, plan.table_name, in_lease_table=True),
            TablesConfig(
                plan.lease_mode.worker_id,
                plan.lease_mode.migrate_all,
                plan.table_layout,
                plan.lease_mode.client_version,
            ),
        )
        lease_mode = LeaderMode(plan.lease_mode, table, tables, clock)
    syncer = None
    if plan.streams:
        syncer = MultiStreamSyncer(
            kinesis,
            table,
            MultiStreamSyncConfig(plan.streams, plan.scheduler.shard_sync, plan.former_streams_wait_s),
            clock,
            functools.partial(describe_stream_identity, clients.kinesis),
            pool=ThreadPoolExecutor(SYNC_THREADS, thread_name_prefix="shard-sync"),
        )
    return Scheduler(
        plan.scheduler,
        table,
        kinesis,
        make_source,
        launch,
        clock,
        child_shard_lookup=child_shards_of,
        metrics=metrics,
        lease_mode=lease_mode,
        syncer=syncer,
        make_stream_source=make_stream_source,
        keeper_table=None if clients.lease_keeper is None else table.twin(clients.lease_keeper),
    )


async def run_worker(
    plan: WorkerPlan,
    clients: AwsClients,
    *,
    clock: Clock | None = None,
    on_status: Callable[[Scheduler], None] | None = None,
    status_every_s: float = 2.0,
    metrics: MetricsRuntime | None = None,
) -> int:
    """Run until SIGTERM/SIGINT; returns the exit code."""
    clock = clock or SystemClock()
    scheduler = build_scheduler(plan, clients, clock=clock, metrics=metrics.metrics if metrics else None)
    stop_health = None
    if metrics is not None and metrics.prometheus is not None:
        stop_health = attach_health(scheduler, plan, clients, metrics.prometheus)
        attach_status(scheduler, plan, metrics.metrics, metrics.prometheus, clock)
    stop = asyncio.Event()
    main = asyncio.current_task()
    signals = StopSignals(on_first=stop.set, on_second=main.cancel if main is not None else stop.set)
    with signals:
        try:
            return await _run_until_stopped(
                plan, scheduler, stop, signals, on_status, status_every_s, metrics=metrics, clock=clock
            )
        finally:
            if stop_health is not None:
                stop_health()
            if metrics is not None:
                await metrics.close()


def attach_health(
    scheduler: Scheduler, plan: WorkerPlan, clients: AwsClients, endpoint: PrometheusEndpoint
) -> Callable[[], None]:
    """Answer ``/healthz`` and ``/readyz`` on ``endpoint`` for ``scheduler`` (call on the event loop);
    returns the function that stops the event-loop watchdog."""
    contact = TableContact(plan.table_name)
    watch_table(clients.dynamodb, contact)
    watchdog = EventLoopWatchdog(asyncio.get_running_loop()).start()
    endpoint.health = WorkerHealth(
        scheduler, HealthSettings(stall_limit_s=plan.shard_stall_s), contact=contact, watchdog=watchdog
    )
    return watchdog.stop


def attach_status(
    scheduler: Scheduler,
    plan: WorkerPlan,
    metrics: DaemonMetrics,
    endpoint: PrometheusEndpoint,
    clock: Clock,
) -> WorkerStatus:
    """Serve the status page (``/``, ``/status.json``) on ``endpoint`` for ``scheduler``, and start its
    history sampler (call on the event loop)."""
    mode = plan.lease_mode
    info = StatusInfo(
        worker_id=plan.worker_id,
        stream=plan.stream_name,
        table=plan.table_name,
        zone=None if mode is None else mode.metrics.zone,
        restart_grace_s=0.0 if mode is None else mode.restart_grace_s,
    )
    status = WorkerStatus(scheduler, info, metrics=metrics, health=lambda: endpoint.health)
    scheduler.add_loop("status-history", functools.partial(status.run_sampler, clock))
    endpoint.status = status
    return status


async def _run_until_stopped(
    plan: WorkerPlan,
    scheduler: Scheduler,
    stop: asyncio.Event,
    signals: StopSignals,
    on_status: Callable[[Scheduler], None] | None,
    status_every_s: float,
    *,
    metrics: MetricsRuntime | None = None,
    clock: Clock,
) -> int:
    logger.info(
        "worker %s (pid %d) starting: stream %s, lease table %s, processor %s",
        plan.worker_id,
        os.getpid(),
        plan.stream_name,
        plan.table_name,
        " ".join(plan.executable),
    )
    try:
        starting = asyncio.ensure_future(scheduler.start())
        if await _first_of(stop, starting):  # a signal during start-up: do not wait for it to finish
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, KclError):
                await starting
            if scheduler.may_hold_leases:  # a leader may have assigned us leases already: give them up
                logger.info("stopped during start-up")
                await scheduler.shutdown()
            else:
                logger.info("stopped during start-up: no lease was taken")
                await scheduler.close()
            return ExitStatus.OK
        starting.result()
    except KclError as exc:
        logger.error("cannot start the worker: %s", exc)  # noqa: TRY400 - the message is the whole story
        await scheduler.close()
        return ExitStatus.FAILED
    except asyncio.CancelledError:
        await scheduler.close()
        return ExitStatus.INTERRUPTED if signals.immediate else ExitStatus.FAILED
    if metrics is not None:
        metrics.start(clock)
    reporter = asyncio.create_task(_report(scheduler, on_status, status_every_s)) if on_status else None
    try:
        failed_waiter = asyncio.ensure_future(scheduler.failed.wait())
        failed = not await _first_of(stop, failed_waiter) and scheduler.failed.is_set()
        if failed:
            logger.error("the worker cannot go on: %s; shutting down", scheduler.failure)
        await scheduler.shutdown()
        if failed:
            return ExitStatus.FAILED
    except asyncio.CancelledError:
        await scheduler.close()
        return ExitStatus.INTERRUPTED if signals.immediate else ExitStatus.FAILED
    finally:
        if reporter is not None:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reporter
    return ExitStatus.OK


async def _first_of(stop: asyncio.Event, other: asyncio.Future[Any]) -> bool:
    """Wait for a stop request or ``other`` to finish; True if the stop request came first."""
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([stopping, other], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if stop.is_set():
        if not other.done():
            other.cancel()
        return True
    return False


async def _report(scheduler: Scheduler, on_status: Callable[[Scheduler], None], every_s: float) -> None:
    while True:
        await asyncio.sleep(every_s)
        on_status(scheduler)


def run_from_settings(
    settings: Settings,
    *,
    local: bool = False,
    worker_id: str | None = None,
    status_every_s: float = 10.0,
    metrics_options: MetricsOptions | None = None,
) -> int:
    """Build the AWS clients (or the embedded local backend) and run the worker; returns the exit code."""
    plan = plan_worker(settings, worker_id=worker_id)
    raise_open_file_limit()
    if plan.streams and local:
        raise ConfigError(["local mode embeds one stream: set streamName instead of streamNames"])
    if plan.streams and plan.retrieval.consumer_arn:
        logger.warning("fanoutConfig.consumerArn names one stream's consumer; with streamNames it is ignored")
    options = metrics_options or MetricsOptions()

    def with_metrics(clients: AwsClients, client_settings: ClientSettings | None) -> MetricsRuntime:
        return build_metrics(
            settings,
            options,
            clients,
            client_settings,
            worker_id=plan.worker_id,
            stream=plan.stream_name,
            clock=SystemClock(),
            local=local,
        )

    if plan.retrieval.mode == "FANOUT" and local:
        logger.warning("local mode: the embedded backend has no SubscribeToShard; polling instead of fan-out")
        plan = replace(plan, retrieval=replace(plan.retrieval, mode="POLLING"))
    elif plan.retrieval.mode == "FANOUT" and settings.retrieval_mode == "DEFAULT":
        logger.warning(
            "retrievalMode DEFAULT resolves to FANOUT (enhanced fan-out, as in Java: no polling key is "
            "set): a stream consumer is registered; set retrievalMode = POLLING to poll instead"
        )
    keeper_timeout = attempt_timeout_for(settings.failover_s)
    if not local:
        client_settings = replace(
            client_settings_from(settings),
            max_pool_connections=threads_calling_aws(plan),
            lease_keeper_timeout_s=keeper_timeout,
        )
        clients = build_clients(client_settings)
        runtime = with_metrics(clients, client_settings)
        return asyncio.run(
            run_worker(plan, clients, on_status=_log_status, status_every_s=status_every_s, metrics=runtime)
        )

    from kcl_daemon.local import local_stack  # moto is an optional extra: import only when asked

    with local_stack(plan.stream_name) as stack:
        logger.info(
            "local mode: embedded Kinesis + DynamoDB on %s, stream %s ready in %.2fs, producing %s",
            stack.backend.endpoint,
            plan.stream_name,
            stack.ready_s,
            "sample records" if stack.producer else "nothing",
        )

        def progress(scheduler: Scheduler) -> None:
            produced = stack.producer.stats.user_records if stack.producer else 0
            logger.info("progress: %d records produced; %s", produced, scheduler.status().line())

        # The daemon's own clients: the sample producer's PutRecords calls are not the daemon's to count.
        clients = stack.backend.build_clients(ClientSettings(lease_keeper_timeout_s=keeper_timeout))
        runtime = with_metrics(clients, None)
        return asyncio.run(
            run_worker(plan, clients, on_status=progress, status_every_s=status_every_s, metrics=runtime)
        )


def _log_status(scheduler: Scheduler) -> None:
    logger.info("status: %s", scheduler.status().line())


def inspect_leases(settings: Settings, *, check_expiry: bool = False) -> LeaseTableReport:
    """The `kcl-daemon leases` report for the configured table (and stream, when one is configured)."""
    table_name = settings.lease_table_name
    if table_name is None:
        raise ValueError("leases needs applicationName or tableName (validate_for_leases)")
    clients = build_clients(client_settings_from(settings))
    table = DynamoLeaseTable(clients.dynamodb, table_name)
    kinesis = Kinesis(clients.kinesis)

    def scan() -> ScanResult:
        return table.list_leases(consistent=True)

    return asyncio.run(
        inspect_lease_table(
            table_name,
            scan,
            list_shards=configured_shard_lister(settings, clients.kinesis, kinesis),
            clock=SystemClock(),
            expiry_wait_s=settings.failover_s if check_expiry else None,
            cluster_separator=settings.lease_cluster_separator,
            describe_layout=functools.partial(table_layout, settings, clients),
        )
    )


def legacy_table_names(settings: Settings) -> tuple[str, str]:
    """The coordinator-state and worker-metrics tables of the 3.0-3.4 layout."""
    app = settings.application_name or settings.lease_table_name
    return (
        settings.coordinator_state_table_name or f"{app}-CoordinatorState",
        settings.worker_metrics_table_name or f"{app}-WorkerMetricStats",
    )


def table_layout(settings: Settings, clients: AwsClients | None = None) -> LayoutReport:
    """The layout and table-migration state of the configured application's tables (read-only)."""
    table_name = settings.lease_table_name
    if table_name is None:
        raise ValueError("needs applicationName or tableName (validate_for_leases)")
    clients = clients or build_clients(client_settings_from(settings))
    coordinator, metrics = legacy_table_names(settings)
    facts = read_table_facts(
        clients.dynamodb,
        table_name,
        coordinator,
        metrics,
        now_s=time.time(),
        reporter_period_s=settings.worker_metrics_report_s,
    )
    return describe_layout(facts)


def migrate_from_settings(
    settings: Settings, mode: str, *, dry_run: bool, wait_s: float, out: Callable[[str], None]
) -> int:
    """`kcl-daemon migrate MODE` on the configured application's tables; returns the exit status."""
    from kcl_daemon.core.migrate.plan import Mode
    from kcl_daemon.migrate.command import MigrateTarget, run_migrate

    table_name = settings.lease_table_name
    if table_name is None:
        raise ValueError("migrate needs applicationName or tableName (validate_for_leases)")
    coordinator, metrics = legacy_table_names(settings)
    target = MigrateTarget(table_name, coordinator, metrics, settings.worker_metrics_report_s)
    clients = build_clients(client_settings_from(settings))
    return run_migrate(Mode(mode), clients, target, dry_run=dry_run, wait_s=wait_s, out=out)
