"""Java's ``VarianceBasedLeaseAssignmentDecider`` (contract §5.1-5.2) behind the :class:`Decider` interface.

This is the faithful baseline of leader-based assignment: the same arithmetic, order and quirks as the
Java leader, so the simulator and the daemon can compare our assignor against what a Java fleet does.
One :meth:`VarianceDecider.decide` call is one LAM run:

1. every lease gets a throughput (its own, else the mean of those that have one, else 0); the target
   average throughput per worker is ``mean x leases / active workers``; each lease is attributed to its
   *actual owner* (``checkpoint_owner`` if set, else ``owner``);
2. every ACTIVE worker gets metric values: ``C`` = its CPU percent (operating range 100) when it
   publishes one, else the synthetic ``T`` = 100 x assigned throughput / target average throughput;
   fleet averages are per metric name;
3. assignable workers (throughput <= ``max_throughput_per_host_kbps`` and fewer than
   ``max_leases_for_worker`` leases) sit in a max-queue keyed by the capacity to reach the average,
   ``min over metrics of (avg - value) / value`` (1 when the value is 0);
4. expired or unowned leases (unowned first) each go to the worker at the head of the queue, unless it
   is already the actual owner (then nothing moves, except for an expired pending hand-off); the
   receiver's metrics are extrapolated (``+ t x avg / targetThroughput``, or ``+ avg / targetLeases``
   when the target throughput is 0) and it goes back in the queue while under its caps;
5. every ``balancing_frequency``-th run (the first run of a new leader included): variance balancing
   on the metric with the largest dampened throughput to move (donors above ``avg x (1 + t)`` or above
   their operating range, else the single most loaded worker; ``throughputToTake = assigned x
   (value - avg) / value x dampening``; leases picked in random order while the remainder stays > 0,
   else the smallest when overshoot is allowed, exactly one when the donor's throughput is 0); each
   picked lease goes to the head of the queue unless that worker's extrapolated metric would exceed the
   average or its operating range, which abandons the donor's remaining moves (and drops that worker
   from the queue, as Java does).

Differences that the interface forces, each deliberate:

* Java sorts expired leases by the time of their last counter change; :class:`LeaseView` only says
  ``expired``, so unowned leases come first, then expired ones, each group by lease key.
* Java's queue breaks ties arbitrarily; here ties go first-in first-out (workers by id at the start),
  which spreads a cold start round-robin. A ``0 / 0`` utilisation (no throughput known yet) is 0 here,
  where Java computes NaN and ends up with a similar arbitrary round-robin.
* ``finished`` (SHARD_END) leases count in the totals but are never moved; a lease with a hand-off in
  progress that is not expired is never moved (Java's leader skips it when writing).
* Only ACTIVE workers are assignable: RESTARTING and LEAVING are states Java does not know, and such
  a worker stops publishing metrics, which in Java makes it inactive.

Randomness (the donor's lease order) comes from ``random.Random`` seeded with the decider's ``seed`` and
the run number kept in :class:`DeciderState`, so a run is reproducible.

``fixed_width_threshold`` is the opt-in of KCL #1814 (open, not in a release): the threshold becomes a
band of ``reBalanceThresholdPercentage`` points centred on the average (``avg ± t/2``) instead of
``avg x (1 ± t/100)``, which at low CPU is narrower than normal jitter; zero-throughput leases are never
picked to move; and a balancing run whose expected effect on the metric is under 1 point moves nothing
(the effect is read as the throughput to move extrapolated onto the metric, ``tp x avg / target tp``;
contract §5.2).
"""

from __future__ import annotations

import heapq
import random
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

CPU: Final = "C"
THROUGHPUT: Final = "T"
OPERATING_RANGE_MAX: Final = 100.0
RUN_COUNTER: Final = "variance.run"
DEFAULT_BALANCING_FREQUENCY: Final = 3


