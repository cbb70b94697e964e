"""`kcl-daemon run`: wire the worker from each concern's slice of the settings, and run it.

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
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from kcl_daemon.aws.clients import AwsClients, ClientSettings, build_clients, client_settings_from
from kcl_daemon.aws.coordinator_state import LEASE_TABLE_KEY, CoordinatorStore
from kcl_daemon.aws.fanout import Fanout
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.lease_table_3x import LeaseTable3x
from kcl_daemon.aws.streams import describe_stream_identity
from kcl_daemon.aws.worker_metrics_table import WorkerMetricsTable
from kcl_daemon.blocking import BlockingPool
from kcl_daemon.clock import Clock, SystemClock
from kcl_daemon.config.settings import Settings
from kcl_daemon.core.leases.timings import attempt_timeout_for
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.shards.multi_stream import recreated_stream
from kcl_daemon.core.stream_identity import parse_stream_identity, split_lease_key
from kcl_daemon.errors import ConfigError, DependencyUnavailable, ExitStatus, KclError
from kcl_daemon.leader.mode import LeaderMode
from kcl_daemon.leader.tables import Tables, TablesConfig
from kcl_daemon.lifecycle.configure import consumer_settings
from kcl_daemon.lifecycle.shard_consumer import make_child_launcher
from kcl_daemon.metrics.registry import DaemonMetrics
from kcl_daemon.metrics.runtime import MetricsOptions, MetricsRuntime, build_metrics
from kcl_daemon.process.limits import raise_open_file_limit
from kcl_daemon.retrieval.efo_consumer import ConsumerResolver
from kcl_daemon.retrieval.fanout import FanoutRecordSource
from kcl_daemon.retrieval.polling import PollingRecordSource
from kcl_daemon.retrieval.source import ShardRecordSource
from kcl_daemon.retry import KINESIS
from kcl_daemon.shards.listings import RecentListings
from kcl_daemon.shards.multi_stream import MultiStreamSyncConfig, MultiStreamSyncer
from kcl_daemon.stopping import StopSignals
from kcl_daemon.worker.endpoints import attach_health, attach_status
from kcl_daemon.worker.plan import WorkerPlan, WorkerSlices, worker_plan
from kcl_daemon.worker.scheduler import SYNC_THREADS, Scheduler

logger = logging.getLogger(__name__)

#: GetRecords calls in flight at once across the worker's shards: 256 shards read every 200 ms at 50 ms a
#: call. On the lean path (the default) they are awaited on the event loop over as many connections; the
#: threads, started only as needed, serve reads only where botocore does (a proxy, unsigned requests...).
READ_THREADS = 64
#: Enhanced fan-out: one thread per subscribed shard (a subscription blocks its thread).
FANOUT_THREADS = 512


def plan_worker(
    settings: Settings, *, worker_id: str | None = None, status_interval_s: float = 30.0
) -> WorkerPlan:
    """The worker's plan from each concern's slice of ``settings`` (the only place the worker reads them)."""
    slices = WorkerSlices(
        settings.worker(),
        settings.tables(),
        settings.leases(),
        settings.shards(),
        settings.retrieval(),
        settings.leader(),
    )
    clients = client_settings_from(settings)
    consumer = consumer_settings(settings.consumer(), clients, return_when_parked=False)
    return worker_plan(slices, consumer, worker_id=worker_id, status_interval_s=status_interval_s)


def threads_calling_aws(plan: WorkerPlan) -> int:
    """botocore's connection pool must be at least this large, or calls queue for a connection."""
    return plan.scheduler.threads_calling_aws + READ_THREADS


def build_scheduler(
    plan: WorkerPlan,
    clients: AwsClients,
    *,
    clock: Clock,
    cwd: str | None = None,
    metrics: DaemonMetrics | None = None,
) -> Scheduler:
    heartbeats = plan.side_tables.worker_metrics  # leaseRenewal = PER_WORKER's heartbeat items
    table = LeaseTable3x(
        clients.dynamodb, plan.table_name, scan_segments=plan.scan_segments, heartbeat_table=heartbeats
    )
    kinesis = Kinesis(clients.kinesis)
    read_pool = BlockingPool(READ_THREADS, thread_name_prefix="kinesis-read")
    fanout = None
    consumers: dict[str, ConsumerResolver] = {}
    if plan.retrieval.mode == "FANOUT":
        fanout_pool = ThreadPoolExecutor(FANOUT_THREADS, thread_name_prefix="fanout")
        fanout = Fanout(clients.subscriptions or clients.kinesis)

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

    launch = make_child_launcher(
        plan.executable,
        line_limit_bytes=plan.child_max_line_bytes,
        cwd=cwd,
        shards_per_child=plan.shards_per_child,
    )
    lease_mode = None
    if plan.lease_mode is not None:
        coordinator_table, metrics_table = plan.side_tables
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
            settings.metrics(),
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
    elif plan.retrieval.mode == "FANOUT" and settings.retrieval().mode_setting == "DEFAULT":
        logger.warning(
            "retrievalMode DEFAULT resolves to FANOUT (enhanced fan-out, as in Java: no polling key is "
            "set): a stream consumer is registered; set retrievalMode = POLLING to poll instead"
        )
    keeper_timeout = attempt_timeout_for(settings.leases().failover_s)
    if not local:
        client_settings = replace(
            client_settings_from(settings),
            max_pool_connections=threads_calling_aws(plan),
            lease_keeper_timeout_s=keeper_timeout,
        )
        clients = build_clients(client_settings, subscriptions=plan.retrieval.mode == "FANOUT")
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
