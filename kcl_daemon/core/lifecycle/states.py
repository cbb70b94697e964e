"""The life of one shard consumer as a transition table (every transition lives here).

States follow the Java KCL's ConsumerStates, plus two of ours for robust children: RESTARTING (the
child failed; a new one starts after a backoff) and PARKED (it failed too often on the same records;
the shard waits, keeping its lease, instead of crash-looping).

Shutdown reasons are ranked as in Java: a lost lease outranks a shard end, which outranks a requested
shutdown. A lower-ranked reason never replaces a higher one: e.g. while ``leaseLost`` is being sent,
reaching the end of the shard changes nothing.

Every (state, event) pair is either in :data:`TRANSITIONS` (possibly to the same state) or rejected
with :class:`InvalidTransition`; a test checks the table covers every pair one way or the other.
"""

from __future__ import annotations

import enum
from typing import Final


class ShardState(enum.StrEnum):
    WAITING_ON_PARENTS = "waiting-on-parents"
    INITIALIZING = "initializing"  # `initialize` is (about to be) sent to a new child
    PROCESSING = "processing"  # batches flow as `processRecords`
    SHUTDOWN_REQUESTED = "shutdown-requested"  # `shutdownRequested` is outstanding
    ENDING_SHARD = "ending-shard"  # `shardEnded` is outstanding; the child must checkpoint SHARD_END
    LOSING_LEASE = "losing-lease"  # `leaseLost` is outstanding
    RESTARTING = "restarting"  # child failed; waiting out the backoff before a new child
    PARKED = "parked"  # failed too often without progress; no child runs
    SHUTDOWN_COMPLETE = "shutdown-complete"


class ShutdownReason(enum.IntEnum):
    """Why a consumer shuts down, ranked: a higher value wins over a lower one."""

    REQUESTED = 1
    SHARD_END = 2
    LEASE_LOST = 3


class ShardEvent(enum.StrEnum):
    PARENTS_DONE = "parents-done"
    ALREADY_AT_SHARD_END = "already-at-shard-end"  # the lease's checkpoint is SHARD_END: no child needed
    INITIALIZED = "initialized"
    BATCH_DONE = "batch-done"
    SHARD_END_REACHED = "shard-end-reached"
    LEASE_LOST = "lease-lost"
    SHUTDOWN_REQUESTED = "shutdown-requested"
    SHUTDOWN_ANSWERED = "shutdown-answered"  # the child answered `shutdownRequested`
    CHILD_FAILED = "child-failed"
    RESTART_DUE = "restart-due"
    GIVE_UP = "give-up"
    FINAL_ANSWERED = "final-answered"  # the child answered `shardEnded` / `leaseLost`


class InvalidTransition(Exception):
    """An event that cannot happen in the given state (a bug in the shell driving the table)."""


S, E = ShardState, ShardEvent

