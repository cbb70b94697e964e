"""Chooses and runs the lease algorithm the fleet runs: the 2.x taker or KCL 3.x leader-based assignment.

At start-up (and every ``migration_poll_s`` after) the ``Migration3.0`` item is read and resolved
against ``clientVersionConfig`` (:mod:`kcl_daemon.core.leader.client_version`): a fleet never runs both
algorithms on one table. In 3.x mode the worker runs, each as a supervised loop:

* ``worker-metrics``: publishes its WorkerMetricStats item (without it a leader assigns it nothing),
  where the table migration says (:mod:`kcl_daemon.leader.tables`), reporting no CPU while live Java
  workers report none (``fleet-cpu-check``);
* ``table-migration``: follows the KCL 3.5 table migration; the leader drives it after each assignment
  run (:mod:`kcl_daemon.leader.table_migration`);
* ``layout-check`` (in every mode): names workers of a table layout this application cannot share its
  table with (:mod:`kcl_daemon.leader.layout_watch`);
* ``leader-election``: the ``Leader`` lock (Java's format), in the table the migration says;
* ``lease-assignment``: the leader's scan -> decider -> conditional moves; on a follower, a scan every
  half failover for the fallback taker (:mod:`kcl_daemon.leader.fallback`: an expired lease that no
  leader reassigns in time is taken, fenced on its counter, without the lock);
* ``lease-discovery``: adopts the leases assigned to it (GSI query);
* ``lease-handoff``: completes graceful hand-offs of its own leases.

In 2.x mode it runs the taker (plus the metrics reporter in ``UPGRADE_FROM_2X``, so that the fleet can
flip). In ``UPGRADE_FROM_2X`` every worker also runs Java's readiness monitor: once the GSI is ACTIVE and
every lease owner has published current metrics for 10 minutes, it flips ``Migration3.0`` to
``3X_WITH_ROLLBACK`` (conditionally: the first worker wins). When the stored version changes the worker
switches algorithm in place. On a graceful stop the
worker deletes its metrics item (the leader stops assigning to it at once) and releases the lock; with
``restartGraceMillis`` it keeps its leases for its return, each marked with the grace, and (3.x) publishes
RESTARTING instead.

:func:`make_decider` maps ``leaseAssignmentStrategy`` to a decider; add a strategy there.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar, cast

from kcl_daemon.clock import Clock
from kcl_daemon.core.leader.assignor import CooperativeAssignor
from kcl_daemon.core.leader.client_version import (
    MIGRATION_KEY,
    READY_STABLE_S,
    Algorithm,
    ClientVersion,
    ClientVersionConfig,
    HistoryEntry,
    fleet_ready_for_3x,
    migration_attributes,
    parse_client_version,
    publishes_worker_metrics,
    resolve,
)
from kcl_daemon.core.leader.decider import Decider
from kcl_daemon.core.leader.fallback import FallbackConfig
from kcl_daemon.core.leader.lease_count import LeaseCountDecider
from kcl_daemon.core.leader.table_migration import COMPLETE_BAKE_DEFAULT_S, INIT_BAKE_S, LayoutConflict
from kcl_daemon.core.leader.variance import VarianceDecider
from kcl_daemon.core.leader.worker_metrics import java_workers_without_cpu
from kcl_daemon.errors import ConfigError, KclError, LeaseConflict
from kcl_daemon.leader.assignment import AssignmentLoop
from kcl_daemon.leader.assignment_config import AssignmentConfig, RunReport
from kcl_daemon.leader.cpu import CpuSampler, default_reading
from kcl_daemon.leader.discovery import LeaseDiscovery
from kcl_daemon.leader.election import LeaderElection
from kcl_daemon.leader.fallback import FallbackTaker
from kcl_daemon.leader.handoff import HandoffWatcher
from kcl_daemon.leader.hooks import WorkerHooks
from kcl_daemon.leader.layout_watch import LayoutWatch, LayoutWatchConfig
from kcl_daemon.leader.ports import HeartbeatSource, LeaderTable
from kcl_daemon.leader.table_migration import MigrationConfig, TableMigrationDriver
from kcl_daemon.leader.tables import FleetMetrics, MetricsWriter, Tables
from kcl_daemon.leader.throughput import ThroughputTracker
from kcl_daemon.leader.worker_metrics import WorkerMetricsConfig, WorkerMetricsPublisher
from kcl_daemon.retry import STARTUP_ITEM

logger = logging.getLogger(__name__)
T = TypeVar("T")

STRATEGIES = ("COOPERATIVE", "VARIANCE", "LEASE_COUNT_BASED")
MIGRATION_ENTITY_TYPE = "CLIENT_VERSION_MIGRATION"


def make_decider(strategy: str, balancing_frequency: int = 3) -> Decider:
    """The decider of a ``leaseAssignmentStrategy`` value (one line per strategy)."""
    deciders: dict[str, Callable[[], Decider]] = {
        "COOPERATIVE": CooperativeAssignor,
        # cast: the frozen dataclass's read-only ``name`` satisfies the protocol at run time
        "VARIANCE": lambda: cast(Decider, VarianceDecider(balancing_frequency=balancing_frequency)),
        "LEASE_COUNT_BASED": LeaseCountDecider,
    }
    if strategy not in deciders:
        raise ValueError(f"unknown leaseAssignmentStrategy {strategy!r}; one of {', '.join(deciders)}")
    return deciders[strategy]()


@dataclass(frozen=True, slots=True)
class LeaderModeConfig:
    worker_id: str
    client_version: ClientVersionConfig = ClientVersionConfig.V3X
    strategy: str = "COOPERATIVE"
    assignment: AssignmentConfig = field(default_factory=lambda: AssignmentConfig(20.0, 10.0))
    metrics: WorkerMetricsConfig = field(default_factory=lambda: WorkerMetricsConfig("?"))
    discovery_s: float = 9.975
    lock_duration_s: float = 10.0
    #: None: a quarter of the lock duration
    lock_heartbeat_s: float | None = None
    handoff_timeout_s: float = 30.0
    migration_poll_s: float = 60.0
    balancing_frequency: int = 3
    #: on a graceful stop, keep this worker's leases for it this long (0: withdraw, let them go)
    restart_grace_s: float = 0.0
    #: the KCL 3.5 table migration (contract §9.2)
    migrate_all: bool = False
    complete_bake_s: float = COMPLETE_BAKE_DEFAULT_S
    init_bake_s: float = INIT_BAKE_S
    #: how often every worker looks for live Java workers without CPU (in reporter periods)
    fleet_check_periods: int = 10
    #: ``leaseRenewal = PER_WORKER``: the leader judges expiry through the owners' heartbeats
    per_worker: bool = False


class LeaderMode:
    def __init__(
        self,
        config: LeaderModeConfig,
        table: LeaderTable,
        tables: Tables,  # the coordinator-state and worker-metrics places, following the table migration
        clock: Clock,
        *,
        wall: Callable[[], float] = time.time,
        cpu: CpuSampler | None = None,
    ) -> None:
        self.config = config
        self.table = table
        self.tables = tables
        self.fleet_metrics = FleetMetrics(tables)
        self.version: ClientVersion | None = None
        self.algorithm: Algorithm | None = None
        self.election: LeaderElection | None = None
        self.assignment: AssignmentLoop | None = None
        self.discovery: LeaseDiscovery | None = None
        self.handoff: HandoffWatcher | None = None
        self.publisher: WorkerMetricsPublisher | None = None
        self._clock = clock
        self._wall = wall
        self._cpu = cpu or CpuSampler(default_reading, clock.monotonic)
        self._pool = ThreadPoolExecutor(2, thread_name_prefix="lease-3x")
        self.migration = TableMigrationDriver(
            tables,
            self.fleet_metrics,
            MigrationConfig(
                config.worker_id,
                config.migrate_all,
                config.complete_bake_s,
                config.init_bake_s,
                config.metrics.report_s,
                poll_s=min(config.metrics.report_s, 30.0),
            ),
            clock,
            self._pool,
            wall=wall,
        )
        self._worker: WorkerHooks | None = None
        self.layout_watch: LayoutWatch | None = None
        self._algorithm_loops: list[asyncio.Task[None]] = []
        self._metrics_loop: asyncio.Task[None] | None = None

    async def _call(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    # -- client version ------------------------------------------------------------------------

    async def _read_version(self) -> tuple[ClientVersion | None, dict[str, object] | None]:
        item = await self._call(functools.partial(self.tables.read, MIGRATION_KEY))
        stored = None if item is None else item.get("cv")  # a str; anything else is refused as unknown
        return parse_client_version(cast("str | None", stored)), item

    async def _startup(self, fn: Callable[[], Awaitable[T]]) -> T:
        """``fn()`` under the ``STARTUP_ITEM`` policy: a throttle or a timeout at start-up is waited out."""
        retrying = STARTUP_ITEM.async_retrying(sleep=self._clock.sleep, monotonic=self._clock.monotonic)
        async for attempt in retrying:
            with attempt:
                return await fn()
        raise AssertionError("unreachable: the retry policy re-raises the last error")  # pragma: no cover

    async def start_tables(self) -> None:
        """The table layout and migration status at start-up (a layout conflict stops the worker)."""
        if self.tables.lease_owners is None and self.table is not None:
            self.tables.lease_owners = lambda: [
                lease.lease_owner for lease in self.table.list_leases().leases
            ]
        try:
            await self._call(self.tables.start)
        except LayoutConflict as exc:
            raise ConfigError([str(exc)]) from None
        except ValueError as exc:  # an unreadable TableMigration3.5 item
            raise KclError(f"cannot tell the table-migration status: {exc}") from None

    async def resolve_version(self) -> ClientVersion:
        """Read ``Migration3.0``, resolve it against the config, write what Java would write.

        Every call is retried (``STARTUP_ITEM``); a write whose outcome is unknown is settled by reading
        again: if it was applied, the read shows the version just written and nothing is left to do."""
        unknown_writes = 0
        for _ in range(3 + STARTUP_ITEM.max_attempts):
            stored, item = await self._startup(self._read_version)
            resolution = resolve(self.config.client_version, stored)
            if resolution.write is None:
                logger.info("client version %s: %s", resolution.version.value, resolution.reason)
                return resolution.version
            earlier = (item or {}).get("h", [])
            history = [
                _history_entry(h)
                for h in (earlier if isinstance(earlier, list) else [])
                if isinstance(h, dict)
            ]
            if item is not None:
                history.insert(0, _history_entry(item))
            attrs = migration_attributes(
                resolution.write, self.config.worker_id, int(self._wall() * 1000), history
            )
            store = await self._call(self.tables.write_store)
            try:
                if resolution.expected is None:
                    put = functools.partial(
                        store.put,
                        MIGRATION_KEY,
                        attrs,
                        require_absent=True,
                        entity_type=MIGRATION_ENTITY_TYPE,
                    )
                else:
                    put = functools.partial(
                        store.put,
                        MIGRATION_KEY,
                        attrs,
                        require_equal={"cv": resolution.expected.value},
                        entity_type=MIGRATION_ENTITY_TYPE,
                    )
                await self._call(put)
            except LeaseConflict:
                continue  # another worker wrote first (or our own earlier attempt did): read again
            except KclError as exc:
                unknown_writes += 1
                if not exc.retriable or unknown_writes >= STARTUP_ITEM.max_attempts:
                    raise
                logger.warning("writing Migration3.0 failed, reading it again: %s", exc)
                await self._clock.sleep(min(STARTUP_ITEM.initial_backoff_s * 2**unknown_writes, 5.0))
                continue
            logger.info("client version %s written: %s", resolution.write.value, resolution.reason)
            return resolution.write
        raise KclError("Migration3.0 kept changing while this worker resolved its client version")

    # -- start / stop --------------------------------------------------------------------------

    async def start(self, worker: WorkerHooks) -> None:
        self._worker = worker
        self._throughput = ThroughputTracker(worker.bytes_delivered, self._clock.monotonic)
        await self.start_tables()
        version = await self.resolve_version()
        await self._switch(version)
        worker.add_loop("table-migration", self.migration.follow)
        self.layout_watch = LayoutWatch(
            self.tables,
            self.fleet_metrics,
            LayoutWatchConfig(
                self.config.worker_id, self.config.migration_poll_s, self.config.metrics.report_s
            ),
            self._clock,
            self._pool,
            wall=self._wall,
            count=worker.coordinator.observer.incompatible_layout_workers,
        )
        worker.add_loop("layout-check", self.layout_watch.run)
        worker.add_loop("client-version", self._watch_version)
        worker.add_loop("migration-readiness", self._watch_readiness)

    async def _switch(self, version: ClientVersion) -> None:
        worker = self._worker
        assert worker is not None
        self.version = version
        algorithm = (
            Algorithm.LEADER
            if version in (ClientVersion.V3X, ClientVersion.V3X_WITH_ROLLBACK)
            else Algorithm.TAKER
        )
        # throughputKBps with renewals and the metrics item: 3.x and the 2.x-compatible upgrade only
        self.table.throughput_source = (
            self._throughput.on_renew if publishes_worker_metrics(version) else None
        )
        if publishes_worker_metrics(version) and self._metrics_loop is None:
            await self._first_heartbeat(worker)
            self.publisher = WorkerMetricsPublisher(
                MetricsWriter(self.tables),
                self.config.metrics,
                self._clock,
                self._cpu,
                self._pool,
                wall=self._wall,
            )
            if not self.config.metrics.disabled:
                await self._check_fleet_cpu()  # before the first report
                worker.add_loop("fleet-cpu-check", self._watch_fleet_cpu)
            self._metrics_loop = worker.add_loop("worker-metrics", self.publisher.run)
        if algorithm is self.algorithm:
            return
        for task in self._algorithm_loops:
            task.cancel()
        self._algorithm_loops.clear()
        if self.election is not None:
            await self.election.release("switching to the 2.x taker")
        self.algorithm = algorithm
        logger.info("worker %s runs the %s (%s)", self.config.worker_id, algorithm.value, version.value)
        if algorithm is Algorithm.TAKER:
            self._algorithm_loops.append(worker.add_loop("lease-taker", worker.coordinator.run_taker))
            return
        cfg = self.config
        self.election = LeaderElection(
            self.tables.lock_store(),
            cfg.worker_id,
            self._clock,
            self._pool,
            duration_s=cfg.lock_duration_s,
            heartbeat_s=cfg.lock_heartbeat_s,
            locate=self.tables.lock_store,
            confirm=self.migration.confirm,
        )
        self.migration.completing = self.election.suspend
        self.assignment = AssignmentLoop(
            self.table,
            self.fleet_metrics,
            self.election,
            make_decider(cfg.strategy, cfg.balancing_frequency),
            cfg.assignment,
            self._clock,
            self._pool,
            wall=self._wall,
            # the lease table object reads the heartbeat place (kcl_daemon.aws.lease_table)
            heartbeats=cast(HeartbeatSource, self.table) if cfg.per_worker else None,
        )
        self.assignment.observer = worker.coordinator.observer
        coordinator = worker.coordinator
        self.assignment.fallback = FallbackTaker(
            cfg.worker_id,
            FallbackConfig.derive(
                cfg.assignment.failover_s,
                cfg.assignment.interval_s,
                cfg.assignment.expiry_s,
                cfg.assignment.decider.max_leases_for_worker,
            ),
            self.fleet_metrics,
            self.assignment.worker_views,
            lambda planned: coordinator.take_planned(planned),
            lambda: len(coordinator.held),
            self._clock,
            self._pool,
            wall=self._wall,
        )
        self.assignment.after_run = self._migration_step
        if coordinator.renewal is not None:
            # per worker: this worker's scans, leader's or follower's, are how it learns of foreign signs
            # and of leases lost or marked for a hand-off, so a follower watches every renewal period
            self.assignment.observe_fleet = coordinator.observe_fleet
            watch = self.assignment.fallback
            watch.watch_s = min(watch.watch_s, coordinator.keeper.timings.renew_every_s)
        self.discovery = LeaseDiscovery(
            self.table, worker.coordinator, self._clock, self._pool, interval_s=cfg.discovery_s
        )
        discovery = self.discovery

        def wake_own_discovery(receivers: set[str]) -> None:
            """The leader gave itself leases: adopt them now, not at the next discovery run (up to half
            an assignment interval later: 10 s at the defaults, all of it start-up time)."""
            if cfg.worker_id in receivers:
                discovery.wake.set()

        self.assignment.on_assigned = wake_own_discovery
        self.assignment.adopt_own = worker.coordinator.adopt_written
        self.handoff = HandoffWatcher(
            self.table,
            worker.coordinator,
            worker.stop_shard,
            self._clock,
            self._pool,
            timeout_s=cfg.handoff_timeout_s,
        )
        self._algorithm_loops += [
            worker.add_loop("leader-election", self.election.run),
            worker.add_loop("lease-assignment", self.assignment.run),
            worker.add_loop("lease-discovery", self.discovery.run),
            worker.add_loop("lease-handoff", self.handoff.run),
        ]

    async def _first_heartbeat(self, worker: WorkerHooks) -> None:
        """Per-worker renewal: this worker's heartbeat before its first metrics report, which makes it
        assignable: a lease assigned to a worker without a heartbeat would be a foreign sign."""
        renewal = worker.coordinator.renewal
        if renewal is None:
            return
        give_up_at = self._clock.monotonic() + renewal.failover_s
        while not renewal.ready() and not await self._call(renewal.beat_now):
            if self._clock.monotonic() >= give_up_at:  # the others will see a report without one
                logger.warning(
                    "worker %s: no heartbeat confirmed in %.1fs; reporting metrics anyway",
                    self.config.worker_id,
                    renewal.failover_s,
                )
                return
            await self._clock.sleep(min(renewal.period_s, 1.0))

    async def _migration_step(self, report: RunReport) -> None:
        await self.migration.step(report.live_owners)

    async def _check_fleet_cpu(self) -> None:
        try:
            entries, _ = await self._call(self.fleet_metrics.scan)
        except KclError as exc:
            logger.warning("reading the fleet's worker metrics failed: %s", exc)
            return
        java = java_workers_without_cpu(entries, self._wall(), self.config.metrics.report_s)
        if self.publisher is not None:
            self.publisher.align_with_fleet(tuple(w for w in java if w != self.config.worker_id))

    async def _watch_fleet_cpu(self) -> None:
        while True:
            await self._clock.sleep(self.config.metrics.report_s * self.config.fleet_check_periods)
            await self._check_fleet_cpu()

    async def _watch_version(self) -> None:
        while True:
            await self._clock.sleep(self.config.migration_poll_s)
            try:
                stored, _ = await self._read_version()
            except (KclError, ValueError) as exc:
                logger.warning("reading Migration3.0 failed: %s", exc)
                continue
            if stored is not None and stored is not self.version:
                resolved = resolve(self.config.client_version, stored)
                logger.warning("Migration3.0 changed to %s: switching", stored.value)
                await self._switch(resolved.version if resolved.write is None else stored)

    async def _watch_readiness(self) -> None:
        """While ``UPGRADE_FROM_2X``: flip the fleet to ``3X_WITH_ROLLBACK`` once it has looked ready for
        10 minutes (Java's readiness monitor); the write is conditional, so the first worker wins."""
        ready_since: float | None = None
        while True:
            await self._clock.sleep(self.config.migration_poll_s)
            if self.version is not ClientVersion.UPGRADE_FROM_2X:
                ready_since = None
                continue
            try:
                ready, why = await self._call(self._fleet_ready)
            except (KclError, ValueError) as exc:
                logger.warning("migration readiness check failed: %s", exc)
                ready_since = None
                continue
            now = self._clock.monotonic()
            if not ready:
                if ready_since is not None:
                    logger.info("fleet no longer ready for 3.x: %s", why)
                ready_since = None
                continue
            ready_since = now if ready_since is None else ready_since
            if now - ready_since >= READY_STABLE_S:
                await self._flip_to_3x(why)

    async def _flip_to_3x(self, why: str) -> None:
        stored, item = await self._read_version()
        if stored is ClientVersion.UPGRADE_FROM_2X and item is not None:
            previous = _history_entry(item)
            attrs = migration_attributes(
                ClientVersion.V3X_WITH_ROLLBACK, self.config.worker_id, int(self._wall() * 1000), [previous]
            )
            store = await self._call(self.tables.write_store)
            put = functools.partial(
                store.put,
                MIGRATION_KEY,
                attrs,
                require_equal={"cv": ClientVersion.UPGRADE_FROM_2X.value},
                entity_type=MIGRATION_ENTITY_TYPE,
            )
            try:
                await self._call(put)
                logger.info(
                    "fleet ready for 3.x (%s): Migration3.0 is now CLIENT_VERSION_3X_WITH_ROLLBACK", why
                )
            except LeaseConflict:
                logger.info("Migration3.0 was changed by another worker meanwhile")
        stored, _ = await self._read_version()
        if stored is not None and stored is not self.version:
            await self._switch(stored)

    def _fleet_ready(self) -> tuple[bool, str]:
        owners = [lease.lease_owner for lease in self.table.list_leases().leases]
        entries, _ = self.fleet_metrics.scan()
        updated = {e.worker_id: e.last_update_s for e in entries if e.last_update_s is not None}
        return fleet_ready_for_3x(
            self.table.gsi_active(), owners, updated, self._wall(), self.config.metrics.report_s
        )

    async def stop(self) -> None:
        """Graceful stop: delete our metrics (no more assignments to us), give up the leader lock.

        With a restart grace (either lease mode): tell the scheduler to keep the leases until the grace
        ends (checkpointed, then each marked as waiting for this worker as it lets go:
        :mod:`kcl_daemon.core.leases.restart_grace`), so a restart within the grace moves nothing; in 3.x mode
        also publish RESTARTING instead of deleting the metrics item, so the leader assigns us nothing
        meanwhile."""
        for task in self._algorithm_loops:
            task.cancel()
        grace = self.config.restart_grace_s
        if grace > 0 and self._worker is not None:
            self._worker.keep_leases_until = self._wall() + grace
        if self.publisher is not None:
            kept = False
            if grace > 0 and self.algorithm is Algorithm.LEADER:
                kept = await self.publisher.declare_restart(grace)
            if not kept:
                await self.publisher.withdraw()
        if self.election is not None:
            await self.election.release("worker shutting down")


def _history_entry(item: Mapping[str, object]) -> HistoryEntry:
    """One client-version history entry from the ``Migration3.0`` item (or an entry of its history)."""
    mts = item.get("mts", 0)
    return HistoryEntry(
        str(item.get("cv")), str(item.get("mb")), int(mts) if isinstance(mts, int | float | str) else 0
    )
