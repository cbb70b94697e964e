"""This project's lease assignor: sticky, zone-aware, load-aware, cooperative and deploy-aware.

One :meth:`CooperativeAssignor.decide` call is one leader round over plain views (the :class:`Decider`
interface).

1. **Members.** ACTIVE workers receive leases, except a *suspect* one (it owns an expired lease: it is
   dead but its metrics are not stale yet; it stays suspect, across rounds, until it publishes newer
   metrics). A RESTARTING worker whose ``grace_until`` has not passed is
   *frozen*: its leases wait for it, expired or not, and count for nobody else; back ACTIVE before its
   grace ends, its still-expired leases stay its own (it renews them on adoption); after the grace it
   is treated as gone. A LEAVING worker's leases are handed off.
2. **Pool.** Leases that must be placed now: unowned, expired (unless frozen), a stuck hand-off, or
   owned by a worker that is gone. Placed in the same round whatever the hand-off limit (they are not
   hand-offs). A lease with a hand-off in progress counts for its destination and is never moved.
3. **Targets.** Counts are apportioned hierarchically: zones get a share proportional to the capacity
   of their members, then each zone's workers likewise, each share rounded down or up (largest
   remainder), honouring ``max_leases_for_worker``. Who gets the "up" is sticky: those already holding
   at least that many, so moves are the lower bound: ``sum of leases over target`` plus the pool.
4. **Count phase.** Each worker over its target hands off its surplus, at most
   ``max_handoffs_per_worker`` per round (cooperative: no worker is drained at once; a LEAVING worker is
   drained at once). Surplus and pool go, largest throughput first, to the worker under target whose
   projected load relative to its capacity is lowest (same zone preferred on ties).
5. **Load phase.** On lease throughput when any is known, else on CPU when every member publishes it:
   a worker whose load is above its share by more than the band, ``max(rebalance_threshold_percent of
   the share, an absolute minimum)``, gives one lease (or swaps a hot lease for a cooler one, which keeps
   counts) to the least loaded worker, only if that closes the gap by more than the band; a worker
   touched by a load move rests for ``load_cooldown_rounds`` rounds (dampening, kept in
   :class:`DeciderState`). Low-CPU jitter never crosses the absolute band (10 CPU points; 50 KB/s).

Nothing moves while every worker is inside its count range and load band. The result is deterministic.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from kcl_daemon.core.leader.decider import (
    DeciderConfig,
    DeciderState,
    Decision,
    LeaseView,
    Move,
    WorkerState,
    WorkerView,
)

ROUND: Final = "assignor.round"
_COOL_PREFIX: Final = "assignor.cool:"
_SUSPECT_PREFIX: Final = "assignor.suspect:"
_GRACE_PREFIX: Final = "assignor.grace:"
NO_ZONE: Final = ""


@dataclass(frozen=True, slots=True)
class Slot:
    """One member of an apportionment: a zone or a worker."""

    key: str
    weight: float
    cap: int
    current: int


def apportion(total: int, slots: Sequence[Slot]) -> dict[str, int]:
    """Split ``total`` over ``slots`` in proportion to weight, each share rounded down or up, capped.

    Slots whose proportional share reaches their cap are fixed at the cap first (water-filling). The
    shares rounded up go to slots already holding at least the rounded-up value, then by largest
    remainder, then by key: the sticky choice that minimises moves. If the caps cannot hold ``total``,
    every slot gets its cap.
    """
    result: dict[str, int] = {}
    free = list(slots)
    remaining = total
    while free:
        weight = sum(s.weight for s in free)
        shares = {s.key: remaining * (s.weight / weight if weight > 0 else 1 / len(free)) for s in free}
        capped = [s for s in free if shares[s.key] >= s.cap]
        if not capped:
            break
        for s in capped:
            result[s.key] = s.cap
            remaining -= s.cap
        free = [s for s in free if s not in capped]
        remaining = max(remaining, 0)
    if not free:
        return result
    floors = {s.key: min(math.floor(shares[s.key] + 1e-9), s.cap) for s in free}
    extra = max(0, min(len(free), remaining - sum(floors.values())))

    def rank(s: Slot) -> tuple[bool, float, int, str]:
        fraction = shares[s.key] - floors[s.key]
        return (s.current <= floors[s.key], -fraction, -s.current, s.key)

    # Only a share with a fractional part may be rounded up (the fractions add up to ``extra``).
    ranked = sorted(
        (s for s in free if floors[s.key] < s.cap and shares[s.key] - floors[s.key] > 1e-9), key=rank
    )
    for i, s in enumerate(ranked):
        result[s.key] = floors[s.key] + (1 if i < extra else 0)
    for s in free:
        result.setdefault(s.key, floors[s.key])
    return result


@dataclass(frozen=True, slots=True)
class Targets:
    """Integer lease targets per member worker, with the zone of each (for reports and tests)."""

    per_worker: Mapping[str, int]
    per_zone: Mapping[str, int]
    zone_of: Mapping[str, str]


def zone_of(worker: WorkerView) -> str:
    return worker.zone if worker.zone is not None else NO_ZONE


def compute_targets(
    total: int, members: Sequence[WorkerView], counts: Mapping[str, int], cap: int
) -> Targets:
    """Apportion ``total`` leases over zones by capacity, then over each zone's workers."""
    by_zone: dict[str, list[WorkerView]] = {}
    for w in members:
        by_zone.setdefault(zone_of(w), []).append(w)
    zone_slots = [
        Slot(
            z,
            sum(max(w.capacity, 0.0) for w in ws),
            cap * len(ws),
            sum(counts.get(w.worker_id, 0) for w in ws),
        )
        for z, ws in sorted(by_zone.items())
    ]
    per_zone = apportion(total, zone_slots)
    per_worker: dict[str, int] = {}
    for z, ws in by_zone.items():
        slots = [Slot(w.worker_id, max(w.capacity, 0.0), cap, counts.get(w.worker_id, 0)) for w in ws]
        per_worker.update(apportion(per_zone.get(z, 0), slots))
    return Targets(per_worker, per_zone, {w.worker_id: zone_of(w) for w in members})