TRANSITIONS: Final[dict[tuple[ShardState, ShardEvent], ShardState]] = {
    (S.WAITING_ON_PARENTS, E.PARENTS_DONE): S.INITIALIZING,
    (S.WAITING_ON_PARENTS, E.ALREADY_AT_SHARD_END): S.SHUTDOWN_COMPLETE,
    (S.WAITING_ON_PARENTS, E.LEASE_LOST): S.SHUTDOWN_COMPLETE,  # no child yet: nothing to tell
    (S.WAITING_ON_PARENTS, E.SHUTDOWN_REQUESTED): S.SHUTDOWN_COMPLETE,
    (S.INITIALIZING, E.INITIALIZED): S.PROCESSING,
    (S.INITIALIZING, E.CHILD_FAILED): S.RESTARTING,
    (S.INITIALIZING, E.LEASE_LOST): S.LOSING_LEASE,
    (S.INITIALIZING, E.SHUTDOWN_REQUESTED): S.SHUTDOWN_REQUESTED,
    (S.PROCESSING, E.BATCH_DONE): S.PROCESSING,
    (S.PROCESSING, E.SHARD_END_REACHED): S.ENDING_SHARD,
    (S.PROCESSING, E.LEASE_LOST): S.LOSING_LEASE,
    (S.PROCESSING, E.SHUTDOWN_REQUESTED): S.SHUTDOWN_REQUESTED,
    (S.PROCESSING, E.CHILD_FAILED): S.RESTARTING,
    (S.SHUTDOWN_REQUESTED, E.SHUTDOWN_ANSWERED): S.LOSING_LEASE,  # Java: leaseLost follows
    (S.SHUTDOWN_REQUESTED, E.LEASE_LOST): S.LOSING_LEASE,
    (S.SHUTDOWN_REQUESTED, E.SHUTDOWN_REQUESTED): S.SHUTDOWN_REQUESTED,
    (S.SHUTDOWN_REQUESTED, E.CHILD_FAILED): S.SHUTDOWN_COMPLETE,  # shutting down anyway: no restart
    (S.ENDING_SHARD, E.FINAL_ANSWERED): S.SHUTDOWN_COMPLETE,
    (S.ENDING_SHARD, E.CHILD_FAILED): S.RESTARTING,  # the shard must still end at SHARD_END
    (S.ENDING_SHARD, E.LEASE_LOST): S.LOSING_LEASE,  # outranks the shard end
    (S.ENDING_SHARD, E.SHUTDOWN_REQUESTED): S.ENDING_SHARD,  # outranked: finish the shard end
    (S.LOSING_LEASE, E.FINAL_ANSWERED): S.SHUTDOWN_COMPLETE,
    (S.LOSING_LEASE, E.CHILD_FAILED): S.SHUTDOWN_COMPLETE,
    (S.LOSING_LEASE, E.LEASE_LOST): S.LOSING_LEASE,
    (S.LOSING_LEASE, E.SHUTDOWN_REQUESTED): S.LOSING_LEASE,
    (S.LOSING_LEASE, E.SHARD_END_REACHED): S.LOSING_LEASE,
    (S.RESTARTING, E.RESTART_DUE): S.INITIALIZING,
    (S.RESTARTING, E.GIVE_UP): S.PARKED,
    (S.RESTARTING, E.LEASE_LOST): S.SHUTDOWN_COMPLETE,  # no live child to tell
    (S.RESTARTING, E.SHUTDOWN_REQUESTED): S.SHUTDOWN_COMPLETE,
    (S.PARKED, E.RESTART_DUE): S.INITIALIZING,  # an operator or a long timer un-parks it
    (S.PARKED, E.LEASE_LOST): S.SHUTDOWN_COMPLETE,
    (S.PARKED, E.SHUTDOWN_REQUESTED): S.SHUTDOWN_COMPLETE,
    (S.SHUTDOWN_COMPLETE, E.LEASE_LOST): S.SHUTDOWN_COMPLETE,
    (S.SHUTDOWN_COMPLETE, E.SHUTDOWN_REQUESTED): S.SHUTDOWN_COMPLETE,
}

#: The protocol action a state sends to the child when it is entered.
ACTION_ON_ENTRY: Final[dict[ShardState, str]] = {
    S.INITIALIZING: "initialize",
    S.SHUTDOWN_REQUESTED: "shutdownRequested",
    S.ENDING_SHARD: "shardEnded",
    S.LOSING_LEASE: "leaseLost",
}

#: States whose outstanding action comes with a checkpointer (others answer InvalidStateException).
CHECKPOINT_ALLOWED: Final[frozenset[ShardState]] = frozenset(
    {S.PROCESSING, S.SHUTDOWN_REQUESTED, S.ENDING_SHARD}
)

#: The shutdown reason a state stands for, if any.
SHUTDOWN_REASON: Final[dict[ShardState, ShutdownReason]] = {
    S.SHUTDOWN_REQUESTED: ShutdownReason.REQUESTED,
    S.ENDING_SHARD: ShutdownReason.SHARD_END,
    S.LOSING_LEASE: ShutdownReason.LEASE_LOST,
}


def next_state(state: ShardState, event: ShardEvent) -> ShardState:
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise InvalidTransition(f"{event.value} cannot happen while {state.value}") from None
