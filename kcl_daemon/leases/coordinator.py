"""Renews the leases this worker holds and takes new ones, KCL 2.x style (spec section 4).

The shell around :func:`kcl_daemon.core.taker.plan_takes` and :class:`LeaseObservations`:

* ``renew_once`` renews every held lease with the counter-fenced write; a lease that fails the
  condition, or that this worker could not renew for longer than the failover time (by its own
  monotonic clock), is lost.
* ``take_once`` scans the table, updates the counter observations, asks the planner, and attempts
  each planned take; a condition failure means another worker won. A steal re-reads its lease first
  (see :meth:`LeaseCoordinator._fresh_steal_candidate`).
* ``run_renewer`` / ``run_taker`` repeat them every ``failover/3 - epsilon`` and
  ``2 x (failover + epsilon)``. Renewals run on their own thread pool so they never queue behind
  scans or takes.

Listeners hear ``lease_taken(lease)`` and ``lease_lost(lease_key)``; lease loss is an event, never an
exception that climbs the stack.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from random import Random
from typing import Protocol, TypeVar

from kcl_daemon.clock import Clock
from kcl_daemon.core.expiry import LeaseObservations
from kcl_daemon.core.lease import Lease
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.core.taker import TakeKind, TakePlan, TakerConfig, plan_takes
from kcl_daemon.errors import KclError, LeaseConflict

logger = logging.getLogger(__name__)

EPSILON_S = 0.025
T = TypeVar("T")


class ScanResultLike(Protocol):
    @property
    def leases(self) -> Sequence[Lease]: ...

    @property
    def skipped(self) -> Sequence[str]: ...


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
    renewed_at: float  # our monotonic clock, last successful take or renew


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
        renew_pool: ThreadPoolExecutor | None = None,
        io_pool: ThreadPoolExecutor | None = None,
    ) -> None:
        self.config = config
        self.held: dict[str, HeldLease] = {}
        self.listeners = LeaseListeners()
        self.last_plan: TakePlan | None = None
        self._table = table
        self._clock = clock
        self._rng = rng or Random()  # noqa: S311 - shuffles lease choices; not security
        self._observations = LeaseObservations()
        self._renew_pool = renew_pool or ThreadPoolExecutor(4, thread_name_prefix="lease-renew")
        self._io_pool = io_pool or ThreadPoolExecutor(2, thread_name_prefix="lease-io")
        self._locks: dict[str, asyncio.Lock] = {}

    def _lock(self, lease_key: str) -> asyncio.Lock:
        """Serializes the writes to one held lease: a renewal and a checkpoint both fence on the counter,
        so running them at once would make one of them fail and look like a lost lease."""
        return self._locks.setdefault(lease_key, asyncio.Lock())

    async def _call(self, pool: ThreadPoolExecutor, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(pool, fn)

    def _lose(self, lease_key: str, why: str) -> None:
        if self.held.pop(lease_key, None) is not None:
            logger.info("lease %s lost: %s", lease_key, why)
            for listener in self.listeners.lost:
                listener(lease_key)

    async def renew_once(self) -> None:
        """Renew every held lease, concurrently (bounded by the renew pool)."""
        now = self._clock.monotonic()
        await asyncio.gather(*(self._renew(key, now) for key in list(self.held)))

    async def _renew(self, key: str, now: float) -> None:
        async with self._lock(key):
            held = self.held.get(key)
            if held is None:
                return
            if now - held.renewed_at > self.config.failover_s:
                self._lose(key, f"not renewed for {now - held.renewed_at:.1f}s (> failover time)")
                return
            try:
                renewed = await self._call(self._renew_pool, functools.partial(self._table.renew, held.lease))
            except LeaseConflict:
                self._lose(key, "another worker changed it (its counter moved)")
                return
            except KclError as exc:
                logger.warning("renewing lease %s failed, will retry: %s", key, exc)
                return
            if key in self.held:
                self.held[key] = HeldLease(renewed, self._clock.monotonic())
                self._observations = self._observations.record_write(key, renewed.lease_counter, now)

    async def checkpoint(
        self,
        lease_key: str,
        target: ExtendedSequenceNumber,
        *,
        child_shard_ids: Iterable[str] | None = None,
    ) -> Lease:
        """Write ``target`` with the held lease's counter; raises :class:`LeaseConflict` (and the lease is
        lost) if this worker no longer holds it. The write counts as a renewal."""
        async with self._lock(lease_key):
            held = self.held.get(lease_key)
            if held is None:
                raise LeaseConflict(f"lease {lease_key} is not held by {self.config.worker_id}")
            write = functools.partial(
                self._table.checkpoint, held.lease, target, child_shard_ids=child_shard_ids
            )
            try:
                written = await self._call(self._io_pool, write)
            except LeaseConflict:
                self._lose(lease_key, "another worker changed it before the checkpoint")
                raise
            now = self._clock.monotonic()
            self.held[lease_key] = HeldLease(written, now)
            self._observations = self._observations.record_write(lease_key, written.lease_counter, now)
            return written

    async def release(self, lease_key: str) -> bool:
        """Give the lease up (graceful shutdown) so another worker takes it at once; no listener fires."""
        async with self._lock(lease_key):
            held = self.held.pop(lease_key, None)
            if held is None:
                return False
            try:
                await self._call(self._io_pool, functools.partial(self._table.release, held.lease))
            except KclError as exc:
                logger.warning("releasing lease %s failed; it expires instead: %s", lease_key, exc)
                return False
            logger.info("lease %s released", lease_key)
            return True

    def drop(self, lease_key: str, why: str) -> None:
        """Forget a held lease without writing (it expires for the others); no listener fires."""
        if self.held.pop(lease_key, None) is not None:
            logger.warning("lease %s dropped: %s", lease_key, why)

    def held_lease(self, lease_key: str) -> Lease | None:
        held = self.held.get(lease_key)
        return None if held is None else held.lease

    async def take_once(self) -> TakePlan:
        scan = await self._call(self._io_pool, self._table.list_leases)
        for problem in scan.skipped:
            logger.warning("skipping lease item: %s", problem)
        now = self._clock.monotonic()
        self._observations = self._observations.observe(scan.leases, now)
        plan = plan_takes(
            scan.leases, self._observations, self.config.worker_id, now, self.config.taker_config(), self._rng
        )
        self.last_plan = plan
        for planned in plan.all:
            lease: Lease | None = planned.lease
            try:
                if planned.kind is TakeKind.STEAL:
                    lease = await self._fresh_steal_candidate(planned.lease)
                if lease is None:
                    continue
                taken = await self._call(
                    self._io_pool, functools.partial(self._table.take, lease, self.config.worker_id)
                )
            except LeaseConflict:
                logger.debug("lease %s: another worker took it first", planned.lease_key)
                continue
            except KclError as exc:
                logger.warning("taking lease %s failed: %s", planned.lease_key, exc)
                continue
            self.held[taken.lease_key] = HeldLease(taken, self._clock.monotonic())
            self._observations = self._observations.record_write(taken.lease_key, taken.lease_counter, now)
            logger.info("lease %s taken (%s): %s", taken.lease_key, planned.kind.value, planned.reason)
            for listener in self.listeners.taken:
                listener(taken)
        return plan

    async def _fresh_steal_candidate(self, scanned: Lease) -> Lease | None:
        """Re-read a lease before stealing it: its owner renews every failover/3, so the counter from a
        scan that took longer than that fails the fenced take every time and the steal would starve.
        The decision stays the scan's; only an unchanged owner is stolen from."""
        fresh = await self._call(
            self._io_pool, functools.partial(self._table.get_lease, scanned.lease_key, consistent=True)
        )
        if fresh is None or fresh.lease_owner != scanned.lease_owner:
            logger.debug("not stealing %s: it changed hands since the scan", scanned.lease_key)
            return None
        return fresh

    async def run_renewer(self) -> None:
        while True:
            started = self._clock.monotonic()
            await self.renew_once()
            elapsed = self._clock.monotonic() - started
            await self._clock.sleep(max(self.config.renew_interval_s - elapsed, 0.0))

    async def run_taker(self) -> None:
        while True:
            try:
                await self.take_once()
            except KclError as exc:
                logger.warning("lease taker run failed, will retry: %s", exc)
            await self._clock.sleep(self.config.take_interval_s)
