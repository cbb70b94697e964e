"""When the leader scans the lease table, and what each scan may change (pure).

Java's leader runs one kind of round, every ``leaseAssignmentIntervalMillis`` (2 x failover by
default): a dead worker's lease is seen expired only at the round after it expired, up to two intervals
after the death. kcl-daemon's leader runs three kinds of pass (:class:`PassKind`):

* ``BALANCE``, every ``leaseAssignmentIntervalMillis``: the decider's whole round (placement, hand-offs,
  load moves), as Java; after a round that handed leases off by count, a catch-up round follows half a
  failover later (:func:`next_balance_at`);
* ``EXPIRY``, in between, every :func:`expiry_interval_for` the failover time (``min(1 s, failover /
  10)``) and also at the moment the earliest observed lease comes due: only leases that must be placed
  now (unowned, expired, a hand-off stuck past its time) move, and a dead worker's finished
  (SHARD_END) lease is passed to a live worker, whose cleanup deletes it. Nothing that is being served
  moves, so these passes cost one scan and never disturb the fleet;
* ``OBSERVE``, on a follower that has seen the leader's lock miss a heartbeat
  (:func:`~kcl_daemon.core.leader.leader_lock.leader_suspect`): the scan only records counter
  changes, so that if this worker takes the lock over, the dead leader's leases come due one failover
  after they were first seen here, not one failover after the lock was taken. A follower also observes
  every :func:`~kcl_daemon.core.leader.fallback.watch_interval_s` (half the failover) while the
  leader looks alive, and takes itself the leases no leader reassigns in time (the fallback taker).

A worker learns of a lease assigned to it through lease discovery, which runs at the same expiry
interval (a KEYS_ONLY query of the owner index); the leader adopts its own assignments at once.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Final

from kcl_daemon.core.leader.decider import LeaseView, Move, WorkerState, WorkerView
from kcl_daemon.core.leases.expiry import LeaseObservations
from kcl_daemon.core.leases.lease import Lease


class PassKind(enum.StrEnum):
    BALANCE = "balance"
    EXPIRY = "expiry"
    OBSERVE = "observe"


def plan_pass(
    now: float,
    *,
    leading: bool,
    balance_due_at: float,
    suspicious: bool,
    watch_due_at: float | None = None,
) -> PassKind | None:
    """The pass to run at ``now``: the leader balances when due and checks expiries otherwise; a follower
    observes while the leader looks dead, and when its watch scan is due (``watch_due_at``, None: no
    watch; see :mod:`~kcl_daemon.core.leader.fallback`); None: nothing to scan."""
    if leading:
        return PassKind.BALANCE if now >= balance_due_at else PassKind.EXPIRY
    watching = watch_due_at is not None and now >= watch_due_at
    return PassKind.OBSERVE if suspicious or watching else None


def next_pass_at(
    now: float, *, leading: bool, balance_due_at: float, earliest_due: float | None, interval_s: float
) -> float:
    """When to look again: at the expiry interval, and sooner for a balance round or a lease coming due."""
    wake = now + interval_s
    if leading:
        wake = min(wake, balance_due_at)
        if earliest_due is not None and earliest_due > now:
            wake = min(wake, earliest_due)
    return wake


#: the reasons of count moves, which a catch-up round may go on with (load moves wait for new metrics)
CATCH_UP_REASONS: Final = frozenset({"over target", "worker leaving"})


def next_balance_at(now: float, interval_s: float, failover_s: float, applied: Iterable[Move]) -> float:
    """When the next balance round is due after one at ``now`` that applied ``applied``.

    Each round hands off at most ``maxHandoffsPerWorker`` leases per worker, so a worker joining a fleet
    of 64 leases took 16 rounds (five minutes at the defaults) to get its share. A round that handed
    leases off by count (over target, or a worker leaving) is followed by a *catch-up* round half a
    failover later, when those hand-offs are normally complete; load moves wait the whole interval for
    the workers' next metrics, so they cannot oscillate on stale figures."""
    if any(m.graceful and m.reason in CATCH_UP_REASONS for m in applied):
        return now + min(interval_s, failover_s / 2)
    return now + interval_s


