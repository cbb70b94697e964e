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
  (``LEASE_IO``); a steal re-reads its lease first (see :meth:`LeaseCoordinator._fresh_steal_candidate`)
  and its shard starts only after the victim's next renewal has had time to fail (one renewal period),
  so the two never deliver at once;
* a lease item that cannot be decoded affects that lease only: it is given up with a warning;
* a lease table that stays missing for the failover time raises :class:`LeaseTableGone` from
  ``run_renewer`` (fatal: the worker stops and exits non-zero).

Listeners hear ``lease_taken(lease)`` and ``lease_lost(lease_key)``; lease loss is an event, never an
exception that climbs the stack.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from random import Random
from typing import Protocol, TypeVar

from kcl_daemon.blocking import run_blocking
from kcl_daemon.clock import Clock, SystemClock
from kcl_daemon.core.leases import restart_grace
from kcl_daemon.core.leases.expiry import LeaseObservations, expiry_interval_for, held_lease_deadline
from kcl_daemon.core.leases.keeping import KeepTimings, may_deliver
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import CorruptLeaseItem, ScanResultLike
from kcl_daemon.core.leases.reconcile import LeaseWrite, Verdict, WriteKind, reconcile
from kcl_daemon.core.leases.taker import (
    PlannedTake,
    TakeKind,
    TakePlan,
    TakerConfig,
    next_taker_pass,
    plan_takes,
)
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.errors import (
    DependencyUnavailable,
    KclError,
    LeaseConflict,
    LeaseTableGone,
    LeaseUnreadable,
    Throttled,
    TransientNetwork,
)
from kcl_daemon.leases.keeper import KeeperEvent, KeeperTable, LeaseKeeper
from kcl_daemon.metrics.observer import NULL_WORKER_OBSERVER, WorkerObserver
from kcl_daemon.retry import LEASE_IO

logger = logging.getLogger(__name__)

EPSILON_S = 0.025
T = TypeVar("T")


class LeaseTableOps(KeeperTable, Protocol):
    """The lease-table operations the coordinator needs (synchronous; run on thread pools): the keeper's
    writes and reads, plus listing and taking."""

    def list_leases(self, *, consistent: bool = False) -> ScanResultLike: ...

    def take(self, lease: Lease, owner: str) -> Lease: ...


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    worker_id: str
    failover_s: float = 10.0
    max_leases_for_worker: int = 2**31 - 1
    max_leases_to_steal_at_one_time: int = 1
    enable_priority_lease_assignment: bool = True
    #: how often the taker looks for expired leases between its full runs (None: from the failover)
    expiry_check_s: float | None = None

    @property
    def expiry_pass_s(self) -> float:
        return (
            self.expiry_check_s if self.expiry_check_s is not None else expiry_interval_for(self.failover_s)
        )

    @property
    def renew_interval_s(self) -> float:
        return self.failover_s / 3 - EPSILON_S

    @property
    def take_interval_s(self) -> float:
        return (self.failover_s + EPSILON_S) * 2

    def taker_config(self) -> TakerConfig:
        """The taker's settings; an expired lease this worker does not take is evicted half an expiry
        pass after it expired (:func:`~kcl_daemon.core.leases.taker.plan_takes` step 7), so a worker
        under its target that has had one pass to take it has had it."""
        return TakerConfig(
            failover_s=self.failover_s,
            max_leases_for_worker=self.max_leases_for_worker,
            max_leases_to_steal_at_one_time=self.max_leases_to_steal_at_one_time,
            enable_priority_lease_assignment=self.enable_priority_lease_assignment,
            evict_after_s=self.expiry_pass_s / 2,
        )


@dataclass(slots=True)
class HeldLease:
    lease: Lease
    renewed_at: float  # our monotonic clock: when the last successful take/renew/checkpoint was sent
    failover_s: float = 10.0

    @property
    def deadline(self) -> float:
        """When this lease is lost by our own clock (see :func:`held_lease_deadline`)."""
        return held_lease_deadline(self.renewed_at, self.failover_s)


