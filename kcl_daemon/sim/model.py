"""The simulator's plain data: fleet settings, scenario events, and what a run reports."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from kcl_daemon.core.leases.timings import LeaseTimings


@dataclass(frozen=True, slots=True)
class FleetConfig:
    """Timing and sizing of a simulated fleet (Java defaults; seconds, KB/s)."""

    failover_s: float = 10.0
    #: 3.x leader round period (Java: leaseAssignmentIntervalMillis or 2 x failover)
    assignment_interval_s: float | None = None
    #: new leader after the old one died (Java lock: 120 s duration + up to 30 s check)
    leader_failover_s: float = 150.0
    restart_grace_s: float = 0.0
    max_handoffs_per_worker: int = 2
    max_leases_for_worker: int = 2**31 - 1
    max_throughput_per_host_kbps: float | None = None
    #: time the old owner needs to checkpoint and complete a hand-off
    handoff_s: float = 2.0
    #: a restarting worker is down this long
    restart_downtime_s: float = 45.0
    #: per-lease throughput when not Zipf
    lease_kbps: float = 50.0
    #: CPU points one KB/s costs a worker of capacity 1 (for the CPU each worker publishes)
    cpu_per_kbps: float = 0.02
    cpu_base: float = 2.0
    cpu_jitter: float = 1.5
    #: lease item size for DynamoDB read units
    lease_item_bytes: int = 350
    metrics_period_s: float = 30.0
    #: ``leaseRenewal``: PER_WORKER renews one heartbeat per worker, not every lease (2.x takers and this
    #: project's leader; under Java's leader the fleet renews per lease)
    lease_renewal: str = "PER_LEASE"

    @property
    def per_worker(self) -> bool:
        return self.lease_renewal == "PER_WORKER"

    @property
    def timings(self) -> LeaseTimings:
        """The fleet's lease periods, as the worker derives them (contract §4.3)."""
        return LeaseTimings.from_failover(self.failover_s, assignment_interval_s=self.assignment_interval_s)

    @property
    def interval_s(self) -> float:
        return self.timings.assignment_interval_s

    @property
    def renew_period_s(self) -> float:
        return self.timings.renew_every_s

    @property
    def taker_period_s(self) -> float:
        return self.timings.take_every_s

    @property
    def discovery_period_s(self) -> float:
        """A kcl-daemon worker's discovery: Java's ``interval/2 - 25 ms``, at most its expiry passes."""
        return self.timings.discovery_s

    @property
    def java_discovery_period_s(self) -> float:
        """A Java worker's discovery: ``interval/2 - 25 ms``."""
        return self.timings.java_discovery_s


class EventKind(enum.Enum):
    START = "start"  # worker joins (or comes back with the same id)
    CRASH = "crash"  # worker dies without a word
    STOP = "stop"  # graceful stop: checkpoints, stops renewing; declares its grace if configured
    SPLIT = "split"  # a shard splits: the parent ends, two children appear
    MERGE = "merge"  # two shards merge: both parents end, one child appears


@dataclass(frozen=True, slots=True)
class Event:
    at: float
    kind: EventKind
    worker: str = ""
    zone: str | None = None
    capacity: float = 1.0
    shards: tuple[str, ...] = ()
    #: counts towards "time to balance" and the move lower bound
    disruptive: bool = True


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    shards: tuple[str, ...]
    #: shard -> KB/s (missing: FleetConfig.lease_kbps)
    throughput: Mapping[str, float]
    events: tuple[Event, ...]
    #: leases already owned at t=0 (a steady fleet), shard -> worker
    initial_owners: Mapping[str, str]
    horizon_s: float


@dataclass(slots=True)
class Result:
    """One policy on one scenario."""

    scenario: str
    policy: str
    time_to_balance_s: float | None = None
    moves: int = 0
    moves_lower_bound: int = 0
    handoffs: int = 0
    duplicate_risk_moves: int = 0
    unserved_lease_s: float = 0.0
    max_leases: int = 0
    min_leases: int = 0
    max_load_kbps: float = 0.0
    min_load_kbps: float = 0.0
    zone_leases: dict[str, int] = field(default_factory=dict)
    ddb_read_units_per_lease_hour: float = 0.0
    ddb_write_units_per_lease_hour: float = 0.0
    decider_ms_per_round: float = 0.0
    decider_ms_max: float = 0.0
    rounds: int = 0
    #: (t, {zone: leases}, min per worker, max per worker) samples for the timeline picture
    timeline: list[tuple[float, dict[str, int], int, int]] = field(default_factory=list)
    #: (t, {worker: leases}) for small fleets only
    worker_timeline: list[tuple[float, dict[str, int]]] = field(default_factory=list)

    @property
    def ddb_units_per_lease_hour(self) -> float:
        return self.ddb_read_units_per_lease_hour + self.ddb_write_units_per_lease_hour