def ema(samples: Iterable[float], alpha: float = 0.5) -> float:
    """Java's WorkerMetricStats average: an EMA over the stored samples, skipping -1 (failed capture).

    The first sample seeds the average; each next one gives ``alpha x sample + (1 - alpha) x avg``.
    Returns 0 when there is no valid sample.
    """
    value: float | None = None
    for sample in samples:
        if sample == -1:
            continue
        value = sample if value is None else alpha * sample + (1 - alpha) * value
    return 0.0 if value is None else value


@dataclass(slots=True)
class _Worker:
    """One active worker's mutable metric values during a run (Java's WorkerMetricStats)."""

    worker_id: str
    metrics: dict[str, float]

    def percentage_to_reach_average(self, averages: Mapping[str, float]) -> float:
        best = float("inf")
        for name, value in self.metrics.items():
            ratio = 1.0 if value == 0 else (averages[name] - value) / value
            best = min(best, ratio)
        return best

    def extrapolated(
        self, name: str, averages: Mapping[str, float], target_tp: float, t: float, per: int
    ) -> float:
        if target_tp > 0:
            return self.metrics[name] + t * averages[name] / target_tp
        return self.metrics[name] + averages[name] / per

    def add_throughput(self, averages: Mapping[str, float], target_tp: float, t: float, per: int) -> None:
        for name in self.metrics:
            self.metrics[name] = self.extrapolated(name, averages, target_tp, t, per)

    def would_exceed(self, averages: Mapping[str, float], target_tp: float, t: float, per: int) -> bool:
        for name in self.metrics:
            value = self.extrapolated(name, averages, target_tp, t, per)
            if value > averages[name] or value > OPERATING_RANGE_MAX:
                return True
        return False

    def above_operating_range(self, name: str) -> bool:
        return name in self.metrics and self.metrics[name] > OPERATING_RANGE_MAX


@dataclass(slots=True)
class _Run:
    """The in-memory view of one LAM run (Java's InMemoryStorageView plus the decider's queue)."""

    config: DeciderConfig
    leases: dict[str, LeaseView]
    throughput: dict[str, float]
    owner: dict[str, str | None]
    held: dict[str | None, set[str]]
    assigned_tp: dict[str | None, float]
    workers: dict[str, _Worker]
    averages: dict[str, float]
    target_tp: float
    target_leases: int
    queue: list[tuple[float, int, str]] = field(default_factory=list)
    seq: int = 0
    new_owner: dict[str, str] = field(default_factory=dict)
    via_expiry: set[str] = field(default_factory=set)

    def under_caps(self, worker_id: str) -> bool:
        cap = self.config.max_throughput_per_host_kbps
        if cap is not None and self.assigned_tp.get(worker_id, 0.0) > cap:
            return False
        return len(self.held.get(worker_id, ())) < self.config.max_leases_for_worker

    def push(self, worker_id: str) -> None:
        key = self.workers[worker_id].percentage_to_reach_average(self.averages)
        heapq.heappush(self.queue, (-key, self.seq, worker_id))
        self.seq += 1

    def pop(self) -> _Worker | None:
        if not self.queue:
            return None
        return self.workers[heapq.heappop(self.queue)[2]]

    def assign(self, lease_key: str, worker: _Worker, expired_phase: bool) -> None:
        lease = self.leases[lease_key]
        pending_expired = expired_phase and lease.checkpoint_owner is not None
        current = self.owner[lease_key]
        if not pending_expired and current == worker.worker_id:
            self.push(worker.worker_id)
            return
        t = self.throughput[lease_key]
        worker.add_throughput(self.averages, self.target_tp, t, self.target_leases)
        self.held.setdefault(current, set()).discard(lease_key)
        self.held.setdefault(worker.worker_id, set()).add(lease_key)
        self.assigned_tp[current] = self.assigned_tp.get(current, 0.0) - t
        self.assigned_tp[worker.worker_id] = self.assigned_tp.get(worker.worker_id, 0.0) + t
        self.owner[lease_key] = worker.worker_id
        self.new_owner[lease_key] = worker.worker_id
        if expired_phase:
            self.via_expiry.add(lease_key)
        if self.under_caps(worker.worker_id):
            self.push(worker.worker_id)


