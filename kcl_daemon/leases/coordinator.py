"""Renews the leases this worker holds and takes new ones, KCL 2.x style (contract §4).

The shell around :func:`kcl_daemon.core.taking.taker.plan_takes`, :class:`LeaseObservations` and
:func:`kcl_daemon.core.reconcile.reconcile`:

* every held lease has its own renewal loop (``run_renewer`` keeps one per lease), so one slow call
  never delays another lease's renewal. Each call's deadline is the lease's own local expiry
  (:func:`kcl_daemon.core.expiry.held_lease_deadline`: the time the last successful write was *sent*
  plus the failover time, minus a margin), so a lease is given up by our clock before any other
  worker can see it expire, and its child is told before anyone can take it over;
* every counter-fenced write (renew, take, steal, checkpoint, release) whose outcome is unknown (a
  5xx, a dropped connection, a timeout) or that fails its condition is followed by a consistent
  re-read and reconciled: ours with the counter (and checkpoint) we wrote means it was applied; only a
  different owner or counter means the lease is lost. A throttled write was rejected, not applied
  (botocore makes one attempt per call), so it is retried without a re-read, which would only add load
  to a table that is over its capacity. Retries follow the ``LEASE_IO`` policy, cut to the lease's
  remaining time;
* a lease item that cannot be decoded affects that lease only: it is given up with a warning;
* ``take_once`` scans the table, updates the counter observations, asks the planner, and attempts each
  planned take; a steal re-reads its lease first (see :meth:`LeaseCoordinator._fresh_steal_candidate`);
* a lease table that stays missing for the failover time raises :class:`LeaseTableGone` from
  ``run_renewer`` (fatal: the worker stops and exits non-zero).

Listeners hear ``lease_taken(lease)`` and ``lease_lost(lease_key)``; lease loss is an event, never an
exception that climbs the stack.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from random import Random
from typing import Protocol, TypeVar

from kcl_daemon.blocking import run_blocking
from kcl_daemon.clock import Clock
from kcl_daemon.core.expiry import LeaseObservations, held_lease_deadline
from kcl_daemon.core.lease import Lease
from kcl_daemon.core.lease_codec import CorruptLeaseItem, ScanResultLike
from kcl_daemon.core.reconcile import LeaseWrite, Verdict, WriteKind, reconcile
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.core.taking.taker import TakeKind, TakePlan, TakerConfig, plan_takes
from kcl_daemon.errors import (
    DependencyUnavailable,
    KclError,
    LeaseConflict,
    LeaseTableGone,
    LeaseUnreadable,
    Throttled,
    TransientNetwork,
)
from kcl_daemon.metrics.observer import NULL_WORKER_OBSERVER, WorkerObserver
from kcl_daemon.retry import LEASE_IO

logger = logging.getLogger(__name__)

EPSILON_S = 0.025
T = TypeVar("T")


class LeaseTableOps(Protocol):
    """The lease-table operations the coordinator needs (synchronous; run on thread pools)."""

    def list_leases(self) -> ScanResultLike: ...

    def get_lease(self, lease_key: str, *, consistent: bool = False) -> Lease | None: ...

    def renew(self, lease: Lease) -> Lease: ...

    def take(self, lease: Lease, owner: str) -> Lease: ...

    def checkpoint(
        self,
        lease: Lease,
        checkpoint: ExtendedSequenceNumber,
        *,
        pending: ExtendedSequenceNumber | None = None,
        child_shard_ids: Iterable[str] | None = None,
    ) -> Lease: ...

    def release(self, lease: Lease) -> Lease: ...


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    worker_id: str
    failover_s: float = 10.0
    max_leases_for_worker: int = 2**31 - 1
    max_leases_to_steal_at_one_time: int = 1
    enable_priority_lease_assignment: bool = True

    @property
    def renew_interval_s(self) -> float:
        return self.failover_s / 3 - EPSILON_S

    @property
    def take_interval_s(self) -> float:
        return (self.failover_s + EPSILON_S) * 2

    def taker_config(self) -> TakerConfig:
        return TakerConfig(
            failover_s=self.failover_s,
            max_leases_for_worker=self.max_leases_for_worker,
            max_leases_to_steal_at_one_time=self.max_leases_to_steal_at_one_time,
            enable_priority_lease_assignment=self.enable_priority_lease_assignment,
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
    ) -> None:
        self.config = config
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
        self._renew_pool: Executor = renew_pool or ThreadPoolExecutor(4, thread_name_prefix="lease-renew")
        self._io_pool: Executor = io_pool or ThreadPoolExecutor(2, thread_name_prefix="lease-io")
        self._locks: dict[str, asyncio.Lock] = {}

    def _lock(self, lease_key: str) -> asyncio.Lock:
        """Serializes the writes to one held lease: a renewal and a checkpoint both fence on the counter,
        so running them at once would make one of them fail and look like a lost lease."""
        return self._locks.setdefault(lease_key, asyncio.Lock())

    @contextlib.asynccontextmanager
    async def _locked(self, lease_key: str, deadline: float) -> AsyncIterator[None]:
        """The lease's lock, waited for no longer than ``deadline``."""
        lock = self._lock(lease_key)
        remaining = deadline - self._clock.monotonic()
        if remaining <= 0:
            raise TransientNetwork(f"lease {lease_key}: no time left before its deadline")
        acquire = asyncio.ensure_future(lock.acquire())
        await asyncio.wait({acquire}, timeout=remaining)
        if acquire.cancel():  # still waiting (Lock.acquire gives nothing away when cancelled)
            with contextlib.suppress(asyncio.CancelledError):
                await acquire
            raise TransientNetwork(
                f"lease {lease_key}: another write held it until the deadline ({remaining:.1f}s)"
            )
        try:
            yield
        finally:
            lock.release()

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
            async with asyncio.timeout(remaining):  # no task of its own, unlike asyncio.wait_for
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
        since = self.table_missing_since
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

    def _lose(self, lease_key: str, why: str, *, level: int = logging.INFO) -> None:
        if self.held.pop(lease_key, None) is not None:
            self.observer.lease_lost()
            logger.log(level, "lease %s lost: %s", lease_key, why)
            for listener in self.listeners.lost:
                listener(lease_key)

    def _lose_for(self, lease_key: str, exc: LeaseConflict) -> None:
        level = logging.WARNING if isinstance(exc, LeaseUnreadable) else logging.INFO
        self._lose(lease_key, str(exc.args[0]) if exc.args else str(exc), level=level)

    async def renew_once(self) -> None:
        """Renew every held lease once, each on its own (one slow renewal delays no other)."""
        await asyncio.gather(*(self._renew(key) for key in list(self.held)))

    async def _renew(self, key: str) -> None:
        held = self.held.get(key)
        if held is None:
            return
        deadline = held.deadline
        now = self._clock.monotonic()
        if now >= deadline:
            self._lose(key, f"not renewed for {now - held.renewed_at:.1f}s (local expiry)")
            return
        try:
            async with self._locked(key, deadline):
                current = self.held.get(key)
                if current is None:
                    return
                sent_at = self._clock.monotonic()
                write = LeaseWrite(WriteKind.RENEW, current.lease, self.config.worker_id)
                renewed = await self._write(write, self._table.renew, self._renew_pool, deadline)
        except LeaseConflict as exc:
            self._lose_for(key, exc)
            return
        except KclError as exc:
            self.observer.renew_failed()
            now = self._clock.monotonic()
            if now >= deadline:
                self._lose(key, f"not renewed for {now - held.renewed_at:.1f}s (local expiry); last: {exc}")
            else:
                logger.warning("renewing lease %s failed, will retry: %s", key, exc)
            return
        self.observer.renewed(self._clock.monotonic() - sent_at)
        if key in self.held:
            self.held[key] = self._held(renewed, sent_at)
            self._observations = self._observations.record_write(key, renewed.lease_counter, sent_at)

    async def _keep_renewing(self, key: str) -> None:
        """Renew one lease every ``renew_interval_s`` until it is no longer held; wake at its local
        expiry if that comes first (a renewal that keeps failing then loses it on time)."""
        while key in self.held:
            started = self._clock.monotonic()
            await self._renew(key)
            held = self.held.get(key)
            if held is None:
                return
            wake = min(started + self.config.renew_interval_s, held.deadline)
            await self._clock.sleep(max(wake - self._clock.monotonic(), 0.0))

    async def checkpoint(
        self,
        lease_key: str,
        target: ExtendedSequenceNumber,
        *,
        child_shard_ids: Iterable[str] | None = None,
    ) -> Lease:
        """Write ``target`` with the held lease's counter; raises :class:`LeaseConflict` (and the lease is
        lost) if this worker no longer holds it. The write counts as a renewal. A write with an unknown
        outcome is reconciled and retried within the lease's remaining time; the last error is raised
        (the lease stays held) when that runs out."""
        held = self.held.get(lease_key)
        if held is None:
            raise LeaseConflict(f"lease {lease_key} is not held by {self.config.worker_id}")
        deadline = held.deadline
        async with self._locked(lease_key, deadline):
            held = self.held.get(lease_key)
            if held is None:
                raise LeaseConflict(f"lease {lease_key} is not held by {self.config.worker_id}")
            write_fn = functools.partial(self._checkpoint_write, target=target, children=child_shard_ids)
            write = LeaseWrite(WriteKind.CHECKPOINT, held.lease, self.config.worker_id, checkpoint=target)
            sent_at = self._clock.monotonic()
            try:
                written = await self._write(write, write_fn, self._io_pool, deadline)
            except LeaseConflict as exc:
                self._lose_for(lease_key, exc)
                raise
            if lease_key in self.held:
                self.held[lease_key] = self._held(written, sent_at)
                self._observations = self._observations.record_write(
                    lease_key, written.lease_counter, sent_at
                )
            return written

    def _checkpoint_write(
        self, lease: Lease, *, target: ExtendedSequenceNumber, children: Iterable[str] | None
    ) -> Lease:
        return self._table.checkpoint(lease, target, child_shard_ids=children)

    async def release(self, lease_key: str) -> bool:
        """Give the lease up (graceful shutdown) so another worker takes it at once; no listener fires."""
        held = self.held.get(lease_key)
        if held is None:
            return False
        deadline = self._clock.monotonic() + LEASE_IO.deadline_s
        async with self._locked(lease_key, deadline):
            held = self.held.pop(lease_key, None)
            if held is None:
                return False
            write = LeaseWrite(WriteKind.RELEASE, held.lease, self.config.worker_id)
            try:
                await self._write(write, self._table.release, self._io_pool, deadline)
            except LeaseConflict as exc:
                logger.info("lease %s not released: %s", lease_key, exc)
                return False
            except KclError as exc:
                logger.warning("releasing lease %s failed; it expires instead: %s", lease_key, exc)
                return False
            logger.info("lease %s released", lease_key)
            self.observer.lease_handed_off()
            return True

    def drop(self, lease_key: str, why: str) -> None:
        """Forget a held lease without writing (it expires for the others); no listener fires."""
        if self.held.pop(lease_key, None) is not None:
            logger.warning("lease %s dropped: %s", lease_key, why)

    def adopt(self, lease: Lease) -> bool:
        """Hold a lease another worker (the 3.x leader) assigned to us, as read; fires ``taken``.

        Java's lease discovery: a fresh local renewal time, no write (the next renewal is the first)."""
        if lease.lease_key in self.held or lease.lease_owner != self.config.worker_id:
            return False
        now = self._clock.monotonic()
        self.held[lease.lease_key] = self._held(lease, now)
        self._observations = self._observations.record_write(lease.lease_key, lease.lease_counter, now)
        logger.info("lease %s adopted (assigned by the leader)", lease.lease_key)
        self.observer.lease_taken("assigned")
        for listener in self.listeners.taken:
            listener(lease)
        return True

    def held_lease(self, lease_key: str) -> Lease | None:
        held = self.held.get(lease_key)
        return None if held is None else held.lease

    async def take_once(self) -> TakePlan:
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
            scan.leases, self._observations, self.config.worker_id, now, self.config.taker_config(), self._rng
        )
        self.last_plan = plan
        for planned in plan.all:
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
            self.held[taken.lease_key] = self._held(taken, sent_at)
            self._observations = self._observations.record_write(
                taken.lease_key, taken.lease_counter, sent_at
            )
            logger.info("lease %s taken (%s): %s", taken.lease_key, planned.kind.value, planned.reason)
            self.observer.lease_taken(planned.kind.value)
            for listener in self.listeners.taken:
                listener(taken)
        return plan

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

    async def run_renewer(self) -> None:
        """Keep one renewal loop per held lease; raise :class:`LeaseTableGone` when the table stays
        missing, and the error of a renewal loop that failed unexpectedly (the supervisor restarts us)."""
        keepers: dict[str, asyncio.Task[None]] = {}
        tick = min(self.config.renew_interval_s, 0.25)
        try:
            while True:
                self.check_table()
                for key, task in list(keepers.items()):
                    if task.done():
                        del keepers[key]
                        task.result()  # a renewal loop that failed: raise its error
                for key in list(self.held):
                    if key not in keepers:
                        keepers[key] = asyncio.create_task(self._keep_renewing(key), name=f"renew-{key}")
                await self._clock.sleep(tick)
        finally:
            for task in keepers.values():
                task.cancel()
            for task in keepers.values():
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def run_taker(self) -> None:
        while True:
            try:
                await self.take_once()
            except KclError as exc:
                logger.warning("lease taker run failed, will retry: %s", exc)
            await self._clock.sleep(self.config.take_interval_s)
