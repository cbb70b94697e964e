"""The followers' fallback taker in 3.x mode: an expired lease that no leader reassigns is taken anyway.

In KCL 3.x only the leader moves leases. When the leader is dead its lock stands until it expires (Java
writes 120 s), and every lease the dead leader held stands still with it; a slow leader (Java's assigns
only every assignment interval) leaves a dead worker's leases idle as long. So each kcl-daemon follower
watches the lease table (:func:`watch_interval_s`) and, once a lease has stood still past the failover
time *and a grace* (:meth:`FallbackConfig.derive`), takes it itself, fenced on the counter it watched
stand still, exactly as the 2.x taker takes an expired lease (contract §4.2 *take*). The lock is never
touched: the follower does not become a leader, and a live leader's assignments go on. A race with the
leader's *assign* is decided by the table: kcl-daemon's assign is fenced on the counter and Java's on
the owner, and both change with a take.

A lease is a **candidate** when, by this worker's own observation:

* it is not finished (``SHARD_END``), not owned by this worker (lease discovery adopts those; but a
  hand-off *to* this worker whose serving worker stopped renewing is a candidate: discovery never adopts
  a lease with ``checkpointOwner`` set, and a take clears it), and
  neither its owner nor its pending hand-off's serving worker is *frozen* (RESTARTING within its grace:
  :func:`~kcl_daemon.core.leader.assignor.frozen_workers`, the assignor's rule);
* it has an owner, or this worker suspects the leader (its lock missed a heartbeat, or there is none):
  an unowned lease (a new shard's, or one released by a graceful stop) is what a live leader places at
  its next round, and a follower does not race it for those;
* its counter has not changed for more than ``failover + grace`` since this worker first saw it, or
  since it first saw the lease at all (a lease first seen unowned is timed from that sighting, not from
  "never");
* its owner is not a kcl-daemon worker that has published worker metrics since the lease stood still:
  such a worker is alive (one back from a restart publishes before it adopts the leases it kept, which
  may take a while), and the assignor does not count it as a suspect either. A SIGKILLed kcl-daemon
  worker whose last report came after its last renewal is left to the leader (and to its metrics going
  stale); the fallback is for leases a dead leader leaves standing;
* a lease whose last counter change was an *assignment* (its owner and counter changed at once) and
  that its new owner has not renewed since waits ``failover + adopt`` instead: a Java worker discovers
  an assignment up to half an assignment interval late and renews it up to a renewal period after
  that, and may process before it renews; taking such a lease would cut a live worker off. So does an
  owned lease this worker has never seen renewed (it may have been assigned just before this worker
  first looked: a Java leader gives itself every lease of a new application, and its worker renews them
  only once it discovers them); only a renewal seen, then a standstill, proves a dead owner sooner.

The candidates are spread among the live kcl-daemon workers (**takers**: this worker, plus the workers
whose worker-metrics item carries kcl-daemon's extras, are ACTIVE, not frozen, and own no candidate,
since such an owner is dead), each taking at most its share ``ceil(candidates / takers)`` (and never
past ``max_leases_for_worker``). Every taker computes the same split: candidate by candidate (by key),
the taker with the highest rendezvous hash of ``(worker, lease key)`` that still has room gets it. So
followers that saw the same scan never race for a lease. A candidate that has been due for
``open_after`` (a watch interval and a grace: every live taker has scanned since) is open to any taker,
in its own hash order: the one it fell to is dead or cut off. Any race left is decided by the counter.
Pure and deterministic.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from kcl_daemon.core.leader.assignor import frozen_workers
from kcl_daemon.core.leader.decider import WorkerState, WorkerView
from kcl_daemon.core.leases.expiry import DUE_EPSILON_S, LeaseObservations, expiry_interval_for
from kcl_daemon.core.leases.lease import Lease

JAVA_INT_MAX: Final = 2**31 - 1


def watch_interval_s(failover_s: float) -> float:
    """How often a follower scans the lease table while its leader looks alive: half the failover time.

    A counter is timed from when it is first *seen*, so the fallback takes a dead owner's lease up to one
    watch interval after it could first be taken. At half the failover that is on average a quarter of
    it (a lease's last renewal also came on average a sixth of it before the death): a dead leader's
    leases move about ``failover + grace`` after it died, with one scan per follower every 5 s at the
    defaults (the 2.x taker and kcl-daemon's leader scan every second)."""
    return failover_s / 2


@dataclass(frozen=True, slots=True)
class FallbackConfig:
    failover_s: float
    #: how long past the failover time a lease stands still before a follower takes it
    grace_s: float
    #: the same, for a lease assigned to a worker that has not renewed it yet (see the module docstring)
    adopt_s: float
    max_leases_for_worker: int = JAVA_INT_MAX
    #: past its due time by this much, a candidate is open to any taker (None: a watch interval + grace)
    open_after_s: float | None = None

    @property
    def open_after(self) -> float:
        if self.open_after_s is not None:
            return self.open_after_s
        return watch_interval_s(self.failover_s) + self.grace_s

    def __post_init__(self) -> None:
        if not self.failover_s > 0:
            raise ValueError(f"failover_s must be positive, not {self.failover_s}")
        if self.grace_s < 0 or self.adopt_s < 0:
            raise ValueError(f"grace_s and adopt_s must be >= 0, not {self.grace_s} and {self.adopt_s}")
        if self.max_leases_for_worker < 1:
            raise ValueError("max_leases_for_worker must be >= 1")

    @classmethod
    def derive(
        cls,
        failover_s: float,
        assignment_interval_s: float,
        expiry_interval_s: float | None = None,
        max_leases_for_worker: int = JAVA_INT_MAX,
    ) -> FallbackConfig:
        """The grace is two of the leader's expiry intervals (``leaseExpiryCheckIntervalMillis``, by
        default ``min(1 s, failover / 10)``: 2 s at the defaults; None: that default): a
        live kcl-daemon leader scans every expiry interval and places an expired lease at the pass after
        it comes due on its clock, which is never later than a follower's by more than one interval; the
        second covers its scan and write. So a live kcl-daemon leader always places first, and only a dead
        or slow leader (Java's assigns every assignment interval) is overtaken. ``adopt`` is Java's lease
        discovery period (half the assignment interval) plus a renewal period (``failover / 3``)."""
        expiry_s = expiry_interval_s if expiry_interval_s is not None else expiry_interval_for(failover_s)
        return cls(
            failover_s=failover_s,
            grace_s=2 * expiry_s,
            adopt_s=assignment_interval_s / 2 + failover_s / 3,
            max_leases_for_worker=max_leases_for_worker,
        )


@dataclass(frozen=True, slots=True)
class Sighting:
    """What this worker knows of one lease beyond its counter: when it first saw the lease, the owner it
    last saw, and since when it has seen that owner (None: since its first sighting)."""

    first_seen: float
    owner: str | None
    owner_since: float | None = None


_NO_SIGHTINGS: Final[Mapping[str, Sighting]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Watch:
    """The follower's sightings, ``lease_key -> Sighting``; every scan returns a new one."""

    sightings: Mapping[str, Sighting] = field(default_factory=lambda: _NO_SIGHTINGS, hash=False)

    def see(self, leases: Iterable[Lease], now: float) -> Watch:
        """After a full scan that returned ``leases`` at ``now`` (leases missing from it are forgotten)."""
        seen: dict[str, Sighting] = {}
        for lease in leases:
            old = self.sightings.get(lease.lease_key)
            if old is None:
                seen[lease.lease_key] = Sighting(now, lease.lease_owner)
            elif old.owner != lease.lease_owner:
                seen[lease.lease_key] = Sighting(old.first_seen, lease.lease_owner, now)
            else:
                seen[lease.lease_key] = old
        return Watch(MappingProxyType(seen))


@dataclass(frozen=True, slots=True)
class Candidate:
    lease: Lease
    #: when it may be taken (monotonic): past it, it is a candidate
    due: float
    reason: str
    #: since when it has stood still (monotonic)
    still_since: float = float("-inf")


def _due(lease: Lease, observations: LeaseObservations, watch: Watch, config: FallbackConfig) -> float | None:
    """When ``lease`` becomes takeable if nothing changes (None: never seen)."""
    observed = observations.get(lease.lease_key)
    sighting = watch.sightings.get(lease.lease_key)
    if observed is None or sighting is None:
        return None
    still_since = max(observed.changed_at, sighting.first_seen)
    wait = config.grace_s
    # an *assign* moves the owner and the counter at once (a hand-off's start moves only the owner, and
    # its serving worker renews on): assigned, and not renewed by its new owner since. A lease this
    # worker has never seen renewed may be one too, assigned before it first looked (a Java leader that
    # has just given itself every lease of a new application, its worker not yet discovering them): only
    # a renewal seen proves an owner that renews, and so a standstill after it a death
    assigned = lease.lease_owner is not None and lease.checkpoint_owner is None
    never_renewed = observed.changed_at <= sighting.first_seen
    if assigned and (observed.changed_at == sighting.owner_since or never_renewed):
        wait = max(wait, config.adopt_s)
    return still_since + config.failover_s + wait


def _eligible(lease: Lease, me: str, frozen: frozenset[str], unowned: bool = True) -> bool:
    adopts = lease.lease_owner == me and lease.checkpoint_owner is None  # lease discovery's
    return (
        (unowned or lease.lease_owner is not None)
        and not lease.is_shard_end
        and not adopts
        and lease.lease_owner not in frozen
        and lease.checkpoint_owner not in frozen
    )


def candidates(
    leases: Iterable[Lease],
    observations: LeaseObservations,
    watch: Watch,
    me: str,
    now: float,
    config: FallbackConfig,
    *,
    leader_suspect: bool,
    frozen: frozenset[str] = frozenset(),
) -> list[Candidate]:
    """The leases this worker may take now, by key (``observations`` and ``watch`` include the scan;
    ``leader_suspect``: unowned leases too)."""
    out = []
    for lease in sorted(leases, key=lambda lease: lease.lease_key):
        if not _eligible(lease, me, frozen, leader_suspect):
            continue
        due = _due(lease, observations, watch, config)
        if due is None or now <= due:
            continue
        observed, sighting = observations.get(lease.lease_key), watch.sightings[lease.lease_key]
        still = max(observed.changed_at if observed is not None else now, sighting.first_seen)
        owner = lease.lease_owner or "no owner"
        why = f"{owner}: not renewed nor reassigned for {now - still:.1f}s (due after {due - still:.1f}s)"
        out.append(Candidate(lease, due, why, still))
    return out


def next_due(
    leases: Iterable[Lease],
    observations: LeaseObservations,
    watch: Watch,
    me: str,
    now: float,
    config: FallbackConfig,
    *,
    leader_suspect: bool,
) -> float | None:
    """When the first lease that has stood still since an earlier scan would become a candidate (plus
    :data:`DUE_EPSILON_S`); a lease seen to change at this scan is left to the next watch scan."""
    dues = []
    for lease in leases:
        observed = observations.get(lease.lease_key)
        eligible = _eligible(lease, me, frozenset(), leader_suspect)
        if not eligible or observed is None or observed.changed_at >= now:
            continue
        due = _due(lease, observations, watch, config)
        if due is not None and due >= now:
            dues.append(due + DUE_EPSILON_S)
    return min(dues, default=None)


def takers(
    me: str, workers: Sequence[WorkerView], ours: Iterable[str], dead: Iterable[str], now: float
) -> list[str]:
    """The kcl-daemon workers among which the candidates are spread: this worker, and the workers in
    ``ours`` (their metrics carry kcl-daemon's extras) that are ACTIVE, not frozen and not ``dead``."""
    kcl = set(ours)
    gone = set(dead) | frozen_workers(workers, now)
    live = {w.worker_id for w in workers if w.worker_id in kcl and w.state is WorkerState.ACTIVE}
    return sorted((live - gone) | {me})


def _rank(worker: str, lease_key: str) -> int:
    """Rendezvous hash of a worker and a lease (stable across processes, unlike ``hash``)."""
    return zlib.crc32(f"{worker}\x00{lease_key}".encode())


@dataclass(frozen=True, slots=True)
class FallbackPlan:
    takes: tuple[Candidate, ...]
    candidates: int
    takers: tuple[str, ...]
    share: int
    summary: str


def plan_fallback(
    found: Sequence[Candidate],
    me: str,
    held: int,
    workers: Sequence[WorkerView],
    ours: Iterable[str],
    now: float,
    config: FallbackConfig,
    *,
    wall_offset: float = 0.0,
) -> FallbackPlan:
    """Which of ``found`` (:func:`candidates`) this worker takes, holding ``held`` leases; ``workers``
    are the fleet's metrics views (RESTARTING and its grace included; ``last_update`` in epoch seconds,
    ``now + wall_offset``), ``ours`` the kcl-daemon ones."""
    frozen = frozen_workers(workers, now)
    kcl = set(ours)
    published = {
        w.worker_id: w.last_update - wall_offset
        for w in workers
        if w.worker_id in kcl and w.state is WorkerState.ACTIVE and w.last_update is not None
    }

    def alive(c: Candidate) -> bool:
        """The worker serving it (its owner, or a pending hand-off's old owner) is a kcl-daemon worker
        that published metrics after the lease stood still: alive (back from a restart: it publishes
        before it adopts what it kept), not for us to take. A hand-off to this worker is judged by the
        worker handing it over, never by this one, which publishes all the time."""
        since = published.get(c.lease.checkpoint_owner or c.lease.lease_owner or "")
        return since is not None and since > c.still_since

    usable = sorted(
        (c for c in found if _eligible(c.lease, me, frozen) and not alive(c)), key=lambda c: c.lease.lease_key
    )
    owners = {c.lease.lease_owner for c in usable if c.lease.lease_owner is not None}
    among = takers(me, workers, ours, owners, now)
    share = math.ceil(len(usable) / len(among)) if usable else 0
    room = dict.fromkeys(among, share)
    mine, others = [], []
    for c in usable:
        key = c.lease.lease_key
        chosen = next(w for w in sorted(among, key=lambda w: (-_rank(w, key), w)) if room[w] > 0)
        room[chosen] -= 1
        if chosen == me:
            mine.append(c)
        elif now > c.due + config.open_after:
            others.append(c)  # its taker has not taken it: dead, or cut off
    others.sort(key=lambda c: (-_rank(me, c.lease.lease_key), c.lease.lease_key))
    limit = max(0, min(share, config.max_leases_for_worker - held))
    takes = tuple((mine + others)[:limit])
    summary = (
        f"worker {me}: {len(usable)} lease(s) stood still past failover + grace with no reassignment; "
        f"{len(among)} kcl-daemon taker(s), share {share}: taking {len(takes)}"
        + (f" ({len(others)} left by the taker they fell to)" if others else "")
    )
    return FallbackPlan(takes, len(usable), tuple(among), limit, summary)
