"""The worker's scheduler: one shard task per held lease, plus the lease, shard-sync and cleanup loops.

Start-up: create the lease table if missing, run one shard sync (so a cold start does not wait a
whole taker interval for its first leases), then start the renewer, the taker, the periodic sync and
the cleanup loops. The coordinator's listeners start a :class:`ShardTask` for every lease taken and
signal ``leaseLost`` to the task of every lease lost. A task that stops while its lease is still held
(a read that kept failing, say) is started again after ``task_backoff_s``, from the stored checkpoint.

Every background loop runs under :func:`kcl_daemon.supervise.supervise`: an unexpected exception is
logged with its traceback and the loop restarts with backoff; a loop that keeps failing, or a lease
table that stays missing (:class:`LeaseTableGone`), sets :attr:`Scheduler.failed` with the reason, and
the caller stops the worker and exits non-zero.

Graceful shutdown (:meth:`Scheduler.shutdown`): stop taking leases, ask every child to shut down
(``shutdownRequested``: the processor checkpoints), wait at most ``shutdown_grace_s``, stop what is
still running, then release every held lease so the other workers take them at once, without waiting
for the failover time, and every lease the table still names this worker on without its holding it
(assigned by a leader and not adopted yet, a take that landed as the taker stopped), in both lease modes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeVar

from kcl_daemon.blocking import BlockingPool
from kcl_daemon.clock import Clock
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.lifecycle.restart_policy import Park
from kcl_daemon.core.lifecycle.states import ShardState, ShutdownReason
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.supervise import WORKER_LOOP, LoopPolicy
from kcl_daemon.core.worker.health import Phase
from kcl_daemon.errors import LeaseTableGone
from kcl_daemon.leases.coordinator import CoordinatorConfig, LeaseCoordinator
from kcl_daemon.leases.keeper import KeeperTable
from kcl_daemon.lifecycle.ports import ChildLauncher
from kcl_daemon.lifecycle.shard_consumer import ConsumerSettings
from kcl_daemon.lifecycle.shard_failures import TaskFailures, decide_after_failure, is_retriable
from kcl_daemon.lifecycle.shard_task import ShardTask, ShardTaskContext
from kcl_daemon.metrics.observer import no_shard_observer
from kcl_daemon.metrics.registry import DaemonMetrics
from kcl_daemon.retrieval.source import ShardRecordSource
from kcl_daemon.shards.cleanup import ChildShardLookup, LeaseCleaner
from kcl_daemon.shards.sync import ShardLister, ShardSyncConfig, ShardSyncer
from kcl_daemon.supervise import DEFAULT_BUSY_BUDGET_S, LoopBoard, LoopFactory, supervise
from kcl_daemon.worker.ports import SchedulerTable, Syncer

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: Lease-table reads, takes and creates of the taker, the shard tasks and cleanup, and every checkpoint.
#: Checkpoints grow with the work (shards x batches per second x the write's latency): 256 shards each
#: checkpointing once a second at 20 ms a write keep 5 threads busy, which a pool of 4 could not do (the
#: children waited on their checkpoints). A pool starts a thread only when no idle one can take the call
#: (kcl_daemon.blocking), so a large bound costs nothing until the work needs it.
IO_THREADS = 32
#: ListShards for the periodic shard sync.
SYNC_THREADS = 1
#: between the two looks for leases still naming this worker at a graceful stop
RELEASE_SWEEP_GAP_S = 0.5


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    coordinator: CoordinatorConfig
    shard_sync: ShardSyncConfig
    consumer: ConsumerSettings
    cleanup_interval_s: float = 60.0
    delete_completed_leases: bool = True
    parent_poll_s: float = 10.0
    task_backoff_s: float = 0.5
    shutdown_grace_s: float = 30.0
    max_lease_renewal_threads: int = 20
    status_interval_s: float = 30.0
    loop_policy: LoopPolicy = WORKER_LOOP

    @property
    def threads_calling_aws(self) -> int:
        """The scheduler's own threads that call AWS (the record readers come on top): the lease
        keeper's two pools (renewals, checkpoints) of ``maxLeaseRenewalThreads`` each, the lease I/O and
        the shard sync."""
        return 2 * self.max_lease_renewal_threads + IO_THREADS + SYNC_THREADS


@dataclass(slots=True)
class WorkerStatus:
    """A snapshot for the progress line and the logs."""

    held: int = 0
    processing: int = 0
    waiting_on_parents: int = 0
    records_delivered: int = 0
    checkpoints_written: int = 0
    child_restarts: int = 0
    parked: list[str] = field(default_factory=list)
    shard_failures: int = 0
    stalled: list[str] = field(default_factory=list)

    def line(self) -> str:
        parked = f", parked: {' '.join(self.parked)}" if self.parked else ""
        parked += f", stalled: {' '.join(self.stalled)}" if self.stalled else ""
        failures = f", {self.shard_failures} shard failures" if self.shard_failures else ""
        return (
            f"{self.held} lease(s), {self.processing} shard(s) processing, {self.waiting_on_parents} waiting "
            f"on parents; {self.records_delivered} records delivered, {self.checkpoints_written} "
            f"checkpoints, {self.child_restarts} child restarts{failures}{parked}"
        )


class LeaseMode(Protocol):
    """Starts the loops that assign leases (instead of the 2.x taker) and withdraws on shutdown."""

    async def start(self, scheduler: Scheduler) -> None: ...

    async def stop(self) -> None: ...


class Scheduler:
    def __init__(
        self,
        config: SchedulerConfig,
        table: SchedulerTable,  # DynamoLeaseTable or a fake with the same methods
        shard_lister: ShardLister,  # Kinesis
        make_source: Callable[[Shard], ShardRecordSource],
        launch_child: ChildLauncher,
        clock: Clock,
        *,
        child_shard_lookup: ChildShardLookup | None = None,
        metrics: DaemonMetrics | None = None,
        lease_mode: LeaseMode | None = None,
        syncer: Syncer | None = None,  # a MultiStreamSyncer (several streams); None: one ShardSyncer
        make_stream_source: Callable[[Shard, str], ShardRecordSource] | None = None,
        keeper_table: KeeperTable | None = None,  # the lease keeper's table (its own client); None: ``table``
    ) -> None:
        self.config = config
        #: who assigns leases: None = the 2.x taker; else the KCL 3.x-aware mode (leases.leader_mode)
        self.lease_mode = lease_mode
        #: set by the lease mode's stop when a restart grace keeps the leases for this worker's return
        #: set on a graceful stop with a restart grace: the leases wait for this worker until then (epoch s)
        self.keep_leases_until: float | None = None
        self._handing_off: set[str] = set()
        self._clock = clock
        self._table = table
        self._io_pool = BlockingPool(IO_THREADS, thread_name_prefix="lease-io")
        self.coordinator = LeaseCoordinator(
            table,
            config.coordinator,
            clock,
            renew_pool=BlockingPool(config.max_lease_renewal_threads, thread_name_prefix="lease-renew"),
            checkpoint_pool=BlockingPool(
                config.max_lease_renewal_threads, thread_name_prefix="lease-checkpoint"
            ),
            io_pool=self._io_pool,
            keeper_table=keeper_table,
        )
        self.syncer = syncer or ShardSyncer(
            shard_lister,
            table,
            config.shard_sync,
            clock,
            pool=ThreadPoolExecutor(SYNC_THREADS, thread_name_prefix="shard-sync"),
        )
        self.cleaner = LeaseCleaner(
            table,
            clock,
            interval_s=config.cleanup_interval_s,
            delete_completed=config.delete_completed_leases,
            child_shard_lookup=child_shard_lookup,
            pool=self._io_pool,
            before_delete=self.coordinator.forget_deleted,
        )
        self._context = ShardTaskContext(
            coordinator=self.coordinator,
            table=table,
            io_pool=self._io_pool,
            make_source=make_source,
            make_stream_source=make_stream_source,
            launch_child=launch_child,
            consumer_settings=config.consumer,
            clock=clock,
            enqueue_cleanup=self.cleaner.enqueue,
            parent_poll_s=config.parent_poll_s,
            task_backoff_s=config.task_backoff_s,
            shard_observer=no_shard_observer if metrics is None else metrics.shard,
        )
        if metrics is not None:
            self.coordinator.observer = self.syncer.observer = metrics.worker
            metrics.set_leases_held(lambda: len(self.coordinator.held))
        self.tasks: dict[str, ShardTask] = {}
        self._runners: dict[str, asyncio.Task[None]] = {}
        self._loops: list[asyncio.Task[None]] = []
        self._renewer: asyncio.Task[None] | None = None
        self._stopping = False
        self._totals = WorkerStatus()
        #: Shards parked after failing too often (their lease is kept): key -> (why, wake-up on loss/stop).
        self.parked: dict[str, tuple[str, asyncio.Event]] = {}
        #: Set when a background loop failed for good; ``failure`` says which and why.
        self.failed = asyncio.Event()
        self.failure: str | None = None
        #: For the health endpoints: where the worker is in its life, and its supervised loops.
        self.phase = Phase.STARTING
        self.loop_board = LoopBoard()
        self.coordinator.listeners.taken.append(self._on_taken)
        self.coordinator.listeners.lost.append(self._on_lost)

    # -- start ---------------------------------------------------------------------------------------

    async def _call(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._io_pool, fn)

    def _on_fatal(self, name: str, why: str) -> None:
        if self.failure is None:
            self.failure = f"{name}: {why}"
        self.failed.set()

    def _supervised(
        self, name: str, factory: LoopFactory, budget_s: float = DEFAULT_BUSY_BUDGET_S
    ) -> asyncio.Task[None]:
        activity = self.loop_board.add(name, budget_s)
        coro = supervise(
            name,
            factory,
            self.config.loop_policy,
            clock=self._clock,
            on_fatal=self._on_fatal,
            fatal=(LeaseTableGone,),
            activity=activity,
        )
        task = asyncio.create_task(coro, name=name)
        # A loop cancelled on purpose (shutdown, a lease-mode switch) is no longer the liveness check's.
        task.add_done_callback(lambda done: self.loop_board.remove(activity) if done.cancelled() else None)
        return task

    def _loop(self, name: str, factory: LoopFactory) -> asyncio.Task[None]:
        task = self._supervised(name, factory)
        self._loops.append(task)
        return task

    async def start(self) -> None:
        """Prepare the table, sync once, and start the background loops (returns at once after that)."""
        if await self._call(self._table.create_table_if_missing):
            logger.info("created lease table %s", getattr(self._table, "table_name", "?"))
        try:
            await self.syncer.sync_once()
        except Exception as exc:  # noqa: BLE001 - logged; the periodic sync retries
            logger.warning("initial shard sync failed, the periodic sync retries: %s", exc)
        # The renewer's own rounds are short (it starts one renewal task per lease and ticks every
        # 0.25 s); the leases themselves are watched through their local expiry (core.worker.health).
        self._renewer = self._supervised(
            "lease-renewer",
            self.coordinator.run_renewer,
            budget_s=max(self.config.coordinator.failover_s, 5.0),
        )
        if self.lease_mode is None:
            self._loop("lease-taker", self.coordinator.run_taker)
        else:
            await self.lease_mode.start(self)
        sync_delay = self.config.shard_sync.interval_s
        self._loop("shard-sync", lambda: self.syncer.run(first_delay_s=sync_delay))
        self._loop("lease-cleanup", self.cleaner.run)
        self._loop("status", self._report_status)
        self.phase = Phase.RUNNING

    @property
    def may_hold_leases(self) -> bool:
        """Start-up got as far as renewing (and, in leader mode, perhaps being assigned) leases."""
        return self._renewer is not None

    @property
    def table_name(self) -> str:
        return str(getattr(self._table, "table_name", "the lease table"))

    def add_loop(self, name: str, factory: LoopFactory) -> asyncio.Task[None]:
        """Start one more supervised background loop (cancelled on shutdown)."""
        return self._loop(name, factory)

    def stop_shard(self, lease_key: str) -> asyncio.Task[None] | None:
        """Hand-off: ask the shard's task to shut down and not to start again; returns its runner."""
        self._handing_off.add(lease_key)
        if lease_key in self.parked:  # a parked shard has nothing to finish: hand it off now
            self.parked[lease_key][1].set()
        task = self.tasks.get(lease_key)
        if task is not None:
            task.request_shutdown()
        return self._runners.get(lease_key)

    @property
    def handing_off(self) -> frozenset[str]:
        """The leases whose shard is being handed to another worker (stop_shard was called)."""
        return frozenset(self._handing_off)

    def bytes_delivered(self, lease_key: str) -> int | None:
        task = self.tasks.get(lease_key)
        return None if task is None or task.consumer is None else task.consumer.stats.bytes_delivered

    # -- leases come and go ----------------------------------------------------------------------

    def _on_taken(self, lease: Lease) -> None:
        self._handing_off.discard(lease.lease_key)
        if self._stopping or lease.lease_key in self._runners:
            return
        self._runners[lease.lease_key] = asyncio.create_task(
            self._run_shard(lease), name=f"shard-{lease.lease_key}"
        )

    def _on_lost(self, lease_key: str) -> None:
        if lease_key in self.parked:
            self.parked[lease_key][1].set()
        task = self.tasks.get(lease_key)
        if task is not None:
            task.lease_lost()

    async def _run_shard(self, lease: Lease) -> None:
        key = lease.lease_key
        failures = TaskFailures()
        try:
            while True:
                task = ShardTask(lease, self._context)
                self.tasks[key] = task
                try:
                    outcome = await task.run()
                except Exception as exc:  # a bug must not end the shard for good: log it and start again
                    logger.exception("shard %s failed unexpectedly", lease.shard_id)
                    task.failure, outcome = exc, None
                self.tasks.pop(key, None)  # counted once, below, not also as a live task
                self._count(task)
                if self._stopping or key not in self.coordinator.held or key in self._handing_off:
                    return
                if task.failure is not None:
                    failures = failures.after(task.failure)
                    self._totals.shard_failures += 1
                    if not await self._back_off_or_park(lease, failures, is_retriable(task.failure)):
                        return
                    fresh = self.coordinator.held_lease(key)
                    if fresh is None or self._stopping:
                        return
                    lease = fresh
                    continue
                failures = TaskFailures()
                if outcome is not None and outcome.reason is ShutdownReason.LEASE_LOST:
                    # lost, yet held again: the lease was re-taken (or re-assigned to us) while this
                    # shard was stopping, and _on_taken found this runner still busy. Start afresh.
                    fresh = self.coordinator.held_lease(key)
                    if fresh is None or self._stopping:
                        return
                    logger.info(
                        "shard %s: lease held again after it was lost; starting again", lease.shard_id
                    )
                    lease = fresh
                    continue
                if outcome is not None and outcome.reason is not None:
                    if outcome.reason is ShutdownReason.SHARD_END:
                        logger.info("shard %s finished; its lease is kept until cleanup", lease.shard_id)
                    return
                if lease.is_shard_end:
                    return
                logger.warning(
                    "shard %s stopped while its lease is held; starting again in %.1fs",
                    lease.shard_id,
                    self.config.task_backoff_s,
                )
                await self._clock.sleep(self.config.task_backoff_s)
                fresh = self.coordinator.held_lease(key)
                if fresh is None or self._stopping:
                    return
                lease = fresh
        finally:
            self.tasks.pop(key, None)
            self._runners.pop(key, None)

    async def _back_off_or_park(self, lease: Lease, failures: TaskFailures, retriable: bool) -> bool:
        """After a failed task: wait the backoff and return True, or park the shard until its lease is
        lost or the worker stops and return False (see ``kcl_daemon.lifecycle.shard_failures``)."""
        restart = self.config.consumer.restart
        policy = replace(restart, initial_backoff_s=self.config.task_backoff_s)
        decision = decide_after_failure(policy, failures, retriable)
        if isinstance(decision, Park):
            why = (
                f"it failed {decision.consecutive_failures} times in a row (childMaxConsecutiveFailures); "
                f"last failure: {failures.last}"
            )
            logger.error("shard %s parked, its lease is kept: %s", lease.shard_id, why)
            wake = asyncio.Event()
            self.parked[lease.lease_key] = (why, wake)
            try:
                if not self._stopping:
                    await wake.wait()
            finally:
                self.parked.pop(lease.lease_key, None)
            return False
        logger.warning(
            "shard %s failed (%d in a row%s): %s; starting again in %.1fs",
            lease.shard_id,
            decision.consecutive_failures,
            "" if retriable else f" of at most {policy.max_consecutive_failures}",
            failures.last,
            decision.delay_s,
        )
        await self._clock.sleep(decision.delay_s)
        return True

    def _count(self, task: ShardTask) -> None:
        if task.consumer is not None:
            stats = task.consumer.stats
            self._totals.records_delivered += stats.records_delivered
            self._totals.checkpoints_written += stats.checkpoints_written
            self._totals.child_restarts += max(stats.child_starts - 1, 0)

    # -- status ----------------------------------------------------------------------------------

    def status(self) -> WorkerStatus:
        status = WorkerStatus(
            held=len(self.coordinator.held),
            records_delivered=self._totals.records_delivered,
            checkpoints_written=self._totals.checkpoints_written,
            child_restarts=self._totals.child_restarts,
            shard_failures=self._totals.shard_failures,
            parked=sorted(self.parked),
        )
        for key, task in self.tasks.items():
            consumer = task.consumer
            if consumer is None:
                status.waiting_on_parents += bool(task.waiting_on)
                continue
            status.processing += 1
            status.records_delivered += consumer.stats.records_delivered
            status.checkpoints_written += consumer.stats.checkpoints_written
            status.child_restarts += max(consumer.stats.child_starts - 1, 0)
            if consumer.state is ShardState.PARKED:
                status.parked.append(key)
            if consumer.stalled is not None:
                status.stalled.append(key)
        return status

    async def _report_status(self) -> None:
        while True:
            await self._clock.sleep(self.config.status_interval_s)
            logger.info(
                "worker %s: %s; %d asyncio task(s), %d thread(s)",
                self.config.coordinator.worker_id,
                self.status().line(),
                len(asyncio.all_tasks()),
                threading.active_count(),
            )

    # -- stop ------------------------------------------------------------------------------------

    async def shutdown(self) -> None:
        """Graceful shutdown; see the module docstring. Safe to call more than once."""
        if self._stopping:
            return
        self._stopping = True
        self.phase = Phase.STOPPING
        logger.info(
            "shutting down: asking %d shard(s) to finish (grace %.1fs)",
            len(self.tasks),
            self.config.shutdown_grace_s,
        )
        await _cancel(self._loops)
        self._loops.clear()
        if self.lease_mode is not None:
            await self.lease_mode.stop()
        for task in list(self.tasks.values()):
            task.request_shutdown()
        for _why, wake in self.parked.values():
            wake.set()
        runners = list(self._runners.values())
        if runners:
            _done, pending = await asyncio.wait(runners, timeout=self.config.shutdown_grace_s)
            if pending:
                logger.warning(
                    "%d shard(s) did not finish within the grace period; stopping them", len(pending)
                )
                await _cancel(list(pending))
        released = kept = 0
        until = self.keep_leases_until
        if until is not None:  # all at once: each lease is renewed until its own last write
            if self.coordinator.renewal is not None:  # the leases kept name us: so does a heartbeat item
                self.coordinator.renewal.keep_item_on_stop = True
            keep = self.coordinator.keep_for_restart
            kept = sum(await asyncio.gather(*(keep(key, until) for key in list(self.coordinator.held))))
        for key in list(self.coordinator.held):
            released += await self.coordinator.release(key)
        if until is None:
            # what the table names us on without our holding it: leases a leader assigned us that we had
            # not adopted, a take that landed as its loop stopped; once more after a moment for a leader's
            # assignment in flight when our metrics item was withdrawn
            released += await self.coordinator.release_named()
            await self._clock.sleep(RELEASE_SWEEP_GAP_S)
            released += await self.coordinator.release_named()
        if self._renewer is not None:
            await _cancel([self._renewer])
        if until is not None:
            logger.info("shutdown complete: %d lease(s) kept for the restart grace", kept)
        else:
            logger.info("shutdown complete: %d lease(s) released", released)

    async def close(self) -> None:
        """Stop everything at once (no grace, no release): for tests and fatal errors."""
        self._stopping = True
        self.phase = Phase.STOPPING
        await _cancel([*self._loops, *self._runners.values(), *([self._renewer] if self._renewer else [])])


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel ``tasks`` and wait for them; a task that had failed is logged, not raised."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            try:
                await task
            except Exception:
                logger.exception("task %s had failed", task.get_name())