@dataclass(slots=True)
class _Round:
    config: DeciderConfig
    now: float
    members: dict[str, WorkerView]
    tp: dict[str, float]
    holder: dict[str, str]  # lease -> member it is (or will be) with
    held: dict[str, set[str]]
    movable: dict[str, bool]
    origin: dict[str, str | None]  # lease -> owner as read
    moves: dict[str, Move] = field(default_factory=dict)
    handoffs: dict[str, int] = field(default_factory=dict)
    loads: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.loads = {w: sum(self.tp[k] for k in keys) for w, keys in self.held.items()}

    def load(self, worker_id: str) -> float:
        return self.loads.get(worker_id, 0.0)

    def take(self, lease_key: str, worker_id: str) -> None:
        self.held[worker_id].discard(lease_key)
        self.holder.pop(lease_key, None)
        self.loads[worker_id] = self.loads.get(worker_id, 0.0) - self.tp[lease_key]

    def put(self, lease_key: str, worker_id: str) -> None:
        self.held.setdefault(worker_id, set()).add(lease_key)
        self.holder[lease_key] = worker_id
        self.loads[worker_id] = self.loads.get(worker_id, 0.0) + self.tp[lease_key]

    def give(self, lease: LeaseView, to_worker: str, graceful: bool, reason: str) -> None:
        source = self.holder.get(lease.lease_key)
        if source is not None:
            self.take(lease.lease_key, source)
        self.put(lease.lease_key, to_worker)
        origin = self.origin[lease.lease_key]
        if to_worker == origin and lease.lease_key in self.moves:
            del self.moves[lease.lease_key]  # back where it was: no write
            return
        self.moves[lease.lease_key] = Move(
            lease.lease_key, lease.lease_counter, origin, to_worker, graceful and origin is not None, reason
        )
        if graceful and origin is not None:
            self.handoffs[origin] = self.handoffs.get(origin, 0) + 1


