"""The 2.x lease taker of the coordinator (contract §4.4): scan, plan, take, steal, evict.

The shell around :func:`kcl_daemon.core.leases.taker.plan_takes` and the worker's
:class:`~kcl_daemon.core.leases.expiry.LeaseObservations`: a full run every ``(L + ε) x 2`` and expiry
passes (no steals) in between (:func:`~kcl_daemon.core.leases.taker.next_taker_pass`). A take or steal
is a counter-fenced write (:class:`~kcl_daemon.leases.fenced_writes.FencedWrites`); a steal re-reads its
lease first and its shard starts only after the victim's next renewal has had time to fail
(:attr:`~kcl_daemon.core.leases.timings.LeaseTimings.steal_quiet_s`; renewing per worker, after its next
heartbeat read has shown it the thief's steal notice: ``per_worker_steal_quiet_s``). Renewing per
worker, the passes between full runs read the heartbeats every ``heartbeat_read_s`` and the lease
table only when needed (:mod:`~kcl_daemon.leases.lease_reads`). A mixin of
:class:`~kcl_daemon.leases.coordinator.LeaseCoordinator`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor
from random import Random
from typing import Any

from kcl_daemon.core.leases import restart_grace
from kcl_daemon.core.leases.expiry import LeaseObservations
from kcl_daemon.core.leases.held_scan import scan_news
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import CorruptLeaseItem
from kcl_daemon.core.leases.reconcile import LeaseWrite, WriteKind
from kcl_daemon.core.leases.taker import PlannedTake, TakeKind, TakePlan, next_taker_pass, plan_takes
from kcl_daemon.errors import KclError, LeaseConflict, LeaseUnreadable, TransientNetwork
from kcl_daemon.leases.coordinator_config import HeldLease, LeaseListeners
from kcl_daemon.leases.heartbeat import PerWorkerRenewal
from kcl_daemon.leases.lease_reads import LeaseReads
from kcl_daemon.metrics.observer import WorkerObserver
from kcl_daemon.retry import LEASE_IO

logger = logging.getLogger("kcl_daemon.leases.coordinator")


class Taking(LeaseReads):
    """The taker's passes and loop; the coordinator holds what it takes (:meth:`_hold`)."""

    listeners: LeaseListeners
    observer: WorkerObserver
    last_plan: TakePlan | None
    _io_pool: Executor
    _observations: LeaseObservations
    #: per-worker renewal's view of expiry (heartbeats folded in), else None
    _effective: LeaseObservations | None
    renewal: PerWorkerRenewal | None
    held: dict[str, HeldLease]
    _rng: Random
    _wall: Callable[[], float]
    _not_before: dict[str, float]
    _loop: asyncio.AbstractEventLoop | None

    def _hold(self, lease: Lease, sent_at: float, *, validated: bool = True) -> None:
        raise NotImplementedError  # the coordinator's

    def _lose(self, lease_key: str, why: str, *, level: int = logging.INFO) -> None:
        raise NotImplementedError  # the coordinator's

    async def take_once(self, *, steals: bool = True) -> TakePlan:
        """One taker pass: scan, then take (and, unless ``steals=False``, steal) what the plan says.
        Renewing per worker, a pass between full runs reads only the heartbeats when no lease can have
        come due (:meth:`~kcl_daemon.leases.lease_reads.LeaseReads._heartbeat_pass`)."""
        self._loop = asyncio.get_running_loop()
        if self.renewal is not None:
            quiet = await self._heartbeat_pass(self.renewal, full=steals)
            if quiet is not None:
                return quiet
        started = self._clock.monotonic()
        scan = await self._bounded(
            self._io_pool, self._table.list_leases, started + LEASE_IO.deadline_s * 2, "scan"
        )
        for problem in scan.skipped:
            logger.warning("skipping lease item: %s", problem)
        place: Sequence[Mapping[str, Any]] = ()
        if self.renewal is not None:  # the heartbeats, read after the leases (a failure skips the pass)
            place = await self._read_heartbeats(self.renewal, started + LEASE_IO.deadline_s * 2)
        now = self._clock.monotonic()
        self._observations = self._observations.observe(scan.leases, now)
        observations = self._observations
        if self.renewal is not None:
            self.renewal.observe_scan(scan, now, place)
            observations = self._effective = self._judge(self.renewal, scan.leases)  # lease_reads
            await self._per_worker_scan(scan.leases)
        failover_s = self.config.failover_s
        expired = frozenset(
            lease.lease_key
            for lease in scan.leases
            if lease.lease_owner is not None and observations.is_expired(lease.lease_key, now, failover_s)
        )
        self.observer.scanned(scan.leases, expired)
        plan = plan_takes(
            scan.leases,
            observations,
            self.config.worker_id,
            now,
            self.config.taker_config(),
            self._rng,
            steals=steals,
            graced=restart_grace.graced_leases(scan.leases, self._wall()),
        )
        self.last_plan = plan
        taken = await self.take_planned(plan.all)
        for planned in plan.evictions:
            await self._evict(planned)
        self._remember_scan(scan, now, plan, taken)
        return plan

    async def take_planned(self, planned_takes: Iterable[PlannedTake]) -> list[Lease]:
        """Take each planned lease, fenced on the counter it was planned on (a steal re-reads it first);
        returns those taken, held and announced to the listeners. A take that fails (another worker was
        first, an unreadable item, an error) is logged and skipped."""
        self._loop = asyncio.get_running_loop()
        taken_leases = []
        stolen: list[tuple[Lease, float]] = []
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
                self._not_before[taken.lease_key] = sent_at + self._victim_stops_s()
                stolen.append((taken, sent_at))
            logger.info("lease %s taken (%s): %s", taken.lease_key, planned.kind.value, planned.reason)
            self.observer.lease_taken(planned.kind.value)
            for listener in self.listeners.taken:
                listener(taken)
            taken_leases.append(taken)
        if stolen:  # renewing per worker: the victims read the notice with the heartbeats
            await self._publish_steals([lease for lease, _ in stolen], stolen[0][1])
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
        observations = self._observations if self._effective is None else self._effective
        dues = [observations.next_expiry(now, failover)]
        grace = self.config.taker_config().evict_after_s
        if grace is not None:
            dues.append(observations.next_expiry(now, failover + grace))
        return min((due for due in dues if due is not None), default=None)

    def _victim_stops_s(self) -> float:
        """How long a stolen lease waits before this worker delivers (the rule is LeaseTimings')."""
        timings = self.config.timings
        return timings.steal_quiet_s if self.renewal is None else timings.per_worker_steal_quiet_s

    async def _per_worker_scan(self, leases: Iterable[Lease]) -> None:
        """Per-worker renewal: no renewal write tells this worker that a held lease moved on, or that the
        3.x leader marked its hand-off, so each scan does (:func:`scan_news`); and no lease is taken
        before this worker's first heartbeat is confirmed (the others would see an owner without one)."""
        assert self.renewal is not None
        held = {key: kept.lease for key, kept in self.held.items()}
        news = scan_news(held, leases, self.config.worker_id)
        for key, why in news.lost:
            self._lose(key, why)
        for marked in news.marked:
            kept = self.held.get(marked.lease_key)
            if kept is not None:  # the hand-off watcher serves it as it serves a renewal that returned it
                self.held[marked.lease_key] = HeldLease(marked, kept.renewed_at, kept.failover_s)
                logger.info(
                    "lease %s: the leader marked its hand-off to %s", marked.lease_key, marked.lease_owner
                )
        if not self.renewal.ready():
            await self._call(self._io_pool, self.renewal.beat_now)

    async def _read_heartbeats(
        self, renewal: PerWorkerRenewal, deadline: float
    ) -> Sequence[Mapping[str, Any]]:
        """The heartbeat place's items, within the scan's deadline (not the lease table: its absence
        is no sign of the lease table's)."""
        try:
            async with asyncio.timeout(max(deadline - self._clock.monotonic(), 0.001)):
                return await self._call(self._io_pool, renewal.read_place)
        except TimeoutError:
            raise TransientNetwork("heartbeat scan: no answer before the taker pass's deadline") from None

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
                expiry_interval_s=self.pass_every_s(),
                earliest_due=self.next_expiry(),
            )
            full_due_at = step.full_due_at
            delay = step.wake_at - self._clock.monotonic()
            if delay <= 0:  # a pass slower than the interval (a large table): a pause, not the next scan
                delay = self.pass_every_s() / 2
            await self._clock.sleep(delay)
