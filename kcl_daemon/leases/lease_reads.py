"""Renewing per worker: the taker passes that read only the heartbeats, and the thief's steal notices.

The shell around :mod:`kcl_daemon.core.leases.lease_reads`. Between full runs a pass of a worker
renewing per worker reads the heartbeat place (every
:attr:`~kcl_daemon.core.leases.timings.LeaseTimings.heartbeat_read_s`, and when the first lease seen
would expire) and scans the lease table only when something may have come due, leases are in motion,
or the worker items changed (:func:`~kcl_daemon.core.leases.lease_reads.lease_scan_reason`,
:func:`~kcl_daemon.core.leases.lease_reads.fleet_change`); the heartbeat read also carries the steal
notices of the other workers, which tell this one of a held lease stolen. After a steal, the thief
writes its notice with an immediate heartbeat. A mixin of
:class:`~kcl_daemon.leases.coordinator.LeaseCoordinator`, through
:class:`~kcl_daemon.leases.taking.Taking`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor
from typing import Any

from kcl_daemon.core.leases.expiry import LeaseObservations
from kcl_daemon.core.leases.heartbeat import vouched
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import ScanResultLike
from kcl_daemon.core.leases.lease_reads import (
    LastScan,
    judged,
    lease_scan_reason,
    noticed_losses,
    scan_due_at,
)
from kcl_daemon.core.leases.taker import TakePlan
from kcl_daemon.leases.coordinator_config import HeldLease
from kcl_daemon.leases.fenced_writes import FencedWrites
from kcl_daemon.leases.heartbeat import PerWorkerRenewal
from kcl_daemon.retry import LEASE_IO

logger = logging.getLogger("kcl_daemon.leases.coordinator")


class LeaseReads(FencedWrites):
    """Which passes read the lease table, renewing per worker; the steal notices."""

    renewal: PerWorkerRenewal | None
    held: dict[str, HeldLease]
    last_plan: TakePlan | None
    _io_pool: Executor
    _observations: LeaseObservations
    _effective: LeaseObservations | None
    _not_before: dict[str, float]
    #: the last lease scan (renewing per worker), for the passes that read only the heartbeats
    _last_scan: LastScan | None = None
    #: passes that read only the heartbeats, and lease scans, since the start (logs, tests)
    heartbeat_passes: int = 0
    lease_scans: int = 0

    def _lose(self, lease_key: str, why: str, *, level: int = logging.INFO) -> None:
        raise NotImplementedError  # the coordinator's

    async def _per_worker_scan(self, leases: Iterable[Lease]) -> None:
        raise NotImplementedError  # Taking's

    async def _read_heartbeats(
        self, renewal: PerWorkerRenewal, deadline: float
    ) -> Sequence[Mapping[str, Any]]:
        raise NotImplementedError  # Taking's

    def pass_every_s(self) -> float:
        """How often the taker passes between full runs: the heartbeat reads' period renewing per
        worker, else the expiry passes'."""
        if self.renewal is not None and self.renewal.per_worker:
            return self.config.timings.heartbeat_read_s
        return self.config.expiry_pass_s

    async def _heartbeat_pass(self, renewal: PerWorkerRenewal, *, full: bool) -> TakePlan | None:
        """A pass that reads only the heartbeats, when no lease scan is needed: the steal notices are
        read, the heartbeats observed and the mode decided, the leases' expiry re-read through them.
        None: this pass scans the lease table (the caller's full pass)."""
        last, now = self._last_scan, self._clock.monotonic()
        me, failover_s = self.config.worker_id, self.config.failover_s
        due = None
        if last is not None and renewal.per_worker:
            evict = self.config.taker_config().evict_after_s
            due = scan_due_at(self._vouched(renewal, last), renewal.beats, last, me, failover_s, evict)
        reason = lease_scan_reason(per_worker=renewal.per_worker, full=full, last=last, due_at=due, now=now)
        if reason is not None or last is None:
            logger.debug("taker pass scans the lease table: %s", reason)
            return None
        place = await self._read_heartbeats(renewal, now + LEASE_IO.deadline_s * 2)
        items = list(place)
        held = {key: kept.lease for key, kept in self.held.items()}
        for key, why in noticed_losses(held, items, me):
            self._lose(key, why)
        change = renewal.observe_beats(last, items, self._clock.monotonic())
        if change is not None or not renewal.per_worker:
            logger.debug("taker pass scans the lease table: %s", change or "this worker fell back")
            return None
        self._effective = self._vouched(renewal, last)
        self.heartbeat_passes += 1
        await self._per_worker_scan(())  # no lease judged: only the first heartbeat before any take
        plan = self.last_plan
        assert plan is not None  # set by the lease scan that set _last_scan
        return dataclasses.replace(
            plan, takes=(), steals=(), evictions=(), summary="heartbeats read; no lease due"
        )

    def _vouched(self, renewal: PerWorkerRenewal, last: LastScan) -> LeaseObservations:
        return self._judge(renewal, last.leases)

    def _judge(self, renewal: PerWorkerRenewal, leases: Iterable[Lease]) -> LeaseObservations:
        """The leases' expiry through their owners' heartbeats (:func:`judged`; the counters' rule
        too once this worker fell back)."""
        if not renewal.per_worker:
            return vouched(leases, self._observations, renewal.beats)
        return judged(leases, self._observations, renewal.beats)

    def _remember_scan(self, scan: ScanResultLike, at: float, plan: TakePlan, taken: Iterable[Lease]) -> None:
        """Renewing per worker: keep the lease scan just planned on (with this worker's own takes
        applied) for the passes that read only the heartbeats."""
        self.lease_scans += 1
        if self.renewal is None:
            return
        mine = {lease.lease_key: lease for lease in taken}
        self._last_scan = LastScan(
            at=at,
            leases=tuple(mine.get(lease.lease_key, lease) for lease in scan.leases),
            workers=tuple(getattr(scan, "workers", ())),
            in_motion=bool(plan.takes or plan.evictions),
        )

    async def _publish_steals(self, stolen: Iterable[Lease], sent_at: float) -> None:
        """Renewing per worker: write this worker's steal notices now, with a heartbeat, so that each
        victim reads it at its next heartbeat read; the stolen leases deliver nothing for the quiet time
        from its confirmation. Unconfirmed, a victim may learn only from its next full run: the stolen
        leases then wait for that too."""
        renewal = self.renewal
        if renewal is None or not renewal.per_worker:
            return
        stolen = list(stolen)
        for lease in stolen:
            renewal.publish_steal(lease.lease_key, lease.lease_counter, sent_at)
        timings = self.config.timings
        if await self._call(self._io_pool, renewal.beat_now):
            # the quiet time runs from the notice's confirmation, which a slow write may delay
            written = self._clock.monotonic()
            for lease in stolen:
                not_before = self._not_before.get(lease.lease_key, written)
                self._not_before[lease.lease_key] = max(
                    not_before, written + timings.per_worker_steal_quiet_s
                )
            return
        for lease in stolen:
            logger.warning(
                "lease %s: the steal notice was not written; its shard waits a full run", lease.lease_key
            )
            self._not_before[lease.lease_key] = (
                sent_at + timings.take_every_s + timings.per_worker_steal_quiet_s
            )