@dataclass(frozen=True, slots=True)
class CooperativeAssignor:
    """The sticky, zone-aware, load-aware, cooperative, deploy-aware decider (module docstring)."""

    min_load_band_kbps: float = 50.0
    min_cpu_band_percent: float = 10.0
    load_cooldown_rounds: int = 2
    name: str = "cooperative"

    def decide(
        self,
        leases: Sequence[LeaseView],
        workers: Sequence[WorkerView],
        now: float,
        state: DeciderState,
        config: DeciderConfig,
    ) -> Decision:
        round_no = int(state.values.get(ROUND, 0))
        by_id = {w.worker_id: w for w in workers}
        live = [lease for lease in leases if not lease.finished]
        frozen = set(frozen_workers(workers, now))
        # A worker back within its grace is ACTIVE before it has renewed what it kept: its expired
        # leases stay its own (and it is no suspect) until the grace it declared ends.
        graces = {w.worker_id: w.grace_until for w in workers if w.worker_id in frozen and w.grace_until}
        for key, until in state.values.items():
            if key.startswith(_GRACE_PREFIX) and until > now:
                graces.setdefault(key[len(_GRACE_PREFIX) :], until)
        returning = {w.worker_id for w in workers if w.state is WorkerState.ACTIVE and w.worker_id in graces}
        suspects = _suspects(workers, _expired_owners(live) - returning, state)
        members = {
            w.worker_id: w
            for w in sorted(workers, key=lambda w: w.worker_id)
            if w.state is WorkerState.ACTIVE and w.worker_id not in suspects
        }
        known = [lease.throughput_kbps for lease in live if lease.throughput_kbps is not None]
        mean_tp = sum(known) / len(known) if known else 0.0
        tp = {
            lease.lease_key: lease.throughput_kbps if lease.throughput_kbps is not None else mean_tp
            for lease in live
        }

        pool: list[LeaseView] = []  # must be placed now, not hand-offs
        leaving: list[LeaseView] = []  # live leases of LEAVING workers: hand-offs
        holder: dict[str, str] = {}
        held: dict[str, set[str]] = {w: set() for w in members}
        movable: dict[str, bool] = {}
        for lease in live:
            owner = lease.owner
            handoff = lease.checkpoint_owner is not None
            if owner in frozen or (lease.checkpoint_owner in frozen and not lease.expired):
                continue  # waits for its worker
            if owner is None or (lease.expired and owner not in returning):
                pool.append(lease)
            elif owner in members:
                holder[lease.lease_key] = owner
                held[owner].add(lease.lease_key)
                movable[lease.lease_key] = not handoff
            elif owner in by_id and by_id[owner].state is WorkerState.LEAVING and not handoff:
                leaving.append(lease)
            # else: held by a worker we do not see (yet); left alone until it expires.

        rnd = _Round(
            config=config,
            now=now,
            members=members,
            tp=tp,
            holder=holder,
            held=held,
            movable=movable,
            origin={lease.lease_key: lease.owner for lease in live},
        )
        if members:
            by_key = {lease.lease_key: lease for lease in live}
            total = sum(len(s) for s in held.values()) + len(pool) + len(leaving)
            counts = {w: len(s) for w, s in held.items()}
            targets = compute_targets(total, list(members.values()), counts, config.max_leases_for_worker)
            self._count_phase(rnd, targets, pool, leaving, by_key)
            cooled = self._load_phase(rnd, targets, by_key, state, round_no)
        else:
            cooled = set()
        values: dict[str, float] = {ROUND: float(round_no + 1)}
        values.update(
            {k: v for k, v in state.values.items() if k.startswith(_COOL_PREFIX) and v > round_no - 50}
        )
        values.update({_COOL_PREFIX + w: float(round_no) for w in cooled})
        values.update({_SUSPECT_PREFIX + w: stamp for w, stamp in suspects.items()})
        values.update({_GRACE_PREFIX + w: until for w, until in graces.items()})
        moves = tuple(m for _, m in sorted(rnd.moves.items()))
        return Decision(moves, DeciderState(values))

    # --- count phase -------------------------------------------------------------------------------

    def _count_phase(
        self,
        rnd: _Round,
        targets: Targets,
        pool: list[LeaseView],
        leaving: list[LeaseView],
        by_key: Mapping[str, LeaseView],
    ) -> None:
        limit = rnd.config.max_handoffs_per_worker
        releases: list[tuple[LeaseView, str | None]] = [(lease, None) for lease in leaving]
        total_cap = sum(max(w.capacity, 0.0) for w in rnd.members.values()) or 1.0
        total_load = sum(rnd.loads.values())
        for worker_id in rnd.members:
            surplus = len(rnd.held[worker_id]) - targets.per_worker.get(worker_id, 0)
            if surplus <= 0:
                continue
            candidates = [k for k in rnd.held[worker_id] if rnd.movable.get(k, False)]
            # Shed the leases that bring the worker's load nearest to its share: hottest first when it
            # is above its load share, coolest first otherwise.
            share = total_load * max(rnd.members[worker_id].capacity, 0.0) / total_cap
            hot_first = rnd.load(worker_id) > share
            candidates.sort(key=lambda k: (-rnd.tp[k] if hot_first else rnd.tp[k], k))
            for k in candidates[: min(surplus, limit)]:
                releases.append((by_key[k], worker_id))
                rnd.take(k, worker_id)
        receivers = _Receivers(rnd, targets)
        must = sorted(pool, key=lambda lease: (-rnd.tp[lease.lease_key], lease.lease_key))
        for lease in must:
            receiver = receivers.pop(rnd.tp[lease.lease_key])
            if receiver is not None:
                rnd.give(lease, receiver, graceful=False, reason="unassigned or expired")
                receivers.received(receiver)
                continue
            receiver = self._any_room(rnd, rnd.tp[lease.lease_key])
            if receiver is not None:
                rnd.give(lease, receiver, graceful=False, reason="unassigned or expired")
        releases.sort(key=lambda item: (-rnd.tp[item[0].lease_key], item[0].lease_key))
        for lease, source in releases:
            reason = "worker leaving" if source is None else "over target"
            receiver = receivers.pop(rnd.tp[lease.lease_key])
            if receiver is not None:
                rnd.give(lease, receiver, graceful=rnd.config.graceful_handoff, reason=reason)
                receivers.received(receiver)
                continue
            if source is not None:  # nobody needs it: it stays
                rnd.put(lease.lease_key, source)
                continue
            receiver = self._any_room(rnd, rnd.tp[lease.lease_key])
            if receiver is not None:
                rnd.give(lease, receiver, graceful=rnd.config.graceful_handoff, reason=reason)

    def _any_room(self, rnd: _Round, tp: float) -> str | None:
        room = [
            w
            for w in rnd.members
            if len(rnd.held[w]) < rnd.config.max_leases_for_worker and _under_throughput_cap(rnd, w, tp)
        ]
        return min(room, key=lambda w: (len(rnd.held[w]), w)) if room else None

    # --- load phase --------------------------------------------------------------------------------

    def _load_phase(
        self,
        rnd: _Round,
        targets: Targets,
        by_key: Mapping[str, LeaseView],
        state: DeciderState,
        round_no: int,
    ) -> set[str]:
        """At most one load move per donor per round, outside the band and off cooldown."""
        members = list(rnd.members.values())
        # Throughput is the direct cost of a lease; CPU (with its absolute band) only when none is known.
        use_cpu = not any(rnd.tp[k] > 0 for k in rnd.holder)
        if use_cpu and not all(w.cpu_percent is not None for w in members):
            return set()
        rested = {
            w.worker_id
            for w in members
            if round_no - state.values.get(_COOL_PREFIX + w.worker_id, -1e9) > self.load_cooldown_rounds
        }
        cooled: set[str] = set()
        touched: set[str] = set()
        limit = rnd.config.max_handoffs_per_worker
        for _ in range(len(members)):
            metric = {w.worker_id: self._metric(rnd, w, use_cpu) for w in members}
            total_cap = sum(max(w.capacity, 0.0) for w in members) or 1.0
            if use_cpu:
                mean_cpu = sum(metric.values()) / len(metric)
                share = {w.worker_id: mean_cpu for w in members}
            else:
                total_load = sum(rnd.load(w) for w in rnd.members)
                share = {w.worker_id: total_load * max(w.capacity, 0.0) / total_cap for w in members}
            band = {
                w: max(rnd.config.rebalance_threshold_percent / 100 * share[w], self._absolute_band(use_cpu))
                for w in share
            }
            candidates = [
                w
                for w in rnd.members
                if w in rested and w not in cooled and metric[w] > share[w] + band[w]
                if rnd.handoffs.get(w, 0) < limit
            ]
            if not candidates:
                break
            donor = max(candidates, key=lambda w: (metric[w] - share[w], w))
            receivers = [w for w in rnd.members if w != donor and w in rested and w not in cooled]
            if not receivers:
                break
            receiver = min(receivers, key=lambda w: (metric[w] - share[w], w))
            if not self._move_load(rnd, targets, by_key, donor, receiver, metric, band, use_cpu):
                cooled.add(donor)  # nothing useful to do for it this round
                continue
            cooled.update((donor, receiver))
            touched.update((donor, receiver))
        return touched

    def _absolute_band(self, use_cpu: bool) -> float:
        return self.min_cpu_band_percent if use_cpu else self.min_load_band_kbps

    def _metric(self, rnd: _Round, worker: WorkerView, use_cpu: bool) -> float:
        if use_cpu and worker.cpu_percent is not None:
            return worker.cpu_percent
        return rnd.load(worker.worker_id)

    def _cost(self, rnd: _Round, lease_key: str, worker_id: str, use_cpu: bool) -> float:
        """What one lease weighs on a worker's metric (throughput, or its share of the worker's CPU)."""
        if not use_cpu:
            return rnd.tp[lease_key]
        cpu = rnd.members[worker_id].cpu_percent or 0.0
        load = rnd.load(worker_id)
        held = len(rnd.held[worker_id]) or 1
        return cpu * rnd.tp[lease_key] / load if load > 0 else cpu / held

    def _move_load(
        self,
        rnd: _Round,
        targets: Targets,
        by_key: Mapping[str, LeaseView],
        donor: str,
        receiver: str,
        metric: Mapping[str, float],
        band: Mapping[str, float],
        use_cpu: bool,
    ) -> bool:
        gap = metric[donor] - metric[receiver]
        scale = max(rnd.members[donor].capacity, 1e-9) / max(rnd.members[receiver].capacity, 1e-9)
        donor_leases = sorted(k for k in rnd.held[donor] if rnd.movable.get(k, False))
        # A lease may change count only between same-zone equals one apart (they swap the rounded-up
        # share, which the next round's sticky targets keep); anything else is a swap, counts unchanged.
        count_ok = (
            targets.zone_of.get(donor) == targets.zone_of.get(receiver)
            and rnd.members[donor].capacity == rnd.members[receiver].capacity
            and len(rnd.held[donor]) == len(rnd.held[receiver]) + 1
        )
        best: tuple[float, str, str | None] | None = None
        need = min(band[donor], band[receiver])
        for k in donor_leases:
            c = self._cost(rnd, k, donor, use_cpu)
            if count_ok and _under_throughput_cap(rnd, receiver, rnd.tp[k]):
                new_gap = abs(gap - c - c * scale)
                if gap - new_gap > need and (best is None or new_gap < best[0]):
                    best = (new_gap, k, None)
        if best is None and rnd.handoffs.get(receiver, 0) < rnd.config.max_handoffs_per_worker:
            receiver_leases = sorted(k for k in rnd.held[receiver] if rnd.movable.get(k, False))
            for k in donor_leases:
                c = self._cost(rnd, k, donor, use_cpu)
                for other in receiver_leases:
                    d = self._cost(rnd, other, receiver, use_cpu)
                    delta = c * (1 + scale) - d * (1 + 1 / scale)
                    if delta <= 0:
                        continue
                    new_gap = abs(gap - delta)
                    if gap - new_gap > need and (best is None or new_gap < best[0]):
                        best = (new_gap, k, other)
        if best is None:
            return False
        _, k, j = best
        rnd.movable[k] = False
        rnd.give(by_key[k], receiver, graceful=rnd.config.graceful_handoff, reason="load")
        if j is not None:
            rnd.movable[j] = False
            rnd.give(by_key[j], donor, graceful=rnd.config.graceful_handoff, reason="load swap")
        return True


