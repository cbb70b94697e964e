"""The leader's lease assignment loop (Java's ``LeaseAssignmentManager``, contract §5.1).

Runs on every worker, works only on the leader. One run: scan the lease table and the worker metrics,
update the leader-local counter observations (a lease is expired when its counter has not changed for
the failover time on *our* clock), fold everything into :class:`LeaseView` / :class:`WorkerView`, ask
the pure decider for moves, and apply each move as one conditional write on what was read:

* an owned, live lease without a pending hand-off and a graceful move -> *initiate hand-off*
  (conditional on its owner and no ``checkpointOwner``);
* anything else -> *assign*, conditional on owner, ``checkpointOwner`` and the counter read, so two
  leaders deciding at once can never both move one lease: the table decides.

A pending hand-off is left alone until ``handoff timeout + failover`` has passed on the leader's clock
since it was first seen; after that the lease counts as expired and is reassigned with a plain assign,
which clears the stuck ``checkpointOwner`` (KCL#1718/#1729/#1743/#1765: a hand-off never stays stuck).
The worker serving a hand-off renews the lease until it completes it, so a pending hand-off whose
counter has not moved for the failover time is expired at once: its serving worker died (waiting the
hand-off's time for it kept a killed worker's shard idle for half a minute in the chaos runs). A pending
hand-off to a worker judged dead is placed at once too, by a plain assign to a live worker, instead of
being completed to the dead one and expiring there.

Runs are of two kinds (:mod:`kcl_daemon.core.leader.passes`): a *balance* pass every
``leaseAssignmentIntervalMillis`` (the decider's whole round, as Java), and in between an *expiry* pass
every ``min(1 s, failover / 10)`` and when the earliest observed lease comes due, which applies only
plain assignments of leases that must be placed now (unowned, expired, a stuck hand-off) and passes a
gone worker's finished (SHARD_END) lease to a live worker, whose cleanup deletes it. A dead worker (an
expired lease and no metrics since: :func:`~kcl_daemon.core.leader.passes.dead_workers`) is given
nothing, by any decider. So a dead worker's leases move one failover after their last renewal was seen,
not one to two assignment intervals later.

After three consecutive failed runs the leader releases its lock (Java's rule). A new leader runs at
once, and again one failover later (when the leases of a dead leader can first count as expired).
After each successful balance run the ``after_run`` hook (the table migration's leader step) is given
the run's report, whose ``live_owners`` are the owners of the leases that are not expired.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Executor
from typing import Any, TypeVar

from kcl_daemon.clock import Clock, sleep_unless_set
from kcl_daemon.core.leader.decider import (
    Decider,
    DeciderState,
    LeaseView,
    Move,
    WorkerState,
    WorkerView,
)
from kcl_daemon.core.leader.heartbeat_expiry import expiry_view
from kcl_daemon.core.leader.passes import (
    PassKind,
    dead_workers,
    earliest_due,
    expiry_moves,
    finished_lease_moves,
    must_place,
    next_balance_at,
    next_pass_at,
    plan_pass,
    quiet_workers,
    still_arriving,
    with_lease_graces,
)
from kcl_daemon.core.leader.worker_metrics import CPU, WorkerMetricStats, assignable
from kcl_daemon.core.leader.zones import WorkerExtras, WorkerExtrasError, extras_from_attribute
from kcl_daemon.core.leases.expiry import LeaseObservations
from kcl_daemon.core.leases.heartbeat import HeartbeatObservations, workers_of
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import ScanResultLike
from kcl_daemon.core.leases.restart_grace import graced_leases, restarting_owners
from kcl_daemon.errors import KclError, LeaseConflict
from kcl_daemon.leader.assignment_config import AssignmentConfig, RunReport
from kcl_daemon.leader.election import LeaderElection
from kcl_daemon.leader.fallback import FallbackTaker
from kcl_daemon.leader.ports import AssignmentTable, FleetMetricsSource, HeartbeatSource
from kcl_daemon.metrics.observer import NULL_WORKER_OBSERVER, WorkerObserver

logger = logging.getLogger(__name__)
T = TypeVar("T")
MAX_FAILED_RUNS = 3
FleetObserver = Callable[[ScanResultLike, Sequence[Mapping[str, Any]], float, "str | None"], Awaitable[None]]


class AssignmentLoop:
    def __init__(
        self,
        table: AssignmentTable,
        metrics: FleetMetricsSource,
        election: LeaderElection,
        decider: Decider,
        config: AssignmentConfig,
        clock: Clock,
        pool: Executor,
        *,
        wall: Callable[[], float] = time.time,
        heartbeats: HeartbeatSource | None = None,
    ) -> None:
        """``heartbeats``: where the workers' heartbeats are, when this worker renews per worker
        (``leaseRenewal = PER_WORKER``): expiry is then judged through them (None: counters only)."""
        self.config = config
        self.decider = decider
        self._heartbeats = heartbeats
        self._beats = HeartbeatObservations()
        #: what expiry is judged by: the counters, vouched by the owners' heartbeats (per worker)
        self._view = LeaseObservations()
        self.last: RunReport | None = None
        self._table = table
        self._metrics = metrics
        self._election = election
        self._clock = clock
        self._pool = pool
        self._wall = wall
        self._observations = LeaseObservations()
        self._handoff_seen: dict[str, float] = {}
        self._state = DeciderState()
        self._failures = 0
        self._leader_since: float | None = None
        self._balance_due_at = 0.0
        self._earliest_due: float | None = None
        self._entries: list[WorkerMetricStats] | None = None  # the last balance pass's metrics scan
        self._dead: dict[str, float] = {}
        self._quiet: frozenset[str] = frozenset()
        #: workers a lease of which marks their restart grace (for the log line when one appears)
        self._restarting: frozenset[str] = frozenset()
        #: the leases of the last scan that wait for their restarting owner: never moved, by any decider
        self._graced: frozenset[str] = frozenset()
        #: leases this leader assigned to another kcl-daemon worker: key -> (worker, counter after, sent at)
        self._assigned: dict[str, tuple[str, int, float]] = {}
        self._ours: set[str] = set()
        #: lease key -> (the worker serving it, when this leader saw it change to that worker; None when
        #: first seen so): a lease moved to a Java worker gets time to be discovered (still_arriving)
        self._arrivals: dict[str, tuple[str | None, float | None]] = {}
        #: Told each scan (the fleet figures of kcl_daemon.metrics come from the leader in 3.x mode).
        self.observer: WorkerObserver = NULL_WORKER_OBSERVER
        #: awaited after each successful run while leading (the table migration's step)
        self.after_run: Callable[[RunReport], Awaitable[object]] | None = None
        #: Given each lease the leader assigned to itself, as the write returned it, with the write's send
        #: time (the coordinator's ``adopt_written``: the lease is held at once, validated by that write).
        self.adopt_own: Callable[[Lease, float], object] | None = None
        #: Told the workers that received leases in a run (the leader wakes its own lease discovery).
        self.on_assigned: Callable[[set[str]], None] | None = None
        #: A follower's fallback taker: given each OBSERVE scan, says when to scan next (None: the
        #: follower scans only while it suspects the leader)
        self.fallback: FallbackTaker | None = None
        self._watch_due_at = 0.0
        #: per-worker renewal: given each scan, the heartbeat place read after it, its time and the leader
        #: seen before it (the coordinator's ``observe_fleet``: foreign signs, leases lost or marked)
        self.observe_fleet: FleetObserver | None = None
        election.on_change.append(self._on_leadership)

    def _on_leadership(self, leading: bool) -> None:
        # Java forgets the previous run's state when leadership is (re)gained. The counter observations
        # are kept: each is what this worker saw on its own clock (as a follower's OBSERVE passes, or as
        # an earlier leader), and a counter still unchanged since was unchanged all along. Forgetting them
        # made a dead leader's leases due one failover after the lock was taken, not after they were
        # first seen.
        self._handoff_seen.clear()
        self._state = DeciderState()
        self._failures = 0
        self._leader_since = self._clock.monotonic() if leading else None
        self._balance_due_at = 0.0
        self._earliest_due = None
        self._entries = None
        self._dead = {}
        self._quiet = frozenset()
        self._restarting = frozenset()
        self._assigned = {}
        self._arrivals = {}

    async def _call(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    def worker_views(self, entries: Sequence[WorkerMetricStats], now_mono: float) -> list[WorkerView]:
        """The workers as the decider sees them (for the fallback taker's RESTARTING graces)."""
        return self._workers(entries, now_mono)

    def _workers(
        self, entries: Sequence[WorkerMetricStats], now_mono: float | None = None
    ) -> list[WorkerView]:
        """Assignable workers, plus those restarting within their grace (kcl-daemon's extra attribute).

        A grace is published in epoch seconds; the decider gets it on the monotonic clock of ``now_mono``.
        """
        now = self._wall()
        mono = self._clock.monotonic() if now_mono is None else now_mono
        views = []
        for stats in entries:
            try:
                extras = extras_from_attribute(stats.worker_id, stats.extra)
            except WorkerExtrasError as exc:
                logger.warning("assignment: %s; treating it as a plain worker", exc)
                extras = WorkerExtras()
            grace = extras.grace_until_epoch_s
            restarting = extras.state is WorkerState.RESTARTING and grace is not None and grace > now
            if not restarting and not assignable(stats, now, self.config.reporter_period_s):
                continue
            views.append(
                WorkerView(
                    stats.worker_id,
                    zone=extras.zone,
                    cpu_percent=stats.value(CPU),
                    capacity=extras.capacity,
                    state=extras.state
                    if restarting or extras.state is WorkerState.LEAVING
                    else WorkerState.ACTIVE,
                    grace_until=mono + (grace - now) if restarting and grace is not None else None,
                    last_update=stats.last_update_s,
                )
            )
        return views

    def _with_lease_graces(
        self, leases: Sequence[Lease], entries: Sequence[WorkerMetricStats], now: float
    ) -> list[WorkerView]:
        """The workers of the metrics ``entries``, RESTARTING where a lease marks its owner's restart
        grace (:mod:`kcl_daemon.core.leases.restart_grace`): read from the leases of this very scan, so a
        metrics read older than the worker's stop cannot make it look quiet or dead."""
        wall = self._wall()
        graces = {worker: now + (until - wall) for worker, until in restarting_owners(leases, wall).items()}
        self._graced = frozenset(graced_leases(leases, wall))
        for worker_id in graces.keys() - self._restarting:
            logger.info(
                "assignment: worker %s is restarting (its leases say so): they wait for it %.1fs",
                worker_id,
                graces[worker_id] - now,
            )
        self._restarting = frozenset(graces)
        return with_lease_graces(self._workers(entries, now), graces)

    def _views(self, leases: Sequence[Lease], now: float) -> tuple[list[LeaseView], set[str]]:
        """Lease views, and the keys whose pending hand-off must not be touched yet."""
        views = []
        frozen: set[str] = set()
        pending = {lease.lease_key for lease in leases if lease.checkpoint_owner is not None}
        for key in list(self._handoff_seen):
            if key not in pending:
                del self._handoff_seen[key]
        present = {lease.lease_key for lease in leases}
        for key in list(self._assigned):
            if key not in present:  # deleted (a finished shard cleaned up): nothing to watch
                del self._assigned[key]
        stuck_after = self.config.handoff_timeout_s + self.config.failover_s
        self._note_arrivals(leases, now)
        for lease in leases:
            expired = self._view.is_expired(lease.lease_key, now, self.config.failover_s)
            if expired and self._arriving(lease, now):
                expired = False
            if not expired and self._never_adopted(lease, now):
                expired = True
            if lease.checkpoint_owner is not None and lease.lease_owner is not None:
                first = self._handoff_seen.setdefault(lease.lease_key, now)
                if expired:
                    pass  # the worker serving it stopped renewing: it is dead, do not wait for it
                elif lease.lease_owner in self._dead:
                    expired = True  # its destination died: place it now (a plain assign clears the mark)
                elif now - first <= stuck_after:
                    frozen.add(lease.lease_key)
                else:
                    expired = True  # a stuck hand-off: reassign with a plain assign
            elif lease.checkpoint_owner is not None:
                expired = True  # a hand-off mark without an owner (not written by KCL): clear it
            views.append(
                LeaseView(
                    lease.lease_key,
                    lease.lease_owner,
                    lease.lease_counter,
                    expired=expired,
                    throughput_kbps=lease.throughput_kbps,
                    checkpoint_owner=lease.checkpoint_owner,
                    finished=lease.is_shard_end,
                    parent_keys=tuple(sorted(lease.parent_shard_ids)),
                )
            )
        return views, frozen

    def _note_arrivals(self, leases: Sequence[Lease], now: float) -> None:
        """Record when the worker serving each lease (its owner, or the hand-off's old owner while one is
        pending) changed; a lease seen for the first time has no arrival (it is not new to its owner)."""
        arrivals: dict[str, tuple[str | None, float | None]] = {}
        for lease in leases:
            serving = lease.checkpoint_owner or lease.lease_owner
            seen = self._arrivals.get(lease.lease_key)
            if seen is None:
                arrivals[lease.lease_key] = (serving, None)
            elif seen[0] != serving:
                arrivals[lease.lease_key] = (serving, now)
            else:
                arrivals[lease.lease_key] = seen
        self._arrivals = arrivals

    def _arriving(self, lease: Lease, now: float) -> bool:
        """A lease just moved to a worker that is not kcl-daemon's (a Java worker), which may not have
        discovered it yet: not expired (see :func:`still_arriving`)."""
        owner = lease.lease_owner
        if owner is None or lease.checkpoint_owner is not None or owner in self._ours:
            return False
        seen = self._arrivals.get(lease.lease_key)
        arrived_at = seen[1] if seen is not None and seen[0] == owner else None
        return still_arriving(arrived_at, now, self.config.failover_s)

    def _never_adopted(self, lease: Lease, now: float) -> bool:
        """A lease this leader assigned to another kcl-daemon worker that has not renewed it for half a
        failover: that worker never adopted it (dead, or cut off), so it is placed again now.

        Safe because a kcl-daemon worker delivers an adopted lease's records only once a write of its
        own on the lease is confirmed, which changes the counter; if the assign that moves it again
        lands first, that write fails and nothing was delivered. Java workers are left to expire: they
        discover assignments only every half assignment interval and may process before renewing."""
        assigned = self._assigned.get(lease.lease_key)
        if assigned is None:
            return False
        worker, counter, sent_at = assigned
        if lease.lease_owner != worker or lease.lease_counter != counter or lease.checkpoint_owner:
            del self._assigned[lease.lease_key]  # adopted (or moved on): nothing to watch
            return False
        if now - sent_at <= self.config.failover_s / 2:
            return False
        del self._assigned[lease.lease_key]
        logger.info(
            "lease %s: %s has not adopted it in %.1fs (never renewed): placing it again",
            lease.lease_key,
            worker,
            now - sent_at,
        )
        return True

    async def _observe(self, scan: ScanResultLike, place: Sequence[Mapping[str, Any]], now: float) -> None:
        """Record the counters (and the heartbeats) a scan saw; the expiry view follows."""
        self._observations = self._observations.observe(scan.leases, now)
        if self._heartbeats is not None:
            self._beats = self._beats.observe(workers_of(scan, place), now)
        self._view = expiry_view(
            scan.leases, self._observations, self._beats, per_worker=self._heartbeats is not None
        )

    def _leader_seen(self) -> str | None:
        return self._election.worker_id if self._election.is_leader() else self._election.leader_seen

    async def run_once(self, kind: PassKind = PassKind.BALANCE) -> RunReport:
        # the leader as known before the scan: its heartbeat, if it has one, is in the place read after
        leader = None if self.observe_fleet is None else self._leader_seen()
        scan = await self._call(self._table.list_leases)
        # per worker: the heartbeats, read after the leases (a failed read fails the pass)
        place = () if self._heartbeats is None else await self._call(self._heartbeats.heartbeat_items)
        if kind is PassKind.OBSERVE:  # a follower: only record the counters
            now = self._clock.monotonic()
            for problem in scan.skipped:
                logger.debug("observing: skipping item: %s", problem)
            await self._observe(scan, place, now)
            if self.observe_fleet is not None:
                await self.observe_fleet(scan, place, now, leader)
            self.last = RunReport(len(scan.leases), kind=kind)
            if self.fallback is not None:
                suspect = self._election.leader_suspect()
                wake = await self.fallback.after_scan(scan.leases, self._view, now, leader_suspect=suspect)
                self._watch_due_at = min(self._watch_due_at, wake)
            return self.last
        if kind is PassKind.BALANCE or self._entries is None:
            entries, problems = await self._call(self._metrics.scan)
            self._entries = list(entries)
            # kcl-daemon workers publish their extras on the item (Java workers do not)
            self._ours = {stats.worker_id for stats in entries if stats.extra is not None}
            kind = PassKind.BALANCE
        else:
            entries, problems = self._entries, []
        for problem in [*scan.skipped, *problems]:
            logger.warning("assignment: skipping item: %s", problem)
        now = self._clock.monotonic()
        await self._observe(scan, place, now)
        if self.observe_fleet is not None:
            await self.observe_fleet(scan, place, now, leader)
        self._earliest_due = earliest_due(scan.leases, self._view, self.config.failover_s, now)
        views, frozen = self._views(scan.leases, now)
        workers = self._live_workers(views, self._with_lease_graces(scan.leases, entries, now), now)
        report = RunReport(len(views), len(workers), kind=kind)
        report.live_owners = frozenset(v.owner for v in views if v.owner is not None and not v.expired)
        by_key = {lease.lease_key: lease for lease in scan.leases}
        finished = finished_lease_moves(views, workers)
        if kind is PassKind.EXPIRY and not finished and not (must_place(views) - frozen - self._graced):
            self.last = report
            return report  # nothing to place: the common case, one scan and no decision
        decision = self.decider.decide(views, workers, now, self._state, self.config.decider)
        if kind is PassKind.BALANCE:
            self._state = decision.state
            decided = list(decision.moves)
            self.observer.scanned(
                scan.leases, frozenset(v.lease_key for v in views if v.expired and v.owner is not None)
            )
        else:
            decided = expiry_moves(decision.moves, views)
        expired = {view.lease_key for view in views if view.expired or view.owner is None}
        # The loop's own safety net, whatever the decider: a pending hand-off within its time, a lease
        # waiting for its restarting owner, a lease that vanished, a finished (SHARD_END) lease (but see
        # finished_lease_moves) and a move to a worker judged dead are never applied.
        live_ids = {w.worker_id for w in workers}
        moves = [
            m
            for m in decided
            if m.lease_key not in frozen
            and m.lease_key not in self._graced
            and m.lease_key in by_key
            and not by_key[m.lease_key].is_shard_end
            and m.to_worker in live_ids
        ]
        moves += finished
        report.moves = moves
        results = await asyncio.gather(
            *(self._apply(by_key[m.lease_key], m, m.lease_key in expired) for m in moves),
            return_exceptions=True,
        )
        for move, result in zip(moves, results, strict=True):
            if isinstance(result, LeaseConflict):
                report.conflicts += 1
                logger.info("move of %s to %s not applied: %s", move.lease_key, move.to_worker, result)
            elif isinstance(result, BaseException):
                raise result
            else:
                report.applied += 1
                report.applied_moves.append(move)
        receivers = {
            m.to_worker for m, r in zip(moves, results, strict=True) if not isinstance(r, BaseException)
        }
        if receivers and self.on_assigned is not None:
            self.on_assigned(receivers)
        if kind is PassKind.BALANCE:
            await self._clean_stale(entries)
        self.last = report
        if moves:
            logger.info(
                "assignment (%s): %d lease(s), %d worker(s): %d move(s) applied, %d conflict(s)",
                kind.value,
                report.leases,
                report.workers,
                report.applied,
                report.conflicts,
            )
        return report

    def _live_workers(
        self, views: Sequence[LeaseView], workers: list[WorkerView], now: float
    ) -> list[WorkerView]:
        """``workers`` without those judged dead (see :func:`dead_workers`); RESTARTING ones stay (the
        decider keeps their leases for them)."""
        offset = self._wall() - now  # monotonic -> epoch seconds
        last_change = {
            key: observed.changed_at + offset
            for key, observed in self._view.entries.items()
            if observed.changed_at != float("-inf")
        }
        dead = dead_workers(views, workers, last_change, self._dead)
        for worker_id in dead.keys() - self._dead.keys():
            logger.info(
                "assignment: worker %s looks dead (an expired lease, no metrics since): gets nothing",
                worker_id,
            )
        self._dead = dead
        quiet = quiet_workers(views, workers, last_change, now + offset, self.config.failover_s / 2)
        for worker_id in quiet - self._quiet - dead.keys():
            logger.info("assignment: worker %s renewed nothing for half a failover: gets nothing", worker_id)
        self._quiet = quiet
        return [w for w in workers if w.worker_id not in dead and w.worker_id not in quiet]

    async def _apply(self, lease: Lease, move: Move, expired: bool) -> None:
        if lease.lease_counter != move.lease_counter:
            raise LeaseConflict(f"decided on counter {move.lease_counter}, read {lease.lease_counter}")
        graceful = (
            move.graceful
            and self.config.graceful_handoff
            and not expired
            and lease.lease_owner is not None
            and lease.checkpoint_owner is None
            and not lease.is_shard_end
        )
        if graceful:
            await self._call(functools.partial(self._table.initiate_handoff, lease, move.to_worker))
            logger.info(
                "hand-off of %s: %s -> %s (%s)",
                lease.lease_key,
                lease.lease_owner,
                move.to_worker,
                move.reason,
            )
        else:
            sent_at = self._clock.monotonic()
            assigned = await self._call(functools.partial(self._table.assign, lease, move.to_worker))
            if self.adopt_own is not None and move.to_worker == self._election.worker_id:
                self.adopt_own(assigned, sent_at)  # its own: held and deliverable at once, no discovery
            elif move.to_worker in self._ours:
                self._assigned[lease.lease_key] = (move.to_worker, assigned.lease_counter, sent_at)
            logger.info(
                "assigned %s: %s -> %s (%s)", lease.lease_key, lease.lease_owner, move.to_worker, move.reason
            )

    async def _clean_stale(self, entries: Sequence[WorkerMetricStats]) -> None:
        now = self._wall()
        for stats in entries:
            if stats.last_update_s is not None and now - stats.last_update_s > self.config.stale_metrics_s:
                try:
                    await self._call(
                        functools.partial(self._metrics.delete_stale, stats.worker_id, stats.last_update_s)
                    )
                except KclError as exc:
                    logger.debug("stale worker metrics of %s not deleted: %s", stats.worker_id, exc)

    async def _after(self, report: RunReport) -> None:
        assert self.after_run is not None
        try:
            await self.after_run(report)
        except (KclError, ValueError) as exc:  # never counts as a failed assignment run
            logger.warning("after the assignment run: %s", exc)

    def _next_sleep(self) -> float:
        interval = self.config.interval_s
        since = self._leader_since
        if since is not None:
            first_expiry = since + self.config.failover_s + 0.1
            now = self._clock.monotonic()
            if now < first_expiry:
                return min(interval, first_expiry - now)
        return interval

    def _next_wake(self) -> float:
        """Seconds until the next pass: the expiry interval, sooner for a balance round or a lease due."""
        now = self._clock.monotonic()
        if not self._election.is_leader():
            if self.fallback is None:
                return self.config.expiry_s
            return max(min(self.config.expiry_s, self._watch_due_at - now), 0.0)
        wake = next_pass_at(
            now,
            leading=True,
            balance_due_at=self._balance_due_at,
            earliest_due=self._earliest_due,
            interval_s=self.config.expiry_s,
        )
        return max(wake - now, 0.0)

    async def run(self) -> None:
        while True:
            self._election.gained.clear()
            now = self._clock.monotonic()
            leading = self._election.is_leader()
            kind = plan_pass(
                now,
                leading=leading,
                balance_due_at=self._balance_due_at,
                suspicious=not leading and self._election.leader_suspect(),
                watch_due_at=None if self.fallback is None else self._watch_due_at,
            )
            if kind is not None:
                try:
                    if kind is PassKind.OBSERVE and self.fallback is not None:
                        self._watch_due_at = now + self.fallback.watch_s
                    if kind is PassKind.BALANCE:
                        self._balance_due_at = now + self._next_sleep()
                    report = await self.run_once(kind)
                    self._failures = 0
                    if report.kind is PassKind.BALANCE:
                        catch_up = next_balance_at(
                            now, self.config.interval_s, self.config.failover_s, report.applied_moves
                        )
                        self._balance_due_at = min(self._balance_due_at, catch_up)
                    if (
                        report.kind is PassKind.BALANCE
                        and self.after_run is not None
                        and self._election.is_leader()
                    ):
                        await self._after(report)
                except KclError as exc:
                    if kind is not PassKind.BALANCE:  # the next one is a second away; balance runs count
                        logger.info("%s pass failed: %s", kind.value, exc)
                        await sleep_unless_set(self._clock, self.config.expiry_s, self._election.gained)
                        continue
                    self._failures += 1
                    logger.warning("assignment run failed (%d in a row): %s", self._failures, exc)
                    if self._failures >= MAX_FAILED_RUNS:
                        await self._election.release(f"{MAX_FAILED_RUNS} assignment runs failed in a row")
            await sleep_unless_set(self._clock, self._next_wake(), self._election.gained)
