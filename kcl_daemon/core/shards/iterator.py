"""Where a shard read starts: the iterator position for a checkpoint, and which records to drop after it.

Rules (contract §3.3, §7):

* ``TRIM_HORIZON`` / ``LATEST`` -> the iterator type of the same name; ``AT_TIMESTAMP`` -> an
  ``AT_TIMESTAMP`` iterator at the configured instant (``initialPositionInStreamExtended``).
* A numeric checkpoint ``(seq, sub)`` -> ``AT_SEQUENCE_NUMBER seq``, and :func:`records_after` drops the
  user records at or before the checkpoint. This is the Java rule. ``AFTER_SEQUENCE_NUMBER`` would be
  wrong even for ``sub == 0``: a checkpoint ``(seq, 0)`` can sit *inside* a KPL aggregate (sub-record 0
  processed, 1..n not), and reading after ``seq`` would skip 1..n. Re-reading one Kinesis record is the
  price of never losing one.
* ``SHARD_END`` has nothing left to read: asking for its position is an error.
* After ``ExpiredIteratorException`` the read resumes ``AFTER_SEQUENCE_NUMBER`` of the last Kinesis
  record *fetched* (every sub-record of a fetched aggregate was fetched with it), or from the original
  start position when nothing has been fetched yet (:func:`refresh_position`).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

from kcl_daemon.core.sequence import ExtendedSequenceNumber, Sentinel


class IteratorType(enum.StrEnum):
    AT_SEQUENCE_NUMBER = "AT_SEQUENCE_NUMBER"
    AFTER_SEQUENCE_NUMBER = "AFTER_SEQUENCE_NUMBER"
    TRIM_HORIZON = "TRIM_HORIZON"
    LATEST = "LATEST"
    AT_TIMESTAMP = "AT_TIMESTAMP"


@dataclass(frozen=True, slots=True)
class IteratorPosition:
    """The arguments of one GetShardIterator call (besides stream and shard)."""

    type: IteratorType
    sequence_number: str | None = None  # for AT_/AFTER_SEQUENCE_NUMBER
    timestamp: datetime | None = None  # for AT_TIMESTAMP, timezone-aware

    def __post_init__(self) -> None:
        needs_sequence = self.type in (IteratorType.AT_SEQUENCE_NUMBER, IteratorType.AFTER_SEQUENCE_NUMBER)
        if needs_sequence != (self.sequence_number is not None):
            raise ValueError(f"{self.type} {'needs' if needs_sequence else 'takes no'} sequence number")
        needs_timestamp = self.type is IteratorType.AT_TIMESTAMP
        if needs_timestamp != (self.timestamp is not None):
            raise ValueError(f"{self.type} {'needs' if needs_timestamp else 'takes no'} timestamp")
        if self.timestamp is not None and self.timestamp.tzinfo is None:
            raise ValueError("an AT_TIMESTAMP position needs a timezone-aware datetime")

    def __str__(self) -> str:
        if self.sequence_number is not None:
            return f"{self.type} {self.sequence_number}"
        if self.timestamp is not None:
            return f"{self.type} {self.timestamp.isoformat()}"
        return str(self.type)


class NothingToRead(ValueError):
    """The checkpoint is SHARD_END: the shard has been read to its end already."""


def iterator_position_for(
    checkpoint: ExtendedSequenceNumber, *, timestamp: datetime | None = None
) -> IteratorPosition:
    """The position to start reading a shard whose checkpoint is ``checkpoint`` (see the module rules).

    ``timestamp`` is required for an ``AT_TIMESTAMP`` checkpoint and ignored otherwise.
    """
    seq = checkpoint.sequence_number
    if checkpoint.is_shard_end:
        raise NothingToRead("the checkpoint is SHARD_END: there is nothing left to read")
    if seq == Sentinel.TRIM_HORIZON:
        return IteratorPosition(IteratorType.TRIM_HORIZON)
    if seq == Sentinel.LATEST:
        return IteratorPosition(IteratorType.LATEST)
    if seq == Sentinel.AT_TIMESTAMP:
        if timestamp is None:
            raise ValueError("an AT_TIMESTAMP checkpoint needs the configured timestamp")
        return IteratorPosition(IteratorType.AT_TIMESTAMP, timestamp=timestamp)
    return IteratorPosition(IteratorType.AT_SEQUENCE_NUMBER, sequence_number=seq)


def refresh_position(last_fetched_sequence_number: str | None, start: IteratorPosition) -> IteratorPosition:
    """Where to read again after the iterator expired: right after the last record fetched, if any."""
    if last_fetched_sequence_number is None:
        return start
    return IteratorPosition(IteratorType.AFTER_SEQUENCE_NUMBER, sequence_number=last_fetched_sequence_number)


class Sequenced(Protocol):
    """Anything with a (sequence number, sub-sequence number), e.g. ``kcl_protocol.Record``."""

    @property
    def sequence_number(self) -> str: ...

    @property
    def sub_sequence_number(self) -> int: ...


R = TypeVar("R", bound=Sequenced)


def records_after(records: Sequence[R], after: ExtendedSequenceNumber) -> Sequence[R]:
    """The records strictly after ``after``, in order: a slice of ``records`` (of its own type).

    ``records`` are in (sequence, sub-sequence) order, as a shard returns them, so only a prefix can be
    at or before ``after``; everything from the first later record on is kept. A sentinel ``after``
    (TRIM_HORIZON, LATEST, AT_TIMESTAMP) drops nothing; ``SHARD_END`` drops everything.
    """
    for index, record in enumerate(records):
        if ExtendedSequenceNumber(record.sequence_number, record.sub_sequence_number) > after:
            return records if index == 0 else records[index:]
    return records[:0]