def _expired_owners(leases: Iterable[LeaseView]) -> set[str]:
    """Workers owning an expired lease (not in a hand-off): dead, even if their metrics item is not stale
    yet. Any one such lease is enough: a lease assigned to a dead worker after its death is not expired
    yet, and waiting for all of them gave the dead worker leases (and its own expired ones) back."""
    return {
        lease.owner
        for lease in leases
        if lease.owner is not None and lease.checkpoint_owner is None and lease.expired
    }


def _suspects(
    workers: Sequence[WorkerView], expired_owners: set[str], state: DeciderState
) -> dict[str, float]:
    """Workers to give nothing, with the metrics time they were suspected at.

    A worker becomes suspect when it owns an expired lease, and stays suspect (across rounds,
    after its leases have gone elsewhere) until it publishes newer metrics than it had then.
    """
    out: dict[str, float] = {}
    for w in workers:
        stamp = w.last_update if w.last_update is not None else -1.0
        previous = state.values.get(_SUSPECT_PREFIX + w.worker_id)
        if w.worker_id in expired_owners or (previous is not None and stamp <= previous):
            out[w.worker_id] = stamp if previous is None else max(previous, stamp)
    return out


def _under_throughput_cap(rnd: _Round, worker_id: str, tp: float) -> bool:
    cap = rnd.config.max_throughput_per_host_kbps
    return cap is None or rnd.load(worker_id) + tp <= cap or not rnd.held[worker_id]