def _load(leases: Sequence[LeaseView], workers: Sequence[WorkerView], config: DeciderConfig) -> _Run:
    known = [lease.throughput_kbps for lease in leases if lease.throughput_kbps is not None]
    mean_tp = sum(known) / len(known) if known else 0.0
    active = sorted((w for w in workers if w.state is WorkerState.ACTIVE), key=lambda w: w.worker_id)
    target_tp = mean_tp * len(leases) / max(1, len(active))
    throughput: dict[str, float] = {}
    owner: dict[str, str | None] = {}
    held: dict[str | None, set[str]] = {}
    assigned_tp: dict[str | None, float] = {}
    for lease in leases:
        t = lease.throughput_kbps if lease.throughput_kbps is not None else mean_tp
        actual = lease.actual_owner
        throughput[lease.lease_key] = t
        owner[lease.lease_key] = actual
        held.setdefault(actual, set()).add(lease.lease_key)
        assigned_tp[actual] = assigned_tp.get(actual, 0.0) + t
    run_workers: dict[str, _Worker] = {}
    for w in active:
        if w.cpu_percent is not None:
            metrics = {CPU: float(w.cpu_percent)}
        else:
            tp = assigned_tp.get(w.worker_id, 0.0)
            metrics = {THROUGHPUT: 100.0 * tp / target_tp if target_tp > 0 else 0.0}
        run_workers[w.worker_id] = _Worker(w.worker_id, metrics)
    sums: dict[str, list[float]] = {}
    for rw in run_workers.values():
        for name, value in rw.metrics.items():
            sums.setdefault(name, []).append(value)
    averages = {name: sum(values) / len(values) for name, values in sums.items()}
    run = _Run(
        config=config,
        leases={lease.lease_key: lease for lease in leases},
        throughput=throughput,
        owner=owner,
        held=held,
        assigned_tp=assigned_tp,
        workers=run_workers,
        averages=averages,
        target_tp=target_tp,
        target_leases=max(len(leases) // max(len(active), 1), 1),
    )
    for worker_id in run_workers:
        if run.under_caps(worker_id):
            run.push(worker_id)
    return run


def _assign_expired_or_unassigned(run: _Run) -> None:
    candidates = [
        lease
        for lease in run.leases.values()
        if not lease.finished and (lease.expired or lease.actual_owner is None)
    ]
    candidates.sort(key=lambda lease: (lease.actual_owner is not None, lease.lease_key))
    for lease in candidates:
        worker = run.pop()
        if worker is None:
            break
        run.assign(lease.lease_key, worker, expired_phase=True)


#: KCL #1814: a balancing run expected to change the metric by less than this many points moves nothing
MIN_EXPECTED_IMPACT_POINTS: Final = 1.0


def _band(run: _Run, average: float, fixed_width: bool) -> tuple[float, float]:
    t = run.config.rebalance_threshold_percent
    if fixed_width:
        return average + t / 2, average - t / 2
    return average * (1 + t / 100), average * (1 - t / 100)


def _donors(run: _Run, name: str, average: float, fixed_width: bool = False) -> list[_Worker]:
    upper, lower = _band(run, average, fixed_width)
    triggered = False
    donors: list[_Worker] = []
    most_loaded: _Worker | None = None
    for worker in run.workers.values():
        if name not in worker.metrics:
            continue
        value = worker.metrics[name]
        above_range = worker.above_operating_range(name)
        if value > upper or value < lower or above_range:
            triggered = True
        if value >= upper or above_range:
            donors.append(worker)
        if most_loaded is None or most_loaded.metrics[name] < value:
            most_loaded = worker
    if not donors and most_loaded is not None:
        donors.append(most_loaded)
    return donors if triggered else []


def _leases_to_take(
    run: _Run, worker_id: str, amount: float, rng: random.Random, fixed_width: bool = False
) -> list[str]:
    # A finished (SHARD_END) lease counts in the donor's totals but is never moved; with #1814 neither is a
    # lease without throughput (moving it changes nothing).
    existing = sorted(
        key
        for key in run.held.get(worker_id, ())
        if not run.leases[key].finished and not (fixed_width and run.throughput[key] <= 0)
    )
    if not existing:
        return []
    if run.assigned_tp.get(worker_id, 0.0) == 0:
        return existing[:1]
    rng.shuffle(existing)
    taken: list[str] = []
    remaining = amount
    for key in existing:
        t = run.throughput[key]
        if remaining - t <= 0:
            continue
        remaining -= t
        taken.append(key)
    if run.config.allow_throughput_overshoot and not taken:
        taken.append(min(existing, key=lambda k: run.throughput[k]))
    return taken


def _balance_variance(run: _Run, rng: random.Random, fixed_width: bool = False) -> None:
    to_take: dict[str, float] = {}
    max_take = -1.0
    chosen = ""
    for name in sorted(run.averages):
        average = run.averages[name]
        this_metric: dict[str, float] = {}
        total = 0.0
        for donor in _donors(run, name, average, fixed_width):
            value = donor.metrics[name]
            fraction = (value - average) / value if value else 0.0
            amount = run.assigned_tp.get(donor.worker_id, 0.0) * fraction * run.config.dampening_percent / 100
            this_metric[donor.worker_id] = amount
            total += amount
        if max_take < total:
            max_take = total
            to_take = this_metric
            chosen = name
    if fixed_width and to_take:
        average = run.averages[chosen]
        impact = max_take * average / run.target_tp if run.target_tp > 0 else 0.0
        if impact < MIN_EXPECTED_IMPACT_POINTS:
            return
    for donor_id, amount in sorted(to_take.items(), key=lambda item: (-item[1], item[0])):
        for lease_key in _leases_to_take(run, donor_id, amount, rng, fixed_width):
            worker = run.pop()
            if worker is None:
                continue
            t = run.throughput[lease_key]
            if worker.would_exceed(run.averages, run.target_tp, t, run.target_leases):
                break
            run.assign(lease_key, worker, expired_phase=False)


def _moves(run: _Run) -> tuple[Move, ...]:
    moves: list[Move] = []
    for lease_key in sorted(run.new_owner):
        lease = run.leases[lease_key]
        to_worker = run.new_owner[lease_key]
        from_worker = lease.actual_owner
        if to_worker == from_worker and lease.checkpoint_owner is None:
            continue
        if lease.checkpoint_owner is not None and not lease.expired:
            continue  # a hand-off in progress: the leader leaves it alone until it is stuck
        via_expiry = lease_key in run.via_expiry
        graceful = run.config.graceful_handoff and not via_expiry and from_worker is not None
        reason = "expired or unassigned" if via_expiry else "variance balancing"
        moves.append(Move(lease_key, lease.lease_counter, from_worker, to_worker, graceful, reason))
    return tuple(moves)


@dataclass(frozen=True, slots=True)
class VarianceDecider:
    """Java's default 3.x decider; balancing runs every ``balancing_frequency``-th call."""

    balancing_frequency: int = DEFAULT_BALANCING_FREQUENCY
    seed: int = 0
    name: str = "variance"
    #: KCL #1814's opt-in (see the module docstring)
    fixed_width_threshold: bool = False

    def __post_init__(self) -> None:
        if self.balancing_frequency < 1:
            raise ValueError(f"balancing_frequency must be >= 1, not {self.balancing_frequency}")

    def decide(
        self,
        leases: Sequence[LeaseView],
        workers: Sequence[WorkerView],
        now: float,
        state: DeciderState,
        config: DeciderConfig,
    ) -> Decision:
        del now  # Java's decider works on the leader's expiry marks, already folded into LeaseView
        run_number = int(state.values.get(RUN_COUNTER, 0))
        run = _load(leases, workers, config)
        _assign_expired_or_unassigned(run)
        if run_number % self.balancing_frequency == 0:
            rng = random.Random(f"{self.seed}:{run_number}")  # noqa: S311 - not security
            _balance_variance(run, rng, self.fixed_width_threshold)
        next_state = DeciderState({**state.values, RUN_COUNTER: float(run_number + 1)})
        return Decision(_moves(run), next_state)