@dataclass
class LeaseListeners:
    taken: list[Callable[[Lease], None]] = field(default_factory=list)
    lost: list[Callable[[str], None]] = field(default_factory=list)


class LeaseCoordinator:
    def __init__(
        self,
        table: LeaseTableOps,
        config: CoordinatorConfig,
        clock: Clock,
        *,
        rng: Random | None = None,
        renew_pool: Executor | None = None,
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
        self._observations = LeaseObservations()
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
            monotonic=clock.monotonic,
            notify=self._from_keeper,
        )

    def _held(self, lease: Lease, sent_at: float) -> HeldLease:
        return HeldLease(lease, sent_at, self.config.failover_s)

    async def _call(self, pool: Executor, fn: Callable[[], T]) -> T:
        return await run_blocking(pool, fn)

    async def _bounded(self, pool: Executor, fn: Callable[[], T], deadline: float, what: str) -> T:
        """``fn()`` on ``pool``, waited for no longer than ``deadline`` (then: outcome unknown)."""
        remaining = deadline - self._clock.monotonic()
        if remaining <= 0:
            raise TransientNetwork(f"{what}: no time left before the deadline")
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancellation that
            # arrives after the call finished but before this task resumed (cpython gh-86296), and a
            # cancelled renewal loop then went on renewing for ever
            async with asyncio.timeout(remaining):
                result = await self._call(pool, fn)
        except TimeoutError:
            raise TransientNetwork(f"{what}: no answer within {remaining:.1f}s") from None
        except DependencyUnavailable:
            if self.table_missing_since is None:
                self.table_missing_since = self._clock.monotonic()
            raise
        self.table_missing_since = None
        return result

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

    async def _write(
        self, write: LeaseWrite, fn: Callable[[Lease], Lease], pool: Executor, deadline: float
    ) -> Lease:
        """One fenced write, reconciled after an unknown outcome or a condition failure, and retried
        (``LEASE_IO``, never past ``deadline``) while it was not applied.

        Returns the lease as stored; raises :class:`LeaseConflict` (lost: the message says what the
        table showed), :class:`LeaseUnreadable`, or the last error when the time ran out.
        """
        policy = LEASE_IO.within(deadline - self._clock.monotonic())

        async def sleep(seconds: float) -> None:
            await self._clock.sleep(min(seconds, max(deadline - self._clock.monotonic(), 0.0)))

        once = functools.partial(self._write_once, write, fn, pool, deadline)
        return await policy.run_async(once, sleep=sleep, monotonic=self._clock.monotonic)

    async def _write_once(
        self, write: LeaseWrite, fn: Callable[[Lease], Lease], pool: Executor, deadline: float
    ) -> Lease:
        key = write.before.lease_key
        what = f"{write.kind} of lease {key}"
        try:
            return await self._bounded(pool, functools.partial(fn, write.before), deadline, what)
        except CorruptLeaseItem as exc:
            raise LeaseUnreadable(f"{what} was written but the item cannot be read: {exc}") from exc
        except (DependencyUnavailable, Throttled):
            raise  # the table is gone, or the write was rejected unapplied: nothing to reconcile
        except KclError as exc:  # a condition failure, or an unknown outcome (5xx, connection, timeout)
            failure = exc
        read = functools.partial(self._table.get_lease, key, consistent=True)
        try:
            seen = await self._bounded(pool, read, deadline, f"re-read of lease {key}")
        except CorruptLeaseItem as exc:
            raise LeaseUnreadable(f"{what}: {failure}; the re-read item cannot be read: {exc}") from exc
        except KclError as exc:
            logger.warning("%s: %s; the re-read failed too (%s): outcome still unknown", what, failure, exc)
            if failure.retriable:
                raise failure from None
            raise TransientNetwork(f"{what}: {failure}; outcome unknown, re-read failed: {exc}") from exc
        verdict = reconcile(write, seen)
        level = logging.DEBUG if isinstance(failure, LeaseConflict) else logging.WARNING
        logger.log(level, "%s: %s; %s", what, failure, verdict.reason)
        match verdict.verdict:
            case Verdict.APPLIED:
                if verdict.seen is None:  # a release of a lease that was deleted meanwhile
                    raise LeaseConflict(f"{what}: {verdict.reason}")
                return verdict.seen
            case Verdict.LOST:
                raise LeaseConflict(f"{what}: {verdict.reason}") from failure
            case Verdict.NOT_APPLIED:
                if failure.retriable:
                    raise failure
                raise TransientNetwork(f"{what}: {failure}; {verdict.reason}") from failure

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
                self.held[key] = self._held(event.lease, event.confirmed_at)
                self._observations = self._observations.record_write(
                    key, event.lease.lease_counter, event.confirmed_at
                )
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
        self._observations = self._observations.record_write(lease.lease_key, lease.lease_counter, sent_at)
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

    async def release_named(self) -> int:
        """Graceful stop, after the held leases are released: give up what the table still names us on.

        A consistent scan finds the leases owned by this worker that it does not hold: assigned by a
        leader but not adopted yet, or a take whose write landed as its loop was cancelled. Each is
        released, fenced on the counter read; one handed off *to* us (``checkpointOwner`` set) is given
        back to the worker that still serves it. Returns how many were given up; a failure is a warning
        (those leases expire instead)."""
        me = self.config.worker_id
        try:
            scan = await self._call(
                self._io_pool, functools.partial(self._table.list_leases, consistent=True)
            )
        except KclError as exc:
            logger.warning("cannot look for leases still naming this worker; they expire instead: %s", exc)
            return 0
        released = 0
        for lease in scan.leases:
            if lease.lease_owner != me or lease.lease_key in self.held:
                continue
            back_to = lease.checkpoint_owner if lease.checkpoint_owner not in (None, me) else None
            assign = getattr(self._table, "assign", None)
            if back_to is not None and assign is not None:
                write = functools.partial(assign, lease, back_to)
                done = (
                    f"lease {lease.lease_key} handed back to {back_to} (a hand-off to this worker, not begun)"
                )
            else:
                write = functools.partial(self._table.release, lease)
                done = f"lease {lease.lease_key} released (assigned to this worker, not started)"
            try:
                await self._call(self._io_pool, write)
            except LeaseConflict:
                continue  # moved meanwhile: no longer ours
            except KclError as exc:
                logger.warning("lease %s not released; it expires instead: %s", lease.lease_key, exc)
                continue
            logger.info("%s", done)
            released += 1
        return released

    async def keep_for_restart(self, lease_key: str, until_s: float) -> bool:
        """Graceful stop with a restart grace: stop keeping the lease and mark it as waiting for this
        worker until ``until_s`` (epoch seconds), as its last write (:mod:`kcl_daemon.core.leases.restart_grace`).

        Renewals stop first; the mark is fenced on the counter held, and after a condition failure or an
        unknown outcome the lease is read again: marked already (our write landed), still ours (a renewal
        in flight landed first: marked again on what was read), or moved on (nothing to keep). Returns
        whether the mark is on the lease; without it the lease simply expires."""
        held = self.held.pop(lease_key, None)
        self.keeper.forget(lease_key)
        me = self.config.worker_id
        mark = getattr(self._table, "mark_restart", None)
        if held is None or mark is None:
            return False
        lease: Lease | None = held.lease
        deadline = self._clock.monotonic() + LEASE_IO.deadline_s
        for _ in range(3):
            if lease is None or lease.lease_owner != me or lease.checkpoint_owner is not None:
                logger.info("lease %s not kept for the restart: it is no longer this worker's", lease_key)
                return False
            what = f"restart mark of lease {lease_key}"
            try:
                await self._bounded(self._io_pool, functools.partial(mark, lease, until_s), deadline, what)
            except LeaseConflict:
                pass
            except KclError as exc:
                logger.info("%s: %s; reading it again", what, exc)
            else:
                logger.info("lease %s kept for this worker's restart grace", lease_key)
                return True
            read = functools.partial(self._table.get_lease, lease_key, consistent=True)
            try:
                lease = await self._bounded(self._io_pool, read, deadline, f"re-read of lease {lease_key}")
            except (KclError, CorruptLeaseItem):
                break
            landed = lease is not None and restart_grace.graced_leases([lease], self._wall()).get(lease_key)
            if landed == me:  # an earlier attempt of ours was applied after all
                logger.info("lease %s kept for this worker's restart grace", lease_key)
                return True
        logger.warning(
            "lease %s: its restart grace could not be marked; it expires (only the leader's reading of "
            "this worker's RESTARTING state keeps it)",
            lease_key,
        )
        return False

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

    def held_lease(self, lease_key: str) -> Lease | None:
        held = self.held.get(lease_key)
        return None if held is None else held.lease

    # -- the 2.x taker -------------------------------------------------------------------------------

    async def take_once(self, *, steals: bool = True) -> TakePlan:
        """One taker pass: scan, then take (and, unless ``steals=False``, steal) what the plan says."""
        self._loop = asyncio.get_running_loop()
        started = self._clock.monotonic()
        scan = await self._bounded(
            self._io_pool, self._table.list_leases, started + LEASE_IO.deadline_s * 2, "scan"
        )
        for problem in scan.skipped:
            logger.warning("skipping lease item: %s", problem)
        now = self._clock.monotonic()
        self._observations = self._observations.observe(scan.leases, now)
        failover_s = self.config.failover_s
        expired = frozenset(
            lease.lease_key
            for lease in scan.leases
            if lease.lease_owner is not None
            and self._observations.is_expired(lease.lease_key, now, failover_s)
        )
        self.observer.scanned(scan.leases, expired)
        plan = plan_takes(
            scan.leases,
            self._observations,
            self.config.worker_id,
            now,
            self.config.taker_config(),
            self._rng,
            steals=steals,
            graced=restart_grace.graced_leases(scan.leases, self._wall()),
        )
        self.last_plan = plan
        await self.take_planned(plan.all)
        for planned in plan.evictions:
            await self._evict(planned)
        return plan

    async def take_planned(self, planned_takes: Iterable[PlannedTake]) -> list[Lease]:
        """Take each planned lease, fenced on the counter it was planned on (a steal re-reads it first);
        returns those taken, held and announced to the listeners. A take that fails (another worker was
        first, an unreadable item, an error) is logged and skipped."""
        self._loop = asyncio.get_running_loop()
        taken_leases = []
        for planned in planned_takes:
            lease: Lease | None = planned.lease
            deadline = self._clock.monotonic() + LEASE_IO.deadline_s
            try:
                if planned.kind is TakeKind.STEAL:
                    lease = await self._fresh_steal_candidate(planned.lease, deadline)
                if lease is None:
                    continue
                sent_at = self._clock.monotonic()
                take = functools.partial(self._take_write, owner=self.config.worker_id)
                write = LeaseWrite(WriteKind.TAKE, lease, self.config.worker_id)
                taken = await self._write(write, take, self._io_pool, deadline)
            except LeaseUnreadable as exc:
                logger.warning("not taking lease %s: %s", planned.lease_key, exc)
                continue
            except LeaseConflict as exc:
                logger.debug("lease %s: another worker took it first: %s", planned.lease_key, exc)
                continue
            except KclError as exc:
                logger.warning("taking lease %s failed: %s", planned.lease_key, exc)
                continue
            self._hold(taken, sent_at)
            if planned.kind is TakeKind.STEAL:
                # the victim delivers until its next renewal fails (within one renewal period): ours wait
                self._not_before[taken.lease_key] = sent_at + self.config.renew_interval_s + 2 * EPSILON_S
            logger.info("lease %s taken (%s): %s", taken.lease_key, planned.kind.value, planned.reason)
            self.observer.lease_taken(planned.kind.value)
            for listener in self.listeners.taken:
                listener(taken)
            taken_leases.append(taken)
        return taken_leases

    async def _evict(self, planned: PlannedTake) -> None:
        """Remove the dead owner of an expired lease (fenced on the counter seen), so that a worker under
        its target takes it at once; failing is harmless (someone moved the lease, or the next pass
        tries again)."""
        deadline = self._clock.monotonic() + LEASE_IO.deadline_s
        write = LeaseWrite(WriteKind.RELEASE, planned.lease, self.config.worker_id)
        try:
            await self._write(write, self._table.release, self._io_pool, deadline)
        except LeaseUnreadable as exc:
            logger.warning("not evicting lease %s: %s", planned.lease_key, exc)
            return
        except LeaseConflict as exc:
            logger.debug("lease %s not evicted: it moved since the scan: %s", planned.lease_key, exc)
            return
        except KclError as exc:
            logger.warning("evicting lease %s failed: %s", planned.lease_key, exc)
            return
        logger.info("lease %s evicted: %s", planned.lease_key, planned.reason)

    def next_expiry(self) -> float | None:
        """When the first lease this worker has seen would expire if nobody renews it, or an expired one
        would be due for eviction (monotonic)."""
        now, failover = self._clock.monotonic(), self.config.failover_s
        dues = [self._observations.next_expiry(now, failover)]
        grace = self.config.taker_config().evict_after_s
        if grace is not None:
            dues.append(self._observations.next_expiry(now, failover + grace))
        return min((due for due in dues if due is not None), default=None)

    def _take_write(self, lease: Lease, *, owner: str) -> Lease:
        return self._table.take(lease, owner)

    async def _fresh_steal_candidate(self, scanned: Lease, deadline: float) -> Lease | None:
        """Re-read a lease before stealing it: its owner renews every failover/3, so the counter from a
        scan that took longer than that fails the fenced take every time and the steal would starve.
        The decision stays the scan's; only an unchanged owner is stolen from. An item that cannot be
        decoded is not stolen (warning)."""
        read = functools.partial(self._table.get_lease, scanned.lease_key, consistent=True)
        try:
            fresh = await self._bounded(
                self._io_pool, read, deadline, f"re-read of lease {scanned.lease_key}"
            )
        except CorruptLeaseItem as exc:
            logger.warning("not stealing lease %s: %s", scanned.lease_key, exc)
            return None
        if fresh is None or fresh.lease_owner != scanned.lease_owner:
            logger.debug("not stealing %s: it changed hands since the scan", scanned.lease_key)
            return None
        return fresh

    # -- the loops -------------------------------------------------------------------------------------

    async def run_renewer(self) -> None:
        """Keep the held leases (the keeper's thread, or on a fake clock this loop drives it); raise
        :class:`LeaseTableGone` when the table stays missing (fatal). Cancelling it stops the keeper."""
        self._loop = asyncio.get_running_loop()
        tick = min(self.config.renew_interval_s, 0.25)
        try:
            if self._threaded:
                self.keeper.start()
            while True:
                self.check_table()
                if self._threaded:
                    await self._clock.sleep(tick)
                    continue
                wake = self.keeper.tick()
                await self._clock.sleep(min(max(wake - self._clock.monotonic(), 0.001), tick))
        finally:
            self.keeper.stop()

    async def run_taker(self) -> None:
        """Java's taker run every ``2 x failover``, and expiry passes (no steals) in between and when the
        first lease seen would expire, so a dead worker's lease is taken as it expires
        (:func:`next_taker_pass`)."""
        full_due_at = self._clock.monotonic()
        while True:
            started = self._clock.monotonic()
            full = started >= full_due_at
            try:
                await self.take_once(steals=full)
            except KclError as exc:
                logger.warning("lease taker run failed, will retry: %s", exc)
            step = next_taker_pass(
                started,
                full_due_at=full_due_at,
                take_interval_s=self.config.take_interval_s,
                expiry_interval_s=self.config.expiry_pass_s,
                earliest_due=self.next_expiry(),
            )
            full_due_at = step.full_due_at
            delay = step.wake_at - self._clock.monotonic()
            if delay <= 0:  # a pass slower than the interval (a large table): a pause, not the next scan
                delay = self.config.expiry_pass_s / 2
            await self._clock.sleep(delay)
