"""Whether a child's checkpoint request may be written, and what exactly to write (Java KCL rules).

* No position (``sequenceNumber`` null) means "the largest record delivered so far"; at shard end that
  is ``SHARD_END``.
* A position with a null sub-sequence number means sub-sequence 0.
* The target must lie in ``[last checkpoint, largest permitted]`` in extended-sequence order;
  otherwise, or if it is malformed or has a negative sub-sequence, the answer is
  ``IllegalArgumentException``.
* During ``shardEnded`` the largest permitted value is ``SHARD_END``, and a checkpoint at the very last
  record of the shard is written as ``SHARD_END``.
* A target equal to the last checkpoint is a success that writes nothing.
* A number the daemon cannot use (more digits than Kinesis allows, a sub-sequence number outside Java's
  ``long``, anything of any size) is refused with ``IllegalArgumentException``: no input raises.
"""

from __future__ import annotations

from dataclasses import dataclass

from kcl_daemon.core.lifecycle.checkpoint_validity import unusable_checkpoint
from kcl_daemon.core.sequence import SHARD_END, ExtendedSequenceNumber, InvalidSequenceNumber

ILLEGAL_ARGUMENT = "IllegalArgumentException"


@dataclass(frozen=True, slots=True)
class CheckpointBounds:
    """What the checkpointer of one consumer knows when a request arrives."""

    last_checkpoint: ExtendedSequenceNumber
    largest_permitted: ExtendedSequenceNumber
    at_shard_end: bool = False
    last_record_of_shard: ExtendedSequenceNumber | None = None


@dataclass(frozen=True, slots=True)
class WriteCheckpoint:
    target: ExtendedSequenceNumber


@dataclass(frozen=True, slots=True)
class AlreadyCheckpointed:
    target: ExtendedSequenceNumber


@dataclass(frozen=True, slots=True)
class RefuseCheckpoint:
    java_name: str
    reason: str


CheckpointDecision = WriteCheckpoint | AlreadyCheckpointed | RefuseCheckpoint


def decide_checkpoint(
    sequence_number: str | None, sub_sequence_number: int | None, bounds: CheckpointBounds
) -> CheckpointDecision:
    """Decide a checkpoint request against ``bounds``. Pure; never raises."""
    if sequence_number is None:
        target = SHARD_END if bounds.at_shard_end else bounds.largest_permitted
    else:
        try:
            target = ExtendedSequenceNumber(sequence_number, sub_sequence_number or 0)
        except (InvalidSequenceNumber, ValueError, TypeError) as exc:
            return RefuseCheckpoint(ILLEGAL_ARGUMENT, str(exc))
        if (problem := unusable_checkpoint(target)) is not None:
            return RefuseCheckpoint(ILLEGAL_ARGUMENT, problem)
        if target < bounds.last_checkpoint:
            return RefuseCheckpoint(
                ILLEGAL_ARGUMENT, f"{target} is before the last checkpoint {bounds.last_checkpoint}"
            )
        if target > bounds.largest_permitted:
            return RefuseCheckpoint(
                ILLEGAL_ARGUMENT,
                f"{target} is beyond the largest record delivered so far ({bounds.largest_permitted})",
            )
        if bounds.at_shard_end and target == bounds.last_record_of_shard:
            target = SHARD_END
    if target == bounds.last_checkpoint:
        return AlreadyCheckpointed(target)
    return WriteCheckpoint(target)
