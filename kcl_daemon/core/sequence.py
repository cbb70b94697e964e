"""Extended sequence numbers: a Kinesis sequence number plus a KPL sub-sequence number, and their order.

A checkpoint is either a numeric Kinesis sequence number (ASCII decimal digits, any number of them:
whether Kinesis accepts it is :mod:`kcl_daemon.core.lifecycle.checkpoint_validity`'s question) or one of
the sentinels ``TRIM_HORIZON``,
``LATEST``, ``AT_TIMESTAMP`` and ``SHARD_END``. Ordering follows the Java KCL: ``SHARD_END`` is above
everything; otherwise AT_TIMESTAMP < TRIM_HORIZON < LATEST < any numeric value, numbers compare by
value (never as strings: emulators hand out "9" and "10"), and ties are broken by the sub-sequence
number. Values are compared as (digit count without leading zeros, digits), which is the integer order
without ever converting to ``int``: no size can make a comparison raise (Python refuses to convert
strings of more than 4300 digits).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import total_ordering
from typing import Final


class Sentinel(enum.StrEnum):
    TRIM_HORIZON = "TRIM_HORIZON"
    LATEST = "LATEST"
    AT_TIMESTAMP = "AT_TIMESTAMP"
    SHARD_END = "SHARD_END"


_SENTINEL_RANK: Final[dict[str, int]] = {
    Sentinel.AT_TIMESTAMP: -3,
    Sentinel.TRIM_HORIZON: -2,
    Sentinel.LATEST: -1,
}


class InvalidSequenceNumber(ValueError):
    """A string that is neither a decimal sequence number nor a sentinel."""


def is_numeric_sequence_number(value: str) -> bool:
    return value.isascii() and value.isdigit()


def _digits_key(value: str) -> tuple[int, str]:
    """The integer order of a digit string, by (length without leading zeros, digits)."""
    digits = value.lstrip("0")
    return (len(digits), digits)


@total_ordering
@dataclass(frozen=True, slots=True)
class ExtendedSequenceNumber:
    """(sequence number, sub-sequence number), ordered the way the Java KCL orders checkpoints."""

    sequence_number: str
    sub_sequence_number: int = 0

    def __post_init__(self) -> None:
        seq = self.sequence_number
        if not isinstance(seq, str) or not (is_numeric_sequence_number(seq) or seq in Sentinel.__members__):
            shown = seq if not isinstance(seq, str) or len(seq) <= 40 else f"{seq[:40]}... ({len(seq)} chars)"
            raise InvalidSequenceNumber(f"{shown!r} is not a sequence number or a sentinel")
        if self.sub_sequence_number < 0:
            raise InvalidSequenceNumber(f"sub-sequence number {self.sub_sequence_number} is negative")

    @property
    def is_sentinel(self) -> bool:
        return not is_numeric_sequence_number(self.sequence_number)

    @property
    def is_shard_end(self) -> bool:
        return self.sequence_number == Sentinel.SHARD_END

    def _key(self) -> tuple[int, int, str, int]:
        seq = self.sequence_number
        if seq == Sentinel.SHARD_END:
            return (2, 0, "", 0)
        if seq in _SENTINEL_RANK:
            return (0, _SENTINEL_RANK[seq], "", self.sub_sequence_number)
        return (1, *_digits_key(seq), self.sub_sequence_number)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ExtendedSequenceNumber):
            return NotImplemented
        return self._key() < other._key()

    def __str__(self) -> str:
        if self.sub_sequence_number:
            return f"{self.sequence_number}/{self.sub_sequence_number}"
        return self.sequence_number


TRIM_HORIZON: Final = ExtendedSequenceNumber(Sentinel.TRIM_HORIZON)
LATEST: Final = ExtendedSequenceNumber(Sentinel.LATEST)
AT_TIMESTAMP: Final = ExtendedSequenceNumber(Sentinel.AT_TIMESTAMP)
SHARD_END: Final = ExtendedSequenceNumber(Sentinel.SHARD_END)