def earliest_due(
    leases: Iterable[Lease], observations: LeaseObservations, failover_s: float, now: float
) -> float | None:
    """When the first owned, not yet expired lease would expire if its counter stays as seen."""
    owned = (lease.lease_key for lease in leases if lease.lease_owner is not None)
    return observations.next_expiry(now, failover_s, owned)


def must_place(views: Sequence[LeaseView]) -> frozenset[str]:
    """Leases an expiry pass may move: unowned or expired (a stuck hand-off counts as expired), live."""
    return frozenset(v.lease_key for v in views if not v.finished and (v.owner is None or v.expired))


def expiry_moves(moves: Iterable[Move], views: Sequence[LeaseView]) -> list[Move]:
    """Of a decider's round, the moves an expiry pass applies: plain assignments of leases that must be
    placed now, never a hand-off or a load move."""
    placeable = must_place(views)
    return [m for m in moves if m.lease_key in placeable and not m.graceful]


def finished_lease_moves(views: Sequence[LeaseView], workers: Sequence[WorkerView]) -> list[Move]:
    """A finished (SHARD_END) lease whose owner is gone - expired, or owned by no assignable worker - goes
    to the live worker with the fewest leases, which cleans it up as its own (contract §6.4). No other
    decider moves finished leases, and cleanup queues are per process: without this a dead worker's
    finished lease would stay in the table for ever."""
    members = sorted(w.worker_id for w in workers if w.state is not WorkerState.RESTARTING)
    if not members:
        return []
    restarting = {w.worker_id for w in workers if w.state is WorkerState.RESTARTING}
    load = dict.fromkeys(members, 0)
    for view in views:
        if view.owner in load and not view.finished:
            load[view.owner] += 1
    moves = []
    for view in sorted(views, key=lambda v: v.lease_key):
        if not view.finished or view.checkpoint_owner is not None:
            continue
        if view.owner in restarting:
            continue  # its owner is restarting within its grace: it cleans it up when back
        if view.owner in load and not view.expired:
            continue  # its owner lives and cleans it up
        if view.owner is not None and not view.expired:
            continue  # owned by a worker we do not see (yet): wait until it expires
        receiver = min(members, key=lambda w: (load[w], w))
        if receiver == view.owner:
            continue
        load[receiver] += 1
        moves.append(
            Move(
                view.lease_key,
                view.lease_counter,
                view.owner,
                receiver,
                False,
                "finished lease of a gone worker",
            )
        )
    return moves


def dead_workers(
    views: Sequence[LeaseView],
    workers: Sequence[WorkerView],
    last_change: Mapping[str, float],
    previous: Mapping[str, float],
) -> dict[str, float]:
    """Workers that get nothing, with the metrics time (epoch seconds) they were judged dead at.

    A worker is dead when it owns an expired lease (not in a hand-off) and has published no worker
    metrics since that lease's counter last changed (``last_change``: lease key -> epoch seconds): its
    metrics item stays fresh for two reporting periods after it died, and without this rule the leader
    gave a dead worker's expired lease back to it. A worker back from a restart publishes before it
    adopts, so its own still-expired leases do not condemn it; a RESTARTING worker is never dead (its
    grace decides). A dead worker stays dead, after its leases have gone elsewhere, until it publishes
    newer metrics than it had when judged dead."""
    by_id = {w.worker_id: w for w in workers}
    out: dict[str, float] = {}
    for w in workers:
        if w.state is WorkerState.RESTARTING:
            continue
        stamp = _stamp(w)
        judged = previous.get(w.worker_id)
        if judged is not None and stamp <= judged:
            out[w.worker_id] = judged
    for view in views:
        if not view.expired or view.owner is None or view.checkpoint_owner is not None:
            continue
        worker = by_id.get(view.owner)
        if worker is None or worker.state is WorkerState.RESTARTING:
            continue
        changed = last_change.get(view.lease_key)
        stamp = _stamp(worker)
        if changed is None or stamp <= changed:
            out[worker.worker_id] = max(out.get(worker.worker_id, stamp), stamp)
    return out


