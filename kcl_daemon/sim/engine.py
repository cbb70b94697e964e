"""A deterministic, seeded, discrete-time fleet: leases, renewals, takers or a leader, and the meters.

Time advances in steps of ``dt`` seconds. In each step, in this order: scenario events; completed graceful
hand-offs; renewals (each worker renews all it holds every ``failover/3 - 25 ms`` on its own phase, or
with ``lease_renewal = PER_WORKER`` under the 2.x taker or this project's leader writes one heartbeat
instead, which the takers read through :func:`~kcl_daemon.core.leases.heartbeat.vouched` and the leader as
the later of a lease's counter change and its owner's heartbeat; a lease whose owner changed is dropped at
that renewal, or that scan, so a taken lease is served twice until then); then either every 2.x worker's
taker (on its own ``(failover + 25 ms) x 2`` phase, through
:func:`~kcl_daemon.core.leases.taker.plan_takes`, each take conditional on the counter it read), or the
3.x leader's round (every assignment interval, leader-local expiry like Java's LAM, the decider's moves
applied as hand-offs or assigns) and each worker's lease discovery (Java's every ``interval/2 - 25 ms``;
this daemon's no slower than its expiry passes, ``min(1 s, failover/10)``); finally the meters. Every
period comes from :class:`~kcl_daemon.core.leases.timings.LeaseTimings`, as in the worker.

Simplifications, each the same for every policy: 2.x takers share one observation of counter changes
(true change times, first-seen-unowned = never changed) instead of one per worker; a graceful stop
checkpoints at once, so a lease it held is never processed twice; a split or merge ends its parents at
once. DynamoDB units: every write is 1 WCU (items < 1 KB), a scan costs 1 RCU per 4 KB read
(consistent), a GSI query 0.5 RCU, each ownership change 1 more WCU on the 3.x owner index; per-worker
renewal under the 2.x taker adds each worker's heartbeat reads between its full runs (one small scan
every ``max(expiry passes, renewal period / 2)``), and no expiry pass scans the lease table.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from kcl_daemon.core.leader.assignor import compute_targets
from kcl_daemon.core.leader.decider import (
    DeciderConfig,
    DeciderState,
    LeaseView,
    Move,
    WorkerState,
    WorkerView,
)
from kcl_daemon.core.leader.leader_lock import replaced_within_s
from kcl_daemon.core.leases.expiry import NEVER_CHANGED, CounterObservation, LeaseObservations
from kcl_daemon.core.leases.heartbeat import HeartbeatObservations, RenewalMode, WorkerItem, vouched
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.taker import TakerConfig, plan_takes
from kcl_daemon.core.sequence import TRIM_HORIZON
from kcl_daemon.sim.balanced import is_balanced
from kcl_daemon.sim.model import Event, EventKind, FleetConfig, Result, Scenario
from kcl_daemon.sim.policies import Mode, Policy

HANDOFF_TIMEOUT_S = 30.0
SMALL_FLEET = 40


@dataclass(slots=True)
class _Lease:
    key: str
    tp: float
    owner: str | None = None
    counter: int = 0
    checkpoint_owner: str | None = None
    finished: bool = False
    changed_at: float = NEVER_CHANGED
    tp_known: bool = False
    parents: tuple[str, ...] = ()


@dataclass(slots=True)
class _Worker:
    id: str
    zone: str | None
    capacity: float
    phase: float
    up: bool = True
    held: set[str] = field(default_factory=set)
    state: WorkerState = WorkerState.ACTIVE
    grace_until: float | None = None
    metrics_at: float | None = None
    cpu: float = 0.0
    #: per-worker renewal: when its heartbeat last advanced (true time, as every lease's ``changed_at``)
    beat_at: float = NEVER_CHANGED


@dataclass(slots=True)
class _Shadow:
    """Lease counts per worker in an ideal fleet, for the lower bound of moves."""

    counts: dict[str, int] = field(default_factory=dict)
    bound: int = 0


class Simulation:
    def __init__(
        self, scenario: Scenario, policy: Policy, fleet: FleetConfig, seed: int = 0, dt: float = 1.0
    ):
        self.scenario = scenario
        self.policy = policy
        self.fleet = fleet
        self.dt = dt
        self.rng = random.Random(seed)  # noqa: S311 - a reproducible simulation, not security
        self.leases: dict[str, _Lease] = {}
        self.workers: dict[str, _Worker] = {}
        self.result = Result(scenario.name, policy.name)
        self.decider_config = DeciderConfig(
            failover_s=fleet.failover_s,
            max_leases_for_worker=fleet.max_leases_for_worker,
            max_throughput_per_host_kbps=fleet.max_throughput_per_host_kbps,
            max_handoffs_per_worker=fleet.max_handoffs_per_worker,
        )
        self.taker_config = TakerConfig(
            failover_s=fleet.failover_s, max_leases_for_worker=fleet.max_leases_for_worker
        )
        self.leader: str | None = None
        self.leader_down_since: float | None = 0.0
        self.next_round = 0.0
        self.state = DeciderState()
        self.leader_seen: dict[str, tuple[int, float]] = {}
        #: per worker: the leader's view of each worker's heartbeat (its value, when the leader saw it change)
        self.leader_beats: dict[str, tuple[float, float]] = {}
        self.handoff_seen: dict[str, float] = {}
        self.pending: list[tuple[float, str, str]] = []  # (done at, lease, old owner)
        self.reads = 0.0
        self.writes = 0.0
        self.lease_time = 0.0
        self.decider_s: list[float] = []
        self.balanced_since: float | None = None
        self.last_disruption = 0.0
        self.shadow = _Shadow()
        self.graceful_stops: set[str] = set()
        for key in scenario.shards:
            self.leases[key] = _Lease(key, scenario.throughput.get(key, fleet.lease_kbps))

    # --- helpers -----------------------------------------------------------------------------------

    def _scan_units(self, items: int) -> float:
        return max(1.0, math.ceil(items * self.fleet.lease_item_bytes / 4096))

    def _live(self) -> Iterable[_Lease]:
        return (lease for lease in self.leases.values() if not lease.finished)

    def _set_owner(self, lease: _Lease, to: str, now: float, graceful: bool, reason: str) -> None:
        previous = lease.checkpoint_owner or lease.owner
        if previous is not None and previous != to:
            self.result.moves += 1
            old = self.workers.get(previous)
            serving = old is not None and old.up and lease.key in old.held
            if graceful:
                self.result.handoffs += 1
            elif serving:
                self.result.duplicate_risk_moves += 1
        if self.policy.mode is Mode.LEADER:
            self.writes += 1  # the owner index
        self.writes += 1
        if graceful and previous is not None:
            lease.checkpoint_owner = previous
            lease.owner = to
            old = self.workers.get(previous)
            if old is not None and old.up and lease.key in old.held:
                self.pending.append((now + self.fleet.handoff_s, lease.key, previous))
            return
        lease.owner = to
        lease.checkpoint_owner = None
        lease.counter += 1
        lease.changed_at = now

    # --- events ------------------------------------------------------------------------------------

    def _event(self, event: Event, now: float) -> None:
        kind = event.kind
        if kind is EventKind.START:
            w = self.workers.get(event.worker)
            if w is None:
                phase = self.rng.uniform(0, self.fleet.taker_period_s)
                w = _Worker(event.worker, event.zone, event.capacity, phase)
                self.workers[w.id] = w
            w.up, w.state, w.grace_until, w.held = True, WorkerState.ACTIVE, None, set()
            w.metrics_at = now
            # Start-up renews what the table says is ours (2.x), or discovers it at once (3.x).
            for lease in self._live():
                if lease.owner == w.id and lease.checkpoint_owner is None:
                    w.held.add(lease.key)
                    lease.counter += 1
                    lease.changed_at = now
                    self.writes += 1
            if self.leader is None and self.leader_down_since is not None:
                self._maybe_elect(now)
        elif kind in (EventKind.CRASH, EventKind.STOP):
            w = self.workers[event.worker]
            w.up = False
            w.held = set()
            if kind is EventKind.STOP and self.fleet.restart_grace_s > 0:
                self.graceful_stops.add(w.id)
            else:
                self.graceful_stops.discard(w.id)
            if kind is EventKind.STOP and self.policy.declares_grace and self.fleet.restart_grace_s > 0:
                w.state, w.grace_until, w.metrics_at = (
                    WorkerState.RESTARTING,
                    now + self.fleet.restart_grace_s,
                    now,
                )
            if self.leader == w.id:
                self.leader, self.leader_down_since = None, now
        elif kind is EventKind.SPLIT:
            for parent in event.shards:
                self.leases[parent].finished = True
                for n in (0, 1):
                    child = f"{parent}.{n}"
                    self.leases[child] = _Lease(child, self.leases[parent].tp / 2, parents=(parent,))
        elif kind is EventKind.MERGE:
            for parent in event.shards:
                self.leases[parent].finished = True
            child = "+".join(event.shards)
            self.leases[child] = _Lease(
                child, sum(self.leases[p].tp for p in event.shards), parents=event.shards
            )
        if event.disruptive:
            self.last_disruption = now

    def _shadow_tick(self, events: list[Event], first: bool) -> None:
        """Advance the ideal fleet by the fewest moves this tick's events require (the lower bound).

        Members: workers that are up, and (with a restart grace) those stopped gracefully, whose leases
        may wait for them. Leases of any other worker must move; then each member's surplus over its
        sticky target (zones and capacity as the assignor computes them) must move.
        """
        sh = self.shadow
        members = [w for w in self.workers.values() if w.up or w.id in self.graceful_stops]
        member_ids = {w.id for w in members}
        counts = {w: c for w, c in sh.counts.items() if w in member_ids}
        orphaned = sum(c for w, c in sh.counts.items() if w not in member_ids)
        for event in events:
            if event.kind in (EventKind.SPLIT, EventKind.MERGE):
                for parent in event.shards:
                    owner = self.leases[parent].owner
                    if owner is not None and counts.get(owner, 0) > 0:
                        counts[owner] -= 1
        if not members:
            sh.counts = {}
            return
        total = sum(1 for _ in self._live())
        views = [WorkerView(w.id, zone=w.zone, capacity=w.capacity) for w in members]
        targets = compute_targets(total, views, counts, self.fleet.max_leases_for_worker)
        if not first:
            sh.bound += orphaned + sum(max(0, c - targets.per_worker.get(w, 0)) for w, c in counts.items())
        sh.counts = dict(targets.per_worker)

    # --- renewals and hand-offs --------------------------------------------------------------------

    def _complete_handoffs(self, now: float) -> None:
        due = [p for p in self.pending if p[0] <= now]
        self.pending = [p for p in self.pending if p[0] > now]
        for _, key, old in due:
            lease = self.leases[key]
            w = self.workers.get(old)
            if lease.checkpoint_owner != old or w is None or not w.up:
                continue
            lease.checkpoint_owner = None
            lease.counter += 1
            lease.changed_at = now
            w.held.discard(key)
            self.writes += 1

    @property
    def _per_worker(self) -> bool:
        """Renewing per worker: the key on, and the 2.x taker or a leader that reads the heartbeats (under
        Java's leader, which reads counters only, a kcl-daemon fleet renews per lease)."""
        return self.fleet.per_worker and (self.policy.mode is Mode.TAKER or self.policy.reads_heartbeats)

    def _renew(self, now: float) -> None:
        period = self.fleet.renew_period_s
        per_worker = self._per_worker
        for w in self.workers.values():
            if not w.up or (now - w.phase) % period >= self.dt:
                continue
            if per_worker:  # one heartbeat write; the worker's scans tell it of leases moved on
                w.beat_at = now
                self.writes += 1
            for key in list(w.held):
                lease = self.leases[key]
                if lease.finished or (lease.owner != w.id and lease.checkpoint_owner != w.id):
                    w.held.discard(key)
                    continue
                if per_worker:
                    lease.tp_known = True
                    continue
                lease.counter += 1
                lease.changed_at = now
                lease.tp_known = True
                self.writes += 1

    # --- 2.x ---------------------------------------------------------------------------------------

    def _takers(self, now: float) -> None:
        period = self.fleet.taker_period_s
        due = [w for w in self.workers.values() if w.up and (now - w.phase) % period < self.dt]
        if not due:
            return
        live = [lease for lease in self.leases.values() if not lease.finished]
        table = {
            lease.key: Lease(lease.key, TRIM_HORIZON, lease_owner=lease.owner, lease_counter=lease.counter)
            for lease in live
        }
        observations = LeaseObservations(
            {
                lease.key: CounterObservation(
                    lease.counter, NEVER_CHANGED if lease.owner is None else max(lease.changed_at, 0.0)
                )
                for lease in live
            }
        )
        if self.fleet.per_worker:  # expired only when the counter and the owner's heartbeat stood still
            beats = HeartbeatObservations()
            for w in self.workers.values():
                if w.beat_at > NEVER_CHANGED:
                    beats = beats.record_beat(WorkerItem(w.id, 1, RenewalMode.PER_WORKER), w.beat_at)
            observations = vouched(table.values(), observations, beats)
        plans = []
        for w in sorted(due, key=lambda w: w.id):
            start = time.perf_counter()
            plan = plan_takes(table.values(), observations, w.id, now, self.taker_config, self.rng)
            self.decider_s.append(time.perf_counter() - start)
            self.reads += self._scan_units(len(live))
            plans.append((w, plan.all))
        # Workers due in the same step run concurrently: their conditional takes interleave.
        for i in range(max((len(takes) for _, takes in plans), default=0)):
            for w, takes in plans:
                if i >= len(takes):
                    continue
                lease = self.leases[takes[i].lease_key]
                if lease.counter != takes[i].expected_counter:
                    continue  # someone else's take won
                self._set_owner(lease, w.id, now, graceful=False, reason=takes[i].kind.value)
                w.held.add(lease.key)

    def _heartbeat_reads(self, now: float) -> None:
        """Per-worker renewal: between its full runs each 2.x worker reads the heartbeats (one small scan)
        every ``heartbeat_read_s`` and the lease table only when something may have come due
        (:mod:`kcl_daemon.core.leases.lease_reads`; those few scans are not modelled)."""
        if not self.fleet.per_worker:
            return
        period = self.fleet.timings.heartbeat_read_s
        for w in self.workers.values():
            if w.up and (now - w.phase) % period < self.dt:
                self.reads += self._scan_units(len(self.workers))

    # --- 3.x ---------------------------------------------------------------------------------------

    def _maybe_elect(self, now: float) -> None:
        if self.leader is not None:
            return
        wait = self.fleet.leader_failover_s
        if self.policy.lock_follows_failover:
            wait = replaced_within_s(self.fleet.failover_s)  # the lock lasts the failover time
        if self.leader_down_since is not None and now - self.leader_down_since < wait and now > 0:
            return
        up = sorted(w.id for w in self.workers.values() if w.up)
        if up:
            self.leader, self.leader_down_since = up[0], None
            self.state = DeciderState()
            self.leader_seen = {}
            self.leader_beats = {}
            self.handoff_seen = {}
            self.next_round = now

    def _publish_metrics(self, now: float) -> None:
        period = self.fleet.metrics_period_s
        for w in self.workers.values():
            if not w.up or (now - w.phase) % period >= self.dt:
                continue
            load = sum(self.leases[k].tp for k in w.held)
            jitter = self.rng.uniform(-self.fleet.cpu_jitter, self.fleet.cpu_jitter)
            w.cpu = min(
                100.0, max(0.0, self.fleet.cpu_base + jitter + self.fleet.cpu_per_kbps * load / w.capacity)
            )
            w.metrics_at = now
            self.writes += 1

    def _worker_views(self, now: float) -> list[WorkerView]:
        views = []
        stale = 2 * self.fleet.metrics_period_s
        for w in sorted(self.workers.values(), key=lambda w: w.id):
            restarting = w.state is WorkerState.RESTARTING and w.grace_until is not None and not w.up
            if restarting:
                views.append(
                    WorkerView(
                        w.id, zone=w.zone, capacity=w.capacity, state=w.state, grace_until=w.grace_until
                    )
                )
            elif w.metrics_at is not None and now - w.metrics_at <= stale:
                views.append(
                    WorkerView(
                        w.id, zone=w.zone, cpu_percent=w.cpu, capacity=w.capacity, last_update=w.metrics_at
                    )
                )
        return views

    def _lease_views(self, now: float) -> tuple[list[LeaseView], set[str]]:
        views = []
        frozen: set[str] = set()
        failover = self.fleet.failover_s
        for lease in self.leases.values():
            seen = self.leader_seen.get(lease.key)
            if seen is None:
                seen = (lease.counter, now if lease.owner is not None else NEVER_CHANGED)
            elif seen[0] != lease.counter:
                seen = (lease.counter, now)
            self.leader_seen[lease.key] = seen
            changed_at = seen[1]
            owner = self.workers.get(lease.owner) if lease.owner is not None else None
            if self._per_worker and owner is not None:  # the owner's heartbeat vouches for it
                changed_at = max(changed_at, self._beat_seen(owner, now))
            expired = now - changed_at > failover
            if lease.checkpoint_owner is not None:
                first = self.handoff_seen.setdefault(lease.key, now)
                if now - first <= HANDOFF_TIMEOUT_S + failover:
                    frozen.add(lease.key)
                else:
                    expired = True
            else:
                self.handoff_seen.pop(lease.key, None)
            views.append(
                LeaseView(
                    lease.key,
                    lease.owner,
                    lease.counter,
                    expired=expired,
                    throughput_kbps=lease.tp if lease.tp_known else None,
                    checkpoint_owner=lease.checkpoint_owner,
                    finished=lease.finished,
                    parent_keys=lease.parents,
                )
            )
        return views, frozen

    def _beat_seen(self, w: _Worker, now: float) -> float:
        """When the leader saw ``w``'s heartbeat change (first seen: now), as it sees counters."""
        if w.beat_at == NEVER_CHANGED:
            return NEVER_CHANGED
        seen = self.leader_beats.get(w.id)
        if seen is None or seen[0] != w.beat_at:
            seen = (w.beat_at, now)
            self.leader_beats[w.id] = seen
        return seen[1]

    def _leader_round(self, now: float) -> None:
        self._maybe_elect(now)
        if self.leader is None or now < self.next_round or self.policy.decider is None:
            return
        self.next_round = now + self.fleet.interval_s
        leases, frozen = self._lease_views(now)
        workers = self._worker_views(now)
        self.reads += self._scan_units(len(leases)) + self._scan_units(len(workers))
        start = time.perf_counter()
        decision = self.policy.decider.decide(leases, workers, now, self.state, self.decider_config)
        self.decider_s.append(time.perf_counter() - start)
        self.state = decision.state
        for move in decision.moves:
            self._apply(move, now, frozen)

    def _apply(self, move: Move, now: float, frozen: set[str]) -> None:
        lease = self.leases.get(move.lease_key)
        if lease is None or move.lease_key in frozen or lease.counter != move.lease_counter:
            return
        graceful = move.graceful and lease.checkpoint_owner is None and lease.owner is not None
        self._set_owner(lease, move.to_worker, now, graceful, move.reason)

    def _discover(self, now: float) -> None:
        period = (
            self.fleet.discovery_period_s
            if self.policy.daemon_discovery
            else self.fleet.java_discovery_period_s
        )
        due = [w for w in self.workers.values() if w.up and (now - w.phase) % period < self.dt]
        if not due:
            return
        owned: dict[str, list[str]] = {}
        for lease in self._live():
            if lease.owner is not None and lease.checkpoint_owner is None:
                owned.setdefault(lease.owner, []).append(lease.key)
        for w in due:
            self.reads += 0.5
            for key in owned.get(w.id, ()):
                if key not in w.held:
                    w.held.add(key)
                    self.reads += 1

    # --- meters ------------------------------------------------------------------------------------

    def _meter(self, now: float, sample: bool) -> None:
        live = [lease for lease in self.leases.values() if not lease.finished]
        served: set[str] = set()
        for w in self.workers.values():
            if w.up:
                served |= w.held
        unserved = sum(1 for lease in live if lease.key not in served)
        self.result.unserved_lease_s += unserved * self.dt
        self.lease_time += len(live) * self.dt
        members = [w for w in self.workers.values() if w.up]
        counts = {w.id: 0 for w in members}
        for lease in live:
            if lease.owner in counts:
                counts[lease.owner] += 1
        balanced = unserved == 0 and bool(members) and is_balanced(len(live), members, counts)
        if balanced and self.balanced_since is None:
            self.balanced_since = now
        elif not balanced:
            self.balanced_since = None
        if sample:
            zones: dict[str, int] = {}
            for w in members:
                zones[w.zone or "-"] = zones.get(w.zone or "-", 0) + counts[w.id]
            values = list(counts.values()) or [0]
            self.result.timeline.append((now, zones, min(values), max(values)))
            if len(self.workers) <= SMALL_FLEET:
                self.result.worker_timeline.append((now, dict(counts)))

    def _finish(self) -> Result:
        r = self.result
        live = [lease for lease in self.leases.values() if not lease.finished]
        members = [w for w in self.workers.values() if w.up]
        counts = {w.id: 0 for w in members}
        loads = {w.id: 0.0 for w in members}
        zones: dict[str, int] = {}
        for lease in live:
            if lease.owner in counts:
                counts[lease.owner] += 1
                loads[lease.owner] += lease.tp
        for w in members:
            zones[w.zone or "-"] = zones.get(w.zone or "-", 0) + counts[w.id]
        r.max_leases = max(counts.values(), default=0)
        r.min_leases = min(counts.values(), default=0)
        r.max_load_kbps = max(loads.values(), default=0.0)
        r.min_load_kbps = min(loads.values(), default=0.0)
        r.zone_leases = dict(sorted(zones.items()))
        r.moves_lower_bound = self.shadow.bound
        if self.balanced_since is not None:
            r.time_to_balance_s = max(0.0, self.balanced_since - self.last_disruption)
        lease_hours = self.lease_time / 3600 or 1.0
        r.ddb_read_units_per_lease_hour = self.reads / lease_hours
        r.ddb_write_units_per_lease_hour = self.writes / lease_hours
        r.rounds = len(self.decider_s)
        if self.decider_s:
            r.decider_ms_per_round = 1000 * sum(self.decider_s) / len(self.decider_s)
            r.decider_ms_max = 1000 * max(self.decider_s)
        return r

    # --- the loop ----------------------------------------------------------------------------------

    def run(self, sample_s: float = 5.0) -> Result:
        for key, owner in self.scenario.initial_owners.items():
            self.leases[key].owner = owner
            self.leases[key].counter = 1
            self.leases[key].changed_at = 0.0
            self.leases[key].tp_known = True
        events = sorted(self.scenario.events, key=lambda e: e.at)
        steady = self.scenario.initial_owners
        i = 0
        now = 0.0
        steps = int(self.scenario.horizon_s / self.dt)
        next_sample = 0.0
        for step in range(steps + 1):
            now = step * self.dt
            happened = []
            while i < len(events) and events[i].at <= now:
                self._event(events[i], now)
                happened.append(events[i])
                i += 1
            if step == 0 and steady:
                for key, owner in steady.items():
                    self.workers[owner].held.add(key)
                for owner in steady.values():
                    self.shadow.counts[owner] = self.shadow.counts.get(owner, 0) + 1
            elif happened:
                self._shadow_tick(happened, first=step == 0)
            self._complete_handoffs(now)
            self._renew(now)
            if self.policy.mode is Mode.TAKER:
                self._takers(now)
                self._heartbeat_reads(now)
            else:
                self._publish_metrics(now)
                self._leader_round(now)
                self._discover(now)
            sample = now >= next_sample
            if sample:
                next_sample += sample_s
            self._meter(now, sample)
        return self._finish()


def simulate(
    scenario: Scenario, policy: Policy, fleet: FleetConfig, seed: int = 0, dt: float = 1.0
) -> Result:
    """Run one policy through one scenario."""
    return Simulation(scenario, policy, fleet, seed, dt).run()
