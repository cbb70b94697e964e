"""The KCL 2.x lease taker as a pure function: which leases should this worker take or steal now?

One call per taker run (contract §4.4), after the shell has scanned the table and folded the scan into a
:class:`~kcl_daemon.core.leases.expiry.LeaseObservations` at the same ``now``:

1. available = unowned, or expired by local observation;
2. count the non-available leases per owner, with this worker present at 0; ``W`` = number of owners
   in that map, ``N`` = number of leases;
3. target = 1 if ``W >= N`` else ``ceil(N / W)``, capped at ``max_leases_for_worker``;
4. priority assignment (default on): if any lease is "very old" (no counter change for more than
   ``3 x failover``, which includes never-owned leases), take a random
   ``max_leases_for_worker - mine`` of them, ignoring the target, and stop;
5. otherwise take a random ``target - mine`` of the available leases;
6. if none is available: find the most loaded worker; if it holds at least ``target``, steal
   ``min(needed, its_count - target)`` of its leases, but 1 when that is 0 and ``needed > 1``, and
   never more than ``max_leases_to_steal_at_one_time``;
7. (kcl-daemon, ``evict_after_s`` set) expired leases of other workers that this worker will not take
   (it is at its target, or takes fewer than are expired) and that have been expired for
   ``evict_after_s`` more are *evicted* — their dead owner removed, fenced on the counter seen — as
   many as the other workers under their target can take. An unowned lease is available to every
   worker at once, while an expired one is available only to a worker that has watched its counter
   stand still for a whole failover: a worker that started after the owner died (a replacement) would
   otherwise wait a failover from its own first scan, while the workers that saw the death are at their
   target and may not take more.

Java runs the taker every ``2 x failover``; a dead worker's lease is then seen expired up to two runs
after its last renewal. kcl-daemon also runs *expiry passes* in between (``steals=False``, every
:func:`~kcl_daemon.core.leases.expiry.expiry_interval_for` the failover time): the same decision, except that
it never steals, so an expired or unowned lease is taken within about a second of coming due while
balancing by stealing keeps Java's cadence (:func:`next_taker_pass`).

Every take is a conditional write on the counter seen in the scan, so plans of concurrent workers
may overlap: the table decides. Randomness comes from the injected ``random.Random``; the leases are
sorted by key before shuffling so a seeded run is reproducible. Ties for "most loaded" (an arbitrary
HashMap order in Java) are broken with the same generator. Durations are float seconds.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from kcl_daemon.core.leases.expiry import NEVER_CHANGED, VERY_OLD_MULTIPLIER, LeaseObservations
from kcl_daemon.core.leases.lease import Lease

if TYPE_CHECKING:
    from random import Random

JAVA_INT_MAX: Final = 2**31 - 1


@dataclass(frozen=True, slots=True)
class TakerConfig:
    """The lease-management settings the taker uses (Java defaults)."""

    failover_s: float = 10.0
    max_leases_for_worker: int = JAVA_INT_MAX
    max_leases_to_steal_at_one_time: int = 1
    enable_priority_lease_assignment: bool = True
    very_old_multiplier: int = VERY_OLD_MULTIPLIER
    #: evict an expired lease this worker does not take once it has been expired this much longer
    #: (step 7); None: never (Java's taker)
    evict_after_s: float | None = None

    def __post_init__(self) -> None:
        if not self.failover_s > 0:
            raise ValueError(f"failover_s must be positive, not {self.failover_s}")
        if self.max_leases_for_worker < 1:
            raise ValueError("max_leases_for_worker must be >= 1")
        if self.max_leases_to_steal_at_one_time < 1:
            raise ValueError("max_leases_to_steal_at_one_time must be >= 1")
        if self.very_old_multiplier < 1:
            raise ValueError("very_old_multiplier must be >= 1")
        if self.evict_after_s is not None and self.evict_after_s < 0:
            raise ValueError(f"evict_after_s must be >= 0, not {self.evict_after_s}")


class TakeKind(enum.StrEnum):
    PRIORITY = "priority"  # very old lease, taken ignoring the target
    AVAILABLE = "available"  # unowned or expired lease, taken up to the target
    STEAL = "steal"  # live lease of the most loaded worker
    EVICT = "evict"  # expired lease of another worker, made unowned for a worker under its target
    FALLBACK = "fallback"  # 3.x follower: an expired lease the leader has not reassigned in time


@dataclass(frozen=True, slots=True)
class PlannedTake:
    """One conditional take: ``lease`` is the scanned state, so its counter is the expected value."""

    lease: Lease
    kind: TakeKind
    reason: str

    @property
    def lease_key(self) -> str:
        return self.lease.lease_key

    @property
    def expected_counter(self) -> int:
        return self.lease.lease_counter


@dataclass(frozen=True, slots=True)
class TakePlan:
    """What one taker run decided, with the numbers behind it (for logs and the ``leases`` CLI)."""

    worker_id: str
    takes: tuple[PlannedTake, ...]
    steals: tuple[PlannedTake, ...]
    lease_count: int
    worker_count: int
    target: int
    my_count: int
    available_count: int
    very_old_count: int
    lease_counts: Mapping[str, int] = field(hash=False)
    summary: str
    evictions: tuple[PlannedTake, ...] = ()  # not takes: the lease is left unowned (step 7)

    @property
    def all(self) -> tuple[PlannedTake, ...]:
        """The takes and steals (not the evictions)."""
        return self.takes + self.steals

    @property
    def is_priority(self) -> bool:
        return any(t.kind is TakeKind.PRIORITY for t in self.takes)


@dataclass(frozen=True, slots=True)
class _Scan:
    """The numbers of one taker run (contract §4.4 steps 1-4), shared by every branch of the decision."""

    worker_id: str
    ordered: list[Lease]
    available: list[Lease]
    very_old: list[Lease]
    counts: dict[str, int]
    target: int
    #: leases waiting for their restarting owner (lease key -> owner): nobody else's to take
    graced: Mapping[str, str] = field(default_factory=dict)

    @property
    def my_count(self) -> int:
        return self.counts[self.worker_id]

    @property
    def needed(self) -> int:
        return self.target - self.my_count

    def plan(
        self,
        outcome: str,
        takes: Iterable[PlannedTake] = (),
        steals: Iterable[PlannedTake] = (),
        evictions: Iterable[PlannedTake] = (),
    ) -> TakePlan:
        n_leases, n_workers = len(self.ordered), len(self.counts)
        evicted = tuple(evictions)
        if evicted:
            outcome += f"; evicting {len(evicted)} expired for workers under their target"
        summary = (
            f"worker {self.worker_id} saw {n_leases} leases, {len(self.available)} available, "
            f"{n_workers} workers; target {self.target}, has {self.my_count}: {outcome}"
        )
        return TakePlan(
            worker_id=self.worker_id,
            takes=tuple(takes),
            steals=tuple(steals),
            lease_count=n_leases,
            worker_count=n_workers,
            target=self.target,
            my_count=self.my_count,
            available_count=len(self.available),
            very_old_count=len(self.very_old),
            lease_counts=MappingProxyType(dict(sorted(self.counts.items()))),
            summary=summary,
            evictions=evicted,
        )


def _scan(
    leases: Iterable[Lease],
    observations: LeaseObservations,
    worker_id: str,
    now: float,
    config: TakerConfig,
    graced: Mapping[str, str],
) -> _Scan:
    ordered = sorted({lease.lease_key: lease for lease in leases}.values(), key=lambda lease: lease.lease_key)
    failover = config.failover_s
    available = [
        lease
        for lease in ordered
        if lease.lease_key not in graced
        and (lease.lease_owner is None or observations.is_expired(lease.lease_key, now, failover))
    ]
    available_keys = {lease.lease_key for lease in available}
    counts: dict[str, int] = {}
    for lease in ordered:
        if lease.lease_key not in available_keys and lease.lease_owner is not None:
            counts[lease.lease_owner] = counts.get(lease.lease_owner, 0) + 1
    counts.setdefault(worker_id, 0)
    n_leases, n_workers = len(ordered), len(counts)
    target = 1 if n_workers >= n_leases else math.ceil(n_leases / n_workers)
    very_old = [
        lease
        for lease in ordered
        if lease.lease_key not in graced
        and observations.is_very_old(lease.lease_key, now, failover, config.very_old_multiplier)
    ]
    return _Scan(
        worker_id=worker_id,
        ordered=ordered,
        available=available,
        very_old=very_old,
        counts=counts,
        target=min(target, config.max_leases_for_worker),
        graced=graced,
    )


def plan_takes(
    leases: Iterable[Lease],
    observations: LeaseObservations,
    worker_id: str,
    now: float,
    config: TakerConfig,
    rng: Random,
    *,
    steals: bool = True,
    graced: Mapping[str, str] | None = None,
) -> TakePlan:
    """Decide this run's takes and steals (contract §4.4). ``observations`` must already include the scan.
    ``steals=False`` (an expiry pass): take what is available, never steal.

    ``graced`` (lease key -> owner; :func:`kcl_daemon.core.leases.restart_grace.graced_leases`): leases that wait
    for their restarting owner. Another worker's are neither available, very old, stolen nor evicted
    (they count for their owner); this worker's own, back from its restart, are taken back at once,
    before anything else."""
    scan = _scan(leases, observations, worker_id, now, config, graced or {})
    if not scan.ordered:
        return scan.plan("no leases, nothing to take")

    kept = [lease for lease in scan.ordered if scan.graced.get(lease.lease_key) == worker_id]
    if kept:
        reason = "kept for this worker by its restart grace: taken back on its return"
        takes = [PlannedTake(lease, TakeKind.AVAILABLE, reason) for lease in kept]
        return scan.plan(f"taking back {len(takes)} leases kept for its restart", takes)

    if config.enable_priority_lease_assignment and scan.very_old:
        very_old = list(scan.very_old)
        rng.shuffle(very_old)
        room = max(0, min(config.max_leases_for_worker - scan.my_count, len(very_old)))
        threshold = config.very_old_multiplier * config.failover_s
        takes = [
            PlannedTake(lease, TakeKind.PRIORITY, _very_old_reason(lease, observations, now, threshold))
            for lease in very_old[:room]
        ]
        return scan.plan(
            f"{len(very_old)} very old leases, taking {len(takes)} with priority "
            f"(ignoring the target, at most max_leases_for_worker={config.max_leases_for_worker})",
            takes,
        )

    if scan.needed <= 0:
        evictions = _plan_evictions(scan, scan.available, observations, now, config, rng)
        return scan.plan("at or above target, nothing to take", evictions=evictions)

    if scan.available:
        available = list(scan.available)
        rng.shuffle(available)
        takes = [
            PlannedTake(
                lease,
                TakeKind.AVAILABLE,
                _available_reason(lease, observations, now, config.failover_s, scan.needed),
            )
            for lease in available[: scan.needed]
        ]
        left = sorted(available[scan.needed :], key=lambda lease: lease.lease_key)
        evictions = _plan_evictions(scan, left, observations, now, config, rng)
        return scan.plan(
            f"taking {len(takes)} of {len(available)} available leases", takes, evictions=evictions
        )

    if not steals:
        return scan.plan("nothing available; stealing waits for the next full run")
    return _plan_steals(scan, config, rng)


@dataclass(frozen=True, slots=True)
class TakerStep:
    """One pass of the taker's schedule: whether it may steal, and when the next passes are due."""

    full: bool
    full_due_at: float  # the next full run (the one after this pass)
    wake_at: float  # the next pass of either kind