class _Receivers:
    """Workers under target, least loaded (relative to capacity) first, then least filled."""

    def __init__(self, rnd: _Round, targets: Targets) -> None:
        self._rnd = rnd
        self._targets = targets
        self._heap: list[tuple[float, float, str]] = []
        for w in rnd.members:
            self._push(w)

    def _push(self, w: str) -> None:
        target = self._targets.per_worker.get(w, 0)
        held = len(self._rnd.held[w])
        if held < target:
            capacity = max(self._rnd.members[w].capacity, 1e-9)
            heapq.heappush(self._heap, (self._rnd.load(w) / capacity, held / target, w))

    def pop(self, tp: float) -> str | None:
        """The best receiver for a lease of throughput ``tp``; it is counted as receiving it."""
        skipped: list[tuple[float, float, str]] = []
        chosen: str | None = None
        while self._heap:
            entry = heapq.heappop(self._heap)
            if _under_throughput_cap(self._rnd, entry[2], tp):
                chosen = entry[2]
                break
            skipped.append(entry)
        for entry in skipped:
            heapq.heappush(self._heap, entry)
        return chosen

    def received(self, w: str) -> None:
        self._push(w)


def frozen_workers(workers: Iterable[WorkerView], now: float) -> frozenset[str]:
    """The workers whose leases wait for them: RESTARTING with a grace that has not passed (the rule of
    :meth:`CooperativeAssignor.decide` and of the followers' fallback taker)."""
    return frozenset(
        w.worker_id
        for w in workers
        if w.state is WorkerState.RESTARTING and w.grace_until is not None and w.grace_until > now
    )
