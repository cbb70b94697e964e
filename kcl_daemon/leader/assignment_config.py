"""The leader's assignment loop: its configuration (:class:`AssignmentConfig`) and what one pass did
(:class:`RunReport`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kcl_daemon.core.leader.decider import DeciderConfig, Move
from kcl_daemon.core.leader.passes import PassKind
from kcl_daemon.core.leases.expiry import expiry_interval_for


@dataclass(frozen=True, slots=True)
class AssignmentConfig:
    interval_s: float
    failover_s: float
    handoff_timeout_s: float = 30.0
    graceful_handoff: bool = True
    reporter_period_s: float = 30.0
    stale_metrics_s: float = 86400.0
    decider: DeciderConfig = field(default_factory=DeciderConfig)
    #: how often the leader looks for expired leases between balance rounds (None: from the failover)
    expiry_interval_s: float | None = None

    @property
    def expiry_s(self) -> float:
        return (
            self.expiry_interval_s
            if self.expiry_interval_s is not None
            else expiry_interval_for(self.failover_s)
        )


@dataclass(slots=True)
class RunReport:
    leases: int = 0
    workers: int = 0
    moves: list[Move] = field(default_factory=list)
    applied: int = 0
    #: the moves whose write succeeded
    applied_moves: list[Move] = field(default_factory=list)
    conflicts: int = 0
    kind: PassKind = PassKind.BALANCE
    #: owners of the leases that are not expired, by the leader's observation
    live_owners: frozenset[str] = frozenset()
