"""What a shard consumer is told (its settings), what it counts while it runs (its stats), and what it
reports when it stops (its outcome): plain data shared by the consumer, its task and the replay."""

from __future__ import annotations

from dataclasses import dataclass, field

from kcl_daemon.core.lifecycle.poison import PoisonPolicy
from kcl_daemon.core.lifecycle.restart_policy import RestartPolicy
from kcl_daemon.core.lifecycle.states import ShardState, ShutdownReason
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.dead_letters.sinks import DeadLetterSink
from kcl_daemon.process.child import StopTimeouts
from kcl_daemon.process.session import ActionTimeouts


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    timeouts: ActionTimeouts = field(default_factory=ActionTimeouts)
    stop: StopTimeouts = field(default_factory=StopTimeouts)
    restart: RestartPolicy = field(default_factory=RestartPolicy)
    call_process_records_even_for_empty_record_list: bool = False
    #: Stop the consumer once parked (replay) instead of waiting for a shutdown or lease loss.
    return_when_parked: bool = False
    #: Offer the log/metric channel in initialize (kcl_protocol.extensions; key childChannel).
    child_channel: bool = False
    #: Poison records (kcl_daemon.core.lifecycle.poison; keys poisonRecordPolicy, maxDeliveryAttempts).
    poison_policy: PoisonPolicy = PoisonPolicy.RETRY
    max_delivery_attempts: int = 3
    #: Where DEAD_LETTER writes (deadLetterDestination), and the application named in each letter.
    dead_letters: DeadLetterSink | None = None
    application: str = ""


@dataclass(slots=True)
class ConsumerStats:
    batches: int = 0
    records_delivered: int = 0
    bytes_delivered: int = 0  # record data only: the lease's throughputKBps (3.x) is computed from it
    checkpoints_written: int = 0
    child_starts: int = 0
    child_failures: int = 0
    failure_messages: list[str] = field(default_factory=list)
    #: poison records: exceptions a wrapper swallowed, deliveries that failed (SKIP, DEAD_LETTER),
    #: records sent again by a retry or the bisection, records skipped or dead-lettered
    processor_exceptions: int = 0
    failed_deliveries: int = 0
    redelivered_records: int = 0
    set_aside: int = 0


@dataclass(frozen=True, slots=True)
class ShardOutcome:
    shard_id: str
    state: ShardState
    reason: ShutdownReason | None
    checkpoint: ExtendedSequenceNumber
    stats: ConsumerStats
    parked_because: str | None = None
