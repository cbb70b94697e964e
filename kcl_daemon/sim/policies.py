"""The policies a simulated fleet can run: the 2.x taker, Java's 3.x leader, and this project's leader.

The Java column is Java KCL 3.5.x as released: ``variance`` (the default decider) and, on request,
``count`` (its LEASE_COUNT_BASED decider, 3.4.3+; kcl-daemon's implementation also lets a worker below
the target take from one at the target when their counts differ by more than one, the rule of KCL #1837)
and ``variance-1814`` (the variance decider with the fixed-width threshold KCL #1814 proposes).

Each policy names the real pure decision code it drives and the fleet-level rules that come with it:
how fast a dead leader is replaced, and whether a gracefully stopping worker declares a restart grace
(only this project's workers publish one; Java has no such state).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kcl_daemon.core.leader.assignor import CooperativeAssignor
from kcl_daemon.core.leader.decider import Decider
from kcl_daemon.core.leader.lease_count import LeaseCountDecider
from kcl_daemon.core.leader.variance import VarianceDecider


class Mode(enum.Enum):
    TAKER = "taker"  # every worker runs the 2.x lease taker
    LEADER = "leader"  # one leader runs a decider


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    mode: Mode
    description: str
    decider: Decider | None = None
    #: a dead leader is replaced after this long; None: FleetConfig.leader_failover_s (Java's lock)
    leader_failover_s: float | None = None
    #: stopping workers publish RESTARTING with their grace (this project's workers only)
    declares_grace: bool = False
    #: the leader's lock follows the failover time plus this check period (this project's daemon)
    lock_follows_failover: bool = False
    #: workers discover their leases on this daemon's period (at most the expiry passes), not Java's
    daemon_discovery: bool = False
    #: the leader judges expiry through the heartbeats of ``leaseRenewal = PER_WORKER`` (this project's
    #: leader; Java's reads lease counters only, so a fleet under it renews per lease)
    reads_heartbeats: bool = False


def taker_2x() -> Policy:
    return Policy("2.x", Mode.TAKER, "KCL 2.x: every worker takes and steals (core/taker.py)")


def variance(seed: int = 0) -> Policy:
    return Policy(
        "variance",
        Mode.LEADER,
        "KCL 3.x: Java's VarianceBasedLeaseAssignmentDecider behind a 120 s leader lock",
        decider=VarianceDecider(seed=seed),
    )


def variance_1814(seed: int = 0) -> Policy:
    return Policy(
        "variance-1814",
        Mode.LEADER,
        "KCL 3.x variance decider with KCL #1814's fixed-width threshold (not yet released)",
        decider=VarianceDecider(seed=seed, name="variance-1814", fixed_width_threshold=True),
    )


def count() -> Policy:
    return Policy(
        "count",
        Mode.LEADER,
        "KCL 3.4.3+: LeaseCountBasedLeaseAssignmentDecider behind a 120 s leader lock",
        decider=LeaseCountDecider(),
    )


def cooperative() -> Policy:
    return Policy(
        "cooperative",
        Mode.LEADER,
        "kcl-daemon: the sticky, zone-aware, cooperative assignor; lock = failover time",
        decider=CooperativeAssignor(),
        declares_grace=True,
        lock_follows_failover=True,
        daemon_discovery=True,
        reads_heartbeats=True,
    )


POLICY_NAMES = ("2.x", "variance", "cooperative")
#: accepted by --policy, not run by default
MORE_POLICY_NAMES = ("count", "variance-1814")


def by_name(name: str, seed: int = 0) -> Policy:
    if name == "2.x":
        return taker_2x()
    if name == "variance":
        return variance(seed)
    if name == "variance-1814":
        return variance_1814(seed)
    if name == "count":
        return count()
    if name in ("cooperative", "ours"):  # "ours": its name before 0.3
        return cooperative()
    raise ValueError(f"unknown policy {name!r}: choose from {', '.join((*POLICY_NAMES, *MORE_POLICY_NAMES))}")
