"""The lease coordinator's settings and plain data: what it is configured with, what it holds, who listens.

:class:`CoordinatorConfig` reads every period from one :class:`~kcl_daemon.core.leases.timings.LeaseTimings`
(contract §4.3); :class:`LeaseTableOps` is the table port the coordinator drives (synchronous, run on
thread pools).

May import: ``core.leases`` (the pure lease rules) and ``leases.keeper``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kcl_daemon.core.leases.expiry import held_lease_deadline
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import ScanResultLike
from kcl_daemon.core.leases.taker import TakerConfig
from kcl_daemon.core.leases.timings import LeaseTimings
from kcl_daemon.leases.keeper import KeeperTable


class LeaseTableOps(KeeperTable, Protocol):
    """The lease-table operations the coordinator needs (synchronous; run on thread pools): the keeper's
    writes and reads, plus listing and taking."""

    def list_leases(self, *, consistent: bool = False) -> ScanResultLike: ...

    def take(self, lease: Lease, owner: str) -> Lease: ...


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    worker_id: str
    failover_s: float = 10.0
    max_leases_for_worker: int = 2**31 - 1
    max_leases_to_steal_at_one_time: int = 1
    enable_priority_lease_assignment: bool = True
    #: how often the taker looks for expired leases between its full runs (None: from the failover)
    expiry_check_s: float | None = None
    #: ``leaseRenewal``: PER_LEASE (Java's) or PER_WORKER (:mod:`kcl_daemon.leases.heartbeat`)
    lease_renewal: str = "PER_LEASE"
    #: every period of the lease loops, derived once from the failover time
    timings: LeaseTimings = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        timings = LeaseTimings.from_failover(self.failover_s, expiry_check_s=self.expiry_check_s)
        object.__setattr__(self, "timings", timings)

    @property
    def expiry_pass_s(self) -> float:
        return self.timings.expiry_check_s

    @property
    def renew_interval_s(self) -> float:
        return self.timings.renew_every_s

    @property
    def take_interval_s(self) -> float:
        return self.timings.take_every_s

    def taker_config(self) -> TakerConfig:
        """The taker's settings; an expired lease this worker does not take is evicted half an expiry
        pass after it expired (:func:`~kcl_daemon.core.leases.taker.plan_takes` step 7), so a worker
        under its target that has had one pass to take it has had it."""
        return TakerConfig(
            failover_s=self.failover_s,
            max_leases_for_worker=self.max_leases_for_worker,
            max_leases_to_steal_at_one_time=self.max_leases_to_steal_at_one_time,
            enable_priority_lease_assignment=self.enable_priority_lease_assignment,
            evict_after_s=self.expiry_pass_s / 2,
        )


@dataclass(slots=True)
class HeldLease:
    lease: Lease
    renewed_at: float  # our monotonic clock: when the last successful take/renew/checkpoint was sent
    failover_s: float = 10.0

    @property
    def deadline(self) -> float:
        """When this lease is lost by our own clock (see :func:`held_lease_deadline`)."""
        return held_lease_deadline(self.renewed_at, self.failover_s)


@dataclass
class LeaseListeners:
    taken: list[Callable[[Lease], None]] = field(default_factory=list)
    lost: list[Callable[[str], None]] = field(default_factory=list)