def next_taker_pass(
    now: float,
    *,
    full_due_at: float,
    take_interval_s: float,
    expiry_interval_s: float | None,
    earliest_due: float | None = None,
) -> TakerStep:
    """The taker's schedule at ``now``: full runs every ``take_interval_s`` (``2 x failover``, as Java),
    due at ``full_due_at``; expiry passes every ``expiry_interval_s`` in between (None: Java's cadence
    only), and at ``earliest_due`` (when the first lease seen would expire:
    :meth:`~kcl_daemon.core.leases.expiry.LeaseObservations.next_expiry`) if that comes sooner; never later
    than the next full run."""
    full = now >= full_due_at
    if full:
        full_due_at = now + take_interval_s
    wake_at = full_due_at
    if expiry_interval_s is not None:
        wake_at = min(wake_at, now + expiry_interval_s)
        if earliest_due is not None and earliest_due > now:
            wake_at = min(wake_at, earliest_due)
    return TakerStep(full=full, full_due_at=full_due_at, wake_at=wake_at)


def _plan_steals(scan: _Scan, config: TakerConfig, rng: Random) -> TakePlan:
    """contract §4.4 step 7 (Java ``chooseLeasesToSteal``); only reached when nothing is available."""
    waiting: dict[str, int] = {}
    for owner in scan.graced.values():
        waiting[owner] = waiting.get(owner, 0) + 1
    # a restarting worker's leases wait for it: it is nobody's victim (its count still sets the target)
    others = {
        worker: count
        for worker, count in scan.counts.items()
        if worker != scan.worker_id and count - waiting.get(worker, 0) > 0
    }
    if not others:
        return scan.plan("nothing available and no other worker to steal from")
    most = max(others.values())
    tied = sorted(worker for worker, count in others.items() if count == most)
    victim = tied[0] if len(tied) == 1 else rng.choice(tied)

    target, needed = scan.target, scan.needed
    to_steal = 0
    if most >= target:
        to_steal = min(needed, most - target)
        if needed > 1 and to_steal == 0:
            to_steal = 1
        to_steal = min(to_steal, config.max_leases_to_steal_at_one_time)
    if to_steal <= 0:
        return scan.plan(
            f"nothing available; not stealing from most loaded worker {victim} "
            f"(has {most}, target {target}, need {needed})"
        )

    candidates = [
        lease for lease in scan.ordered if lease.lease_owner == victim and lease.lease_key not in scan.graced
    ]
    rng.shuffle(candidates)
    reason = (
        f"no lease available and need {needed} to reach target {target}: "
        f"stealing from most loaded worker {victim} ({most} leases)"
    )
    steals = [PlannedTake(lease, TakeKind.STEAL, reason) for lease in candidates[:to_steal]]
    return scan.plan(f"stealing {len(steals)} from {victim} ({most} leases)", steals=steals)


