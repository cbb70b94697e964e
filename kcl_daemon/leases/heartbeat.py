"""Per-worker lease renewal at run time (``leaseRenewal = PER_WORKER``): the heartbeat thread, the mode,
and what each taker scan says about the fleet.

The shell around :mod:`kcl_daemon.core.leases.heartbeat`. A ``lease-heartbeat`` thread (on the system
clock; on a fake clock the caller drives :meth:`PerWorkerRenewal.tick`) writes this worker's heartbeat
once per renewal period, on the lease keeper's own table client, and tells the keeper each confirmed
one (:meth:`~kcl_daemon.leases.keeper.LeaseKeeper.vouch`): that is the renewal of every lease it holds.
A failed write is tried again at once, then after 50, 100, ... 500 ms; the leases then run towards
their own deadlines exactly as when renewals fail.

Each 2.x taker scan (in 3.x mode: each scan of the assignment loop, the leader's passes and a
follower's watch; :meth:`~kcl_daemon.leases.coordinator.LeaseCoordinator.observe_fleet`) reads the
heartbeat place too (:meth:`PerWorkerRenewal.read_place`: the
worker-metrics table, where the heartbeats and the Java 3.x workers' metrics reports are; a pass whose
read fails takes nothing) and goes through :meth:`PerWorkerRenewal.observe_scan`: the heartbeats are
observed and the mode decided (the taker then reads the leases' expiry through them). At the first foreign
sign the worker falls back for good: a WARNING with the reason, every held lease renewed at once and per
lease from then on, and, a renewal period later, its heartbeat item deleted, so the rest of the fleet sees
an owner without one and follows. A worker that stops (its thread ends) deletes its item too, so a fleet
restarted with the key off is left with none.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from kcl_daemon.core.leases.heartbeat import (
    CorruptWorkerItem,
    HeartbeatObservations,
    ModeDecision,
    RenewalMode,
    WorkerItem,
    decide,
    settle,
    workers_of,
)
from kcl_daemon.core.leases.lease_codec import ScanResultLike
from kcl_daemon.core.leases.lease_reads import LastScan, StealNotice, fleet_change, live_notices
from kcl_daemon.errors import KclError, LeaseConflict
from kcl_daemon.leases.keeper import LeaseKeeper

logger = logging.getLogger(__name__)

BACKOFF_S = 0.05
BACKOFF_MAX_S = 0.5


class HeartbeatTable(Protocol):
    def heartbeat(
        self, worker_id: str, mode: RenewalMode, notices: Mapping[str, StealNotice] | None = None
    ) -> WorkerItem: ...

    def withdraw_heartbeat(self, worker_id: str) -> bool: ...

    def heartbeat_items(self) -> Sequence[Mapping[str, Any]]: ...


class PerWorkerRenewal:
    def __init__(
        self,
        table: HeartbeatTable,
        keeper: LeaseKeeper,
        worker_id: str,
        failover_s: float,
        period_s: float,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        notice_keep_s: float | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.failover_s = failover_s
        self.period_s = period_s
        self.decision = ModeDecision(RenewalMode.PER_WORKER, "leaseRenewal is PER_WORKER")
        self.beats = HeartbeatObservations()
        #: send time of the last confirmed heartbeat (None: none yet)
        self.last_beat_at: float | None = None
        self.beats_written = 0
        self._table = table
        self._keeper = keeper
        self._monotonic = monotonic
        self._next_at = float("-inf")
        self._failures = 0
        #: after a fall-back: the heartbeat item is deleted (or left, being more than a heartbeat)
        self.withdrawn = False
        #: a graceful stop that keeps its leases for a restart (restart grace): the item stays on stopping,
        #: standing still, so the leases still named on this worker have an owner with a heartbeat item
        self.keep_item_on_stop = False
        self._lock = threading.Lock()  # one heartbeat write at a time
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        keeper.per_worker = True
        #: this worker's steal notices (kcl_daemon.core.leases.lease_reads), written with each heartbeat
        self.notices: dict[str, StealNotice] = {}
        self._notices_lock = threading.Lock()  # the loop adds, the heartbeat thread prunes
        self.notice_keep_s = 2 * failover_s if notice_keep_s is None else notice_keep_s

    @property
    def per_worker(self) -> bool:
        return self.decision.mode is RenewalMode.PER_WORKER

    def ready(self) -> bool:
        """Whether leases may be taken: a heartbeat is confirmed (or the worker renews per lease)."""
        return not self.per_worker or self.last_beat_at is not None

    # -- the heartbeat -------------------------------------------------------------------------------

    def tick(self) -> float:
        """Write the heartbeat if it is due; returns when the next one is (monotonic)."""
        with self._lock:
            if self._monotonic() < self._next_at:
                return self._next_at
            self._beat()
            return self._next_at

    def beat_now(self) -> bool:
        """Write a heartbeat now (before the first take); whether it was confirmed."""
        with self._lock:
            self._beat()
            return self.last_beat_at is not None

    def _beat(self) -> None:
        if not self.per_worker:
            self._withdraw()
            return
        mode = self.decision.mode
        sent_at = self._monotonic()
        try:
            with self._notices_lock:
                notices = self.notices = live_notices(self.notices, sent_at, self.notice_keep_s)
            self._table.heartbeat(self.worker_id, mode, notices)
        except LeaseConflict as exc:
            self.fall_back(f"this worker's heartbeat item cannot be written ({exc})")
            self._next_at = sent_at + self.period_s
            return
        except (KclError, CorruptWorkerItem) as exc:
            self._retry_after(f"heartbeat of worker {self.worker_id} failed, trying again: {exc}")
            return
        self._failures = 0
        self.beats_written += 1
        self.last_beat_at = sent_at
        self._next_at = sent_at + self.period_s
        if mode is RenewalMode.PER_WORKER and self.per_worker:
            self._keeper.vouch(sent_at)

    def _withdraw(self) -> None:
        """Fallen back: delete the heartbeat item once (the others see an owner without one); a
        vanished heartbeat stands still for them, so the leases it kept are safe until renewed."""
        if self.withdrawn:
            self._next_at = float("inf")
            return
        try:
            deleted = self._table.withdraw_heartbeat(self.worker_id)
        except KclError as exc:
            self._retry_after(f"deleting the heartbeat item of worker {self.worker_id} failed: {exc}")
            return
        self.withdrawn = True
        self._next_at = float("inf")
        logger.info(
            "worker %s: heartbeat item %s",
            self.worker_id,
            "withdrawn" if deleted else "not withdrawn (gone, or written as a lease by another worker)",
        )

    def _retry_after(self, what: str) -> None:
        self._failures += 1
        logger.log(logging.WARNING if self._failures == 1 else logging.DEBUG, "%s", what)
        backoff = 0.0 if self._failures == 1 else BACKOFF_S * 2 ** (self._failures - 2)
        self._next_at = self._monotonic() + min(backoff, BACKOFF_MAX_S)

    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                wake = self.tick()
            except Exception:  # a bug: never let the heartbeat die silently
                logger.exception("the lease heartbeat failed unexpectedly; going on")
                wake = self._monotonic() + BACKOFF_MAX_S
            self._stop.wait(min(max(wake - self._monotonic(), 0.0), BACKOFF_MAX_S))
        # stopping (the worker shuts down): take the item away, so that a fleet whose workers restart
        # with the key off is left with none (a SIGKILLed worker's stays, standing still)
        with self._lock:
            if self.keep_item_on_stop and not self.withdrawn:
                logger.info("worker %s: heartbeat item kept for the restart grace", self.worker_id)
                return
            try:
                if not self.withdrawn and self._table.withdraw_heartbeat(self.worker_id):
                    logger.info("worker %s: heartbeat item withdrawn on stopping", self.worker_id)
                self.withdrawn = True
            except KclError as exc:
                logger.info("worker %s: heartbeat item not withdrawn on stopping: %s", self.worker_id, exc)

    # -- the fleet ------------------------------------------------------------------------------------

    def read_place(self) -> Sequence[Mapping[str, Any]]:
        """The heartbeat place's items (blocking; a failure raises, and the taker pass takes nothing)."""
        return self._table.heartbeat_items()

    def observe_scan(
        self,
        scan: ScanResultLike,
        now: float,
        place: Sequence[Mapping[str, Any]] = (),
        *,
        leader: str | None = None,
    ) -> None:
        """Observe the heartbeats a taker scan read (the lease table's worker items and ``place``'s,
        read just after it) and decide the mode; the leases' expiry through the heartbeats is then the
        taker's to judge (:meth:`~kcl_daemon.leases.lease_reads.LeaseReads._judge`). ``leader``: the
        3.x leader as seen before the scan (3.x mode; see
        :func:`~kcl_daemon.core.leases.heartbeat.foreign_signs`)."""
        self.beats = self.beats.observe(workers_of(scan, place, on_corrupt=_skipping), now)
        decided = decide(
            RenewalMode.PER_WORKER,
            scan.leases,
            self.beats,
            self.worker_id,
            now,
            self.failover_s,
            leader=leader,
        )
        if self.per_worker and decided.mode is RenewalMode.PER_LEASE:
            self.fall_back(decided.reason)

    def fall_back(self, reason: str) -> None:
        """Back to per-lease renewals for the life of the process (idempotent)."""
        if not self.per_worker:
            return
        self.decision = settle(self.decision, ModeDecision(RenewalMode.PER_LEASE, reason))
        logger.warning(
            "leaseRenewal PER_WORKER: worker %s falls back to per-lease renewals (every held lease "
            "renewed now) and deletes its heartbeat item, which puts the fleet back too: %s",
            self.worker_id,
            reason,
        )
        self._keeper.renew_each()
        self._failures = 0
        # the item goes after one renewal period, when every lease it kept has been renewed per lease
        self._next_at = self._monotonic() + self.period_s

    # -- the passes between lease scans (kcl_daemon.leases.lease_reads) ------------------------------

    def publish_steal(self, lease_key: str, lease_counter: int, at: float) -> None:
        """Note a steal: its notice goes out with the next heartbeat (the thief writes one at once)."""
        with self._notices_lock:
            self.notices = {**self.notices, lease_key: StealNotice(lease_counter, at)}

    def observe_beats(self, last: LastScan, place: Sequence[Mapping[str, Any]], now: float) -> str | None:
        """A taker pass that read only the heartbeat place (``last``: the last lease scan, whose own
        worker items are carried on): observe the heartbeats; returns how the worker items changed
        other than by advancing, and then the pass scans the lease table and decides the mode on it;
        else the mode is decided here, on ``last``'s leases (whose owners' items are all as then)."""
        before, self.beats = (
            self.beats,
            self.beats.observe(workers_of(last, place, on_corrupt=_skipping), now),
        )
        change = fleet_change(before, self.beats)
        if change is None:
            decided = decide(
                RenewalMode.PER_WORKER, last.leases, self.beats, self.worker_id, now, self.failover_s
            )
            if self.per_worker and decided.mode is RenewalMode.PER_LEASE:
                self.fall_back(decided.reason)
        return change


def _skipping(exc: CorruptWorkerItem) -> None:
    logger.warning("skipping worker item: %s", exc)