def quiet_workers(
    views: Sequence[LeaseView],
    workers: Sequence[WorkerView],
    last_change: Mapping[str, float],
    now: float,
    quiet_after_s: float,
) -> frozenset[str]:
    """Workers that receive nothing for now: every lease they own has stood unchanged for more than
    ``quiet_after_s`` (``last_change``: lease key -> when its counter last changed, on ``now``'s clock).

    A live worker renews each lease every third of the failover time, so half of it without a change
    on any lease means it stopped (killed, or cut off); its leases are not expired yet, so it is not
    :func:`dead_workers`, and its metrics stay fresh for two reporting periods. Without this rule the
    leader assigned a killed worker's leases, and handed others off, to a second worker killed seconds
    later, and those shards waited another failover. Receiving nothing is the only consequence, so a
    live worker judged quiet by mistake (its renewals delayed by throttling) loses nothing; its leases
    are left to it, and it receives again at its next renewal. Workers that own nothing, and
    RESTARTING ones (they keep leases they do not renew), are never quiet."""
    restarting = {w.worker_id for w in workers if w.state is WorkerState.RESTARTING}
    latest: dict[str, float] = {}
    for view in views:
        renewer = view.actual_owner  # a pending hand-off is renewed by the worker serving it
        if renewer is None or view.finished:
            continue
        changed = last_change.get(view.lease_key, float("-inf"))
        latest[renewer] = max(latest.get(renewer, float("-inf")), changed)
    return frozenset(
        owner
        for owner, changed in latest.items()
        if owner not in restarting and now - changed > quiet_after_s
    )


def with_lease_graces(workers: Sequence[WorkerView], graces: Mapping[str, float]) -> list[WorkerView]:
    """``workers`` as the metrics say, corrected by the graces marked on the leases (``graces``: worker ->
    grace end on the decider's clock, from :func:`kcl_daemon.core.leases.restart_grace.restarting_owners`).

    A worker one of whose leases waits for it is RESTARTING until the latest of its graces, whatever its
    metrics item said when the leader last read it (ACTIVE, read before it stopped; or gone): so it is
    never quiet, never dead, and its leases wait for it (issue 28: the leader read the metrics once per
    balance round, and judged a restarting worker by its silent leases in between). A worker with no
    metrics item at all is added. Its metrics state wins only when it declares a later grace."""
    out: list[WorkerView] = []
    seen: set[str] = set()
    for w in workers:
        seen.add(w.worker_id)
        until = graces.get(w.worker_id)
        declared = w.grace_until if w.state is WorkerState.RESTARTING else None
        if until is None or (declared is not None and declared >= until):
            out.append(w)
        else:
            out.append(replace(w, state=WorkerState.RESTARTING, grace_until=until))
    for worker_id in sorted(graces.keys() - seen):
        out.append(WorkerView(worker_id, state=WorkerState.RESTARTING, grace_until=graces[worker_id]))
    return out


#: how long a lease moved to a Java worker may stand unrenewed before it counts as expired, in failover
#: times: Java's leader gives an assignee until its next round (leaseAssignmentIntervalMillis, 2 x failover)
ARRIVAL_GRACE_FAILOVERS: Final = 2.0


def still_arriving(arrived_at: float | None, now: float, failover_s: float) -> bool:
    """A lease whose serving worker changed to a Java worker at ``arrived_at`` (this leader's clock; None:
    not seen changing) that is not expired yet, whatever its counter says.

    A Java worker learns of a lease assigned (or handed) to it only at its lease discovery, once a
    failover time, and renews it at its renewer's next run, up to a third of a failover later: its first
    renewal may come more than a failover after the move. Judged expired at one failover, the lease was
    placed again, the Java worker lost it at that renewal (after it had started processing) and the
    leader, seeing no metrics from it since (Java reports every 30 s), also judged it dead: on defaults
    the leases of a joining Java worker went back and forth. Java's own leader looks again only at its
    next round, two failovers after the move; kcl-daemon's workers adopt within an expiry pass and are
    watched apart (a lease they never adopt is placed again after half a failover)."""
    return arrived_at is not None and now - arrived_at <= ARRIVAL_GRACE_FAILOVERS * failover_s


def _stamp(worker: WorkerView) -> float:
    return worker.last_update if worker.last_update is not None else float("-inf")