def _plan_evictions(
    scan: _Scan,
    candidates: Iterable[Lease],
    observations: LeaseObservations,
    now: float,
    config: TakerConfig,
    rng: Random,
) -> list[PlannedTake]:
    """Step 7: which of ``candidates`` (available leases this worker does not take) to evict."""
    if config.evict_after_s is None:
        return []
    short = {
        worker: scan.target - count
        for worker, count in scan.counts.items()
        if worker != scan.worker_id and count < scan.target
    }  # the other workers under their target, and how many each can still take
    room = sum(short.values())
    if room <= 0:
        return []
    threshold = config.failover_s + config.evict_after_s
    lingering = [
        lease
        for lease in candidates
        if lease.lease_owner is not None
        and lease.lease_owner != scan.worker_id
        and observations.is_expired(lease.lease_key, now, threshold)
    ]
    rng.shuffle(lingering)
    under = sorted(short)
    return [
        PlannedTake(
            lease,
            TakeKind.EVICT,
            f"{_why_available(lease, observations, now, config.failover_s)}; "
            f"evicted for {', '.join(under)} (under target {scan.target})",
        )
        for lease in lingering[:room]
    ]


def _very_old_reason(lease: Lease, observations: LeaseObservations, now: float, threshold: float) -> str:
    observed = observations.get(lease.lease_key)
    if observed is None or observed.changed_at == NEVER_CHANGED:
        return "very old: first seen unowned, never seen renewed"
    return (
        f"very old: counter {observed.lease_counter} unchanged for "
        f"{now - observed.changed_at:.1f}s (> {threshold:.1f}s)"
    )


def _why_available(lease: Lease, observations: LeaseObservations, now: float, failover: float) -> str:
    if lease.lease_owner is None:
        return "unowned"
    age = observations.age(lease.lease_key, now)
    silent = "never seen renewed" if math.isinf(age) else f"not renewed for {age:.1f}s"
    return f"expired: owner {lease.lease_owner} {silent} (> {failover:.1f}s)"


def _available_reason(
    lease: Lease, observations: LeaseObservations, now: float, failover: float, needed: int
) -> str:
    return f"{_why_available(lease, observations, now, failover)}; need {needed} to reach target"
