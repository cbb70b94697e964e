"""The decider interface of leader-based lease assignment (KCL 3.x mode): plain data in, moves out.

The leader scans the lease table and the worker-metrics table, folds what it read into
:class:`LeaseView` and :class:`WorkerView` values at one ``now`` and asks a :class:`Decider` what to
do. The decider is pure: it performs no I/O, reads no clock and keeps no hidden state between rounds
beyond the :class:`DeciderState` it is handed and returns. The leader applies each :class:`Move` as a
conditional write on the counter it read (contract §5.1), so two leaders that decide at once can never
both move the same lease: the table decides.

Two deciders implement this interface: Java's ``VarianceBasedLeaseAssignmentDecider`` (the faithful
baseline, contract §5.2) and this project's sticky, zone-aware, cooperative assignor. Durations are float
seconds; throughput is KB/s; CPU is percent of the worker's capacity (0-100, children included).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Protocol

_NO_STATE: Final[Mapping[str, float]] = MappingProxyType({})


class WorkerState(enum.Enum):
    """What the leader knows of a worker from its metrics item and its renewals."""

    ACTIVE = "active"
    # Stopped gracefully and declared it will be back within its grace (deploy-aware assignment).
    RESTARTING = "restarting"
    # Stopping for good: assign nothing more to it.
    LEAVING = "leaving"


@dataclass(frozen=True, slots=True)
class LeaseView:
    """One lease as the leader sees it in this round."""

    lease_key: str
    owner: str | None
    lease_counter: int
    # Expired by the leader's own observation (no counter change for failover time).
    expired: bool = False
    throughput_kbps: float | None = None
    # Set while a graceful hand-off is in progress (contract §5.3): the worker that must checkpoint first.
    checkpoint_owner: str | None = None
    # The lease's checkpoint is SHARD_END: it is finished and is never assigned.
    finished: bool = False
    parent_keys: tuple[str, ...] = ()

    @property
    def actual_owner(self) -> str | None:
        """The worker serving the lease now: during a hand-off, the one that must checkpoint first."""
        return self.checkpoint_owner if self.checkpoint_owner is not None else self.owner


@dataclass(frozen=True, slots=True)
class WorkerView:
    """One worker as the leader sees it: its metrics item plus what the lease table says."""

    worker_id: str
    zone: str | None = None
    # Percent of capacity used by the daemon and its children; None when the worker published none.
    cpu_percent: float | None = None
    # Relative capacity (1.0 = a typical worker); placement targets scale with it.
    capacity: float = 1.0
    state: WorkerState = WorkerState.ACTIVE
    # For RESTARTING: when its leases stop waiting for it (seconds, the decider's time base).
    grace_until: float | None = None
    # When its metrics item was last written (seconds); None when it has none.
    last_update: float | None = None


@dataclass(frozen=True, slots=True)
class Move:
    """Assign ``lease_key`` (read at ``lease_counter``) from ``from_worker`` to ``to_worker``.

    ``graceful`` moves are hand-offs (contract §5.3): the leader sets ``checkpointOwner`` to the current
    owner and ``leaseOwner`` to ``to_worker``; the current owner checkpoints and lets go. Moves of
    unowned or expired leases are never graceful.
    """

    lease_key: str
    lease_counter: int
    from_worker: str | None
    to_worker: str
    graceful: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class DeciderConfig:
    """The assignment settings (Java key names in the config table; seconds and KB/s here)."""

    failover_s: float = 10.0
    max_leases_for_worker: int = 2**31 - 1
    max_throughput_per_host_kbps: float | None = None
    rebalance_threshold_percent: float = 10.0
    dampening_percent: float = 60.0
    allow_throughput_overshoot: bool = True
    graceful_handoff: bool = True
    # Upper bound on hand-offs per source worker per round (cooperative assignor only).
    max_handoffs_per_worker: int = 2


@dataclass(frozen=True, slots=True)
class DeciderState:
    """What a decider carries from one round to the next (opaque numbers by name; empty at first)."""

    values: Mapping[str, float] = field(default_factory=lambda: _NO_STATE)


@dataclass(frozen=True, slots=True)
class Decision:
    """The moves of one round and the state for the next."""

    moves: tuple[Move, ...]
    state: DeciderState = field(default_factory=DeciderState)


class Decider(Protocol):
    """A pure lease-assignment policy."""

    @property
    def name(self) -> str: ...

    def decide(
        self,
        leases: Sequence[LeaseView],
        workers: Sequence[WorkerView],
        now: float,
        state: DeciderState,
        config: DeciderConfig,
    ) -> Decision: ...
