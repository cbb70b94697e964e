"""The leases this worker holds, and the 2.x taker that takes new ones (contract §4).

The asyncio face of the :class:`~kcl_daemon.leases.keeper.LeaseKeeper`, and the shell around
:func:`kcl_daemon.core.leases.taker.plan_takes`, :class:`LeaseObservations` and
:func:`kcl_daemon.core.leases.reconcile.reconcile`:

* every write of a held lease (renewal, checkpoint, release) is the keeper's: on its own thread, with
  short attempts repeated until the lease's own deadline, unknown outcomes settled by a consistent read
  (:mod:`kcl_daemon.core.leases.keeping`). A lease is lost when the table shows another owner or its item
  cannot be read, or when no write has been confirmed for a whole failover time past its deadline;
  past the deadline and until then, its records are held back (:meth:`LeaseCoordinator.may_deliver`)
  while the writes go on;
* a take or steal is a counter-fenced write reconciled after an unknown outcome or a condition failure
  (``LEASE_IO``); a steal re-reads its lease first
  (see :meth:`~kcl_daemon.leases.taking.Taking._fresh_steal_candidate`) and its shard starts only
  after the victim's next renewal has had time to fail (one renewal period), so the two never deliver
  at once;
* a lease item that cannot be decoded affects that lease only: it is given up with a warning;
* a lease table that stays missing for the failover time raises :class:`LeaseTableGone` from
  ``run_renewer`` (fatal: the worker stops and exits non-zero).

Listeners hear ``lease_taken(lease)`` and ``lease_lost(lease_key)``; lease loss is an event, never an
exception that climbs the stack.

The coordinator is assembled from mixins, one concern each: :mod:`~kcl_daemon.leases.fenced_writes`
(bounded, reconciled writes), :mod:`~kcl_daemon.leases.taking` (the 2.x taker) and
:mod:`~kcl_daemon.leases.graceful_stop` (the last writes of a graceful stop); its settings and plain data
are in :mod:`~kcl_daemon.leases.coordinator_config`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from random import Random
from typing import Any, TypeVar, cast

from kcl_daemon.clock import Clock, SystemClock
from kcl_daemon.core.leases.expiry import CounterObservation, LeaseObservations
from kcl_daemon.core.leases.heartbeat import RenewalMode
from kcl_daemon.core.leases.held_scan import confirmed_keeping_mark
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import ScanResultLike
from kcl_daemon.core.leases.taker import TakePlan
from kcl_daemon.core.leases.timings import KeepTimings, may_deliver
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.errors import KclError, LeaseConflict, LeaseTableGone, LeaseUnreadable
from kcl_daemon.leases.coordinator_config import CoordinatorConfig, HeldLease, LeaseListeners, LeaseTableOps
from kcl_daemon.leases.graceful_stop import GracefulStop
from kcl_daemon.leases.heartbeat import HeartbeatTable, PerWorkerRenewal
from kcl_daemon.leases.keeper import KeeperEvent, KeeperTable, LeaseKeeper
from kcl_daemon.leases.taking import Taking
from kcl_daemon.metrics.observer import NULL_WORKER_OBSERVER, WorkerObserver

__all__ = ["CoordinatorConfig", "HeldLease", "LeaseCoordinator", "LeaseListeners", "LeaseTableOps"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class LeaseCoordinator(Taking, GracefulStop):
    def __init__(
        self,
        table: LeaseTableOps,
        config: CoordinatorConfig,
        clock: Clock,
        *,
        rng: Random | None = None,
        renew_pool: Executor | None = None,
        checkpoint_pool: Executor | None = None,
        io_pool: Executor | None = None,
        keeper_table: KeeperTable | None = None,
        attempt_timeout_s: float | None = None,
        threaded_keeper: bool | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self._wall = wall
        self.held: dict[str, HeldLease] = {}
        self.listeners = LeaseListeners()
        #: Reports takes, losses, renewals and each scan (kcl_daemon.metrics); does nothing by default.
        self.observer: WorkerObserver = NULL_WORKER_OBSERVER
        self.last_plan: TakePlan | None = None
        self.table_missing_since: float | None = None
        self._table = table
        self._clock = clock
        self._rng = rng or Random()  # noqa: S311 - shuffles lease choices; not security
        self._observed = LeaseObservations()
        #: this worker's own confirmed writes not yet folded into ``_observed`` (see ``_observations``)
        self._own_writes: dict[str, CounterObservation] = {}
        self._io_pool = io_pool or ThreadPoolExecutor(2, thread_name_prefix="lease-io")
        self._loop: asyncio.AbstractEventLoop | None = None
        #: stolen leases: no records before this time (monotonic), see take_once
        self._not_before: dict[str, float] = {}
        #: the keeper runs its own thread on the system clock; on a fake clock the caller drives it
        self._threaded = isinstance(clock, SystemClock) if threaded_keeper is None else threaded_keeper
        self.keeper = LeaseKeeper(
            keeper_table or table,
            config.worker_id,
            KeepTimings.for_failover(config.failover_s, attempt_timeout_s=attempt_timeout_s),
            renew_pool or ThreadPoolExecutor(4, thread_name_prefix="lease-renew"),
            checkpoint_pool=checkpoint_pool,
            monotonic=clock.monotonic,
            notify=self._from_keeper,
        )
        #: per-worker renewal (``leaseRenewal = PER_WORKER``), else None: today's per-lease renewals
        self.renewal: PerWorkerRenewal | None = None
        if config.lease_renewal == RenewalMode.PER_WORKER:
            self.renewal = PerWorkerRenewal(
                cast(HeartbeatTable, keeper_table or table),
                self.keeper,
                config.worker_id,
                config.failover_s,
                self.keeper.timings.renew_every_s,
                monotonic=clock.monotonic,
                notice_keep_s=config.timings.steal_notice_keep_s,
            )
        self._effective: LeaseObservations | None = None

    @property
    def _observations(self) -> LeaseObservations:
        """The counters seen (scans) and written (this worker's own writes). A confirmed write is
        recorded as one dict entry and folded into the table when it is read (the taker's passes), not
        one copy of the whole table per checkpoint and renewal: at 256 leases checkpointing every batch
        the copies were a tenth of the checkpoint path's CPU. The same table as recording each in turn."""
        if self._own_writes:
            self._observed = self._observed.record_writes(self._own_writes)
            self._own_writes = {}
        return self._observed

    @_observations.setter
    def _observations(self, table: LeaseObservations) -> None:
        self._observed = table  # writes recorded meanwhile still fold on top: they came later

    def _held(self, lease: Lease, sent_at: float) -> HeldLease:
        return HeldLease(lease, sent_at, self.config.failover_s)

    def check_table(self) -> None:
        """Raise :class:`LeaseTableGone` once the table has been missing for the failover time."""
        # with leases held the keeper's attempts (every renewal period) are the freshest evidence
        since = self.keeper.missing_since if self.held else self.table_missing_since
        if since is not None and self._clock.monotonic() - since >= self.config.failover_s:
            raise LeaseTableGone(
                f"the lease table has been missing for {self._clock.monotonic() - since:.1f}s "
                f"(failover time {self.config.failover_s:.1f}s); it is not recreated, since that would "
                "start every shard again from the initial position"
            )

    # -- what the keeper tells us (on the event loop) ----------------------------------------------

    def _from_keeper(self, event: KeeperEvent) -> None:
        """Called on a keeper or pool thread: hand the event to the event loop."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._on_keeper_event, event)
        except RuntimeError:  # the loop closed meanwhile: nobody is listening any more
            return

    def _on_keeper_event(self, event: KeeperEvent) -> None:
        key = event.lease_key
        if event.kind == "confirmed" and event.lease is not None:
            self.observer.renewed(event.latency_s)
            if key in self.held:
                lease = confirmed_keeping_mark(self.held[key].lease, event.lease)
                self.held[key] = self._held(lease, event.confirmed_at)
                self._own_writes[key] = CounterObservation(event.lease.lease_counter, event.confirmed_at)
        elif event.kind == "lost":
            level = logging.WARNING if event.unreadable else logging.INFO
            self._lose(key, event.reason, level=level)
        elif event.kind == "released":
            self.held.pop(key, None)

    def _lose(self, lease_key: str, why: str, *, level: int = logging.INFO) -> None:
        self.keeper.forget(lease_key)
        if self.held.pop(lease_key, None) is not None:
            self.observer.lease_lost()
            logger.log(level, "lease %s lost: %s", lease_key, why)
            for listener in self.listeners.lost:
                listener(lease_key)

    def _lose_for(self, lease_key: str, exc: LeaseConflict) -> None:
        level = logging.WARNING if isinstance(exc, LeaseUnreadable) else logging.INFO
        self._lose(lease_key, str(exc.args[0]) if exc.args else str(exc), level=level)

    def _hold(self, lease: Lease, sent_at: float, *, validated: bool = True) -> None:
        self._loop = asyncio.get_running_loop()
        self.held[lease.lease_key] = self._held(lease, sent_at)
        self._own_writes[lease.lease_key] = CounterObservation(lease.lease_counter, sent_at)
        self.keeper.hold(lease, sent_at, validated=validated)

    async def _settle(self, future: concurrent.futures.Future[T]) -> T:
        """The keeper's answer. With its thread running, just wait; otherwise (a fake clock) drive it."""
        self._loop = asyncio.get_running_loop()
        while not future.done():
            if self.keeper.running:
                return await asyncio.wrap_future(future)
            wake = self.keeper.tick()
            if future.done():
                break
            if self.keeper.in_flight():
                await asyncio.sleep(0.001)  # real time: an attempt is running on the keeper's pool
            else:
                await self._clock.sleep(max(wake - self._clock.monotonic(), 0.001))
        await asyncio.sleep(0)  # the keeper's events (call_soon_threadsafe) run before we go on
        return future.result()

    # -- held leases -------------------------------------------------------------------------------

    async def renew_once(self) -> None:
        """Renew every held lease at once and wait for each to be confirmed or lost (tests, the fleet
        stepper: in the daemon the keeper renews on its own schedule)."""
        waiters = [self.keeper.renew_now(key) for key in list(self.held)]
        for waiter in waiters:
            await self._settle(waiter)

    def valid_for_s(self, lease_key: str) -> float:
        """Seconds the lease's records may still be delivered (negative: not now)."""
        return self.keeper.deliver_until(lease_key) - self._clock.monotonic()

    def may_deliver(self, lease_key: str, expected_batch_s: float) -> bool:
        """Whether a batch expected to take ``expected_batch_s`` may be sent to the lease's child now:
        not past the lease's deadline, and not before a stolen lease's previous owner has stopped."""
        not_before = self._not_before.get(lease_key)
        if not_before is not None:
            if self._clock.monotonic() < not_before:
                return False
            del self._not_before[lease_key]
        return may_deliver(
            self.keeper.deliver_until(lease_key),
            self._clock.monotonic(),
            expected_batch_s,
            self.config.failover_s,
        )

    async def checkpoint(
        self,
        lease_key: str,
        target: ExtendedSequenceNumber,
        *,
        child_shard_ids: Iterable[str] | None = None,
    ) -> Lease:
        """Write ``target`` with the held lease's counter (the keeper's next write of it).

        Raises :class:`LeaseConflict` (and the lease is lost) if this worker no longer holds it,
        :class:`Throttled` or :class:`TransientNetwork` when it could not be confirmed in time (the
        lease stays held; the write may still apply)."""
        if lease_key not in self.held:
            raise LeaseConflict(f"lease {lease_key} is not held by {self.config.worker_id}")
        written = await self._settle(self.keeper.checkpoint(lease_key, target, child_shard_ids))
        assert written is not None
        if lease_key in self.held and written.lease_counter >= self.held[lease_key].lease.lease_counter:
            self.held[lease_key] = HeldLease(written, self.held[lease_key].renewed_at, self.config.failover_s)
        return written

    async def release(self, lease_key: str) -> bool:
        """Give the lease up (graceful shutdown) so another worker takes it at once; no listener fires."""
        if lease_key not in self.held:
            return False
        try:
            await self._settle(self.keeper.release(lease_key))
        except LeaseConflict as exc:
            logger.info("lease %s not released: %s", lease_key, exc)
            return False
        except KclError as exc:
            logger.warning("releasing lease %s failed; it expires instead: %s", lease_key, exc)
            return False
        finally:
            self.held.pop(lease_key, None)
            self.keeper.forget(lease_key)
        logger.info("lease %s released", lease_key)
        self.observer.lease_handed_off()
        return True

    def forget_deleted(self, lease_key: str) -> bool:
        """This worker's cleanup is about to delete the lease: if it is held here at SHARD_END (its shard
        complete, its processor done), stop keeping it first, so no renewal of the deleted item is
        attempted and the deletion is not taken for a loss. No listener fires. A held lease that is not
        finished (the garbage path: its shard is gone) is left to the keeper, whose loss stops its shard;
        a lease deleted by anyone else while held is lost as before."""
        held = self.held.get(lease_key)
        if held is None or not held.lease.is_shard_end:
            return False
        self.keeper.forget(lease_key)
        del self.held[lease_key]
        logger.info("lease %s no longer kept: its shard is complete and this worker deletes it", lease_key)
        return True

    def drop(self, lease_key: str, why: str) -> None:
        """Forget a held lease without writing (it expires for the others); no listener fires."""
        self.keeper.forget(lease_key)
        if self.held.pop(lease_key, None) is not None:
            logger.warning("lease %s dropped: %s", lease_key, why)

    def adopt(self, lease: Lease) -> bool:
        """Hold a lease another worker (the 3.x leader) assigned to us, as read; fires ``taken``.

        Java's lease discovery, with one difference: the lease is renewed at once, and its records flow
        once that renewal is confirmed (we cannot know when the leader's write was sent)."""
        if lease.lease_key in self.held or lease.lease_owner != self.config.worker_id:
            return False
        self._hold(lease, self._clock.monotonic(), validated=False)
        logger.info("lease %s adopted (assigned by the leader)", lease.lease_key)
        self.observer.lease_taken("assigned")
        for listener in self.listeners.taken:
            listener(lease)
        return True

    def adopt_written(self, lease: Lease, sent_at: float) -> bool:
        """Hold a lease this worker assigned to itself as leader (``lease`` as the write returned it, the
        write sent at ``sent_at``): deliverable at once, no discovery needed; fires ``taken``."""
        if lease.lease_key in self.held or lease.lease_owner != self.config.worker_id:
            return False
        if lease.checkpoint_owner is not None:
            return False  # a hand-off to us: the old owner checkpoints first (discovery adopts it)
        self._hold(lease, sent_at)
        logger.info("lease %s adopted (assigned to itself as leader)", lease.lease_key)
        self.observer.lease_taken("assigned")
        for listener in self.listeners.taken:
            listener(lease)
        return True

    async def observe_fleet(
        self,
        scan: ScanResultLike,
        place: Sequence[Mapping[str, Any]],
        now: float,
        leader: str | None,
    ) -> None:
        """Per-worker renewal in 3.x mode: a scan of the assignment loop (the leader's passes, a
        follower's watch), with the heartbeat place read after it and the leader as seen before it, tells
        this worker of foreign signs (it falls back) and of held leases lost or marked for a hand-off."""
        renewal = self.renewal
        if renewal is None:
            return
        self._loop = asyncio.get_running_loop()
        renewal.observe_scan(scan, now, place, leader=leader)
        await self._per_worker_scan(scan.leases)

    def held_lease(self, lease_key: str) -> Lease | None:
        held = self.held.get(lease_key)
        return None if held is None else held.lease

    # -- the loops -------------------------------------------------------------------------------------

    async def run_renewer(self) -> None:
        """Keep the held leases (the keeper's thread, or on a fake clock this loop drives it); raise
        :class:`LeaseTableGone` when the table stays missing (fatal). Cancelling it stops the keeper."""
        self._loop = asyncio.get_running_loop()
        tick = min(self.config.renew_interval_s, 0.25)
        renewal = self.renewal
        try:
            if self._threaded:
                self.keeper.start()
                if renewal is not None:
                    renewal.start()
            while True:
                self.check_table()
                if self._threaded:
                    await self._clock.sleep(tick)
                    continue
                wake = self.keeper.tick()
                if renewal is not None:
                    wake = min(wake, renewal.tick())
                await self._clock.sleep(min(max(wake - self._clock.monotonic(), 0.001), tick))
        finally:
            if renewal is not None:
                renewal.stop()
            self.keeper.stop()
