"""The values handed to a record processor: a :class:`Record` and a shard :class:`Position`.

They are plain immutable data; nothing here reads or writes the protocol. A record's ``repr`` shows its
size and never its payload, so logging a record cannot leak data.

:class:`Record` is a named tuple rather than a frozen dataclass because one is built per record: a frozen
dataclass's ``__init__`` (``object.__setattr__`` per field) cost 1.8 us a record, a tuple 0.25 us.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, NamedTuple

#: Checkpoint values that name a place in the shard rather than a record.
SENTINELS: Final = frozenset({"TRIM_HORIZON", "LATEST", "AT_TIMESTAMP", "SHARD_END"})


class Record(NamedTuple):
    """One user record (the daemon has already split KPL aggregates into their user records).

    ``sub_sequence_number`` is the index inside a KPL aggregate, 0 for an ordinary record. Records of one
    aggregate share ``sequence_number``, so the pair is what identifies a record. Immutable (a named
    tuple).
    """

    data: bytes
    partition_key: str
    sequence_number: str
    sub_sequence_number: int
    arrival_millis: int

    @property
    def text(self) -> str:
        """The payload decoded as UTF-8 (raises ``UnicodeDecodeError`` for binary payloads)."""
        return self.data.decode("utf-8")

    @property
    def arrival(self) -> datetime:
        """When Kinesis accepted the record (approximately), as an aware UTC datetime."""
        return datetime.fromtimestamp(self.arrival_millis / 1000, tz=UTC)

    @property
    def size(self) -> int:
        """Payload size in bytes."""
        return len(self.data)

    def __repr__(self) -> str:
        return (
            f"Record(partition_key={self.partition_key!r}, sequence_number={self.sequence_number!r}, "
            f"sub_sequence_number={self.sub_sequence_number}, size={self.size}, "
            f"arrival_millis={self.arrival_millis})"
        )


@dataclass(frozen=True, slots=True)
class Position:
    """A checkpoint as the daemon reports it to ``initialize``: where this shard's processing resumes.

    ``sequence_number`` is a Kinesis sequence number or a sentinel (``TRIM_HORIZON``, ``LATEST``,
    ``AT_TIMESTAMP``, ``SHARD_END``); either field may be ``None`` when the daemon has no checkpoint.
    """

    sequence_number: str | None
    sub_sequence_number: int | None

    @property
    def is_sentinel(self) -> bool:
        """True for a sentinel (or a missing value) rather than the position of a record."""
        return self.sequence_number is None or self.sequence_number in SENTINELS
