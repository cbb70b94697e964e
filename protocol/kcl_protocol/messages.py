"""Every message of the MultiLangDaemon protocol as a frozen dataclass.

Python field names are snake_case; the camelCase wire names live only in :mod:`kcl_protocol.codec`.
Sequence numbers are strings (numeric or a sentinel such as ``TRIM_HORIZON``); sub-sequence numbers
are integers. ``Record.data`` holds the raw payload bytes; the codec base64-encodes it.
:class:`EncodedRecord` holds the payload as the padded base64 text it arrived in (from Kinesis), which the
codec writes through untouched.
"""

from __future__ import annotations

import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from kcl_protocol.extensions import ChannelOffer


@dataclass(frozen=True, slots=True)
class Record:
    """One user record (after KPL de-aggregation) inside a ``processRecords`` message."""

    data: bytes
    partition_key: str
    sequence_number: str
    sub_sequence_number: int
    approximate_arrival_timestamp: int  # epoch milliseconds

    @property
    def size(self) -> int:
        """The payload's length in bytes."""
        return len(self.data)


@dataclass(frozen=True, slots=True)
class EncodedRecord:
    """A user record whose payload stays the padded base64 text Kinesis returned (pass-through).

    On the wire it is the same as a :class:`Record` with ``data`` = the decoded text; ``data`` decodes on
    demand. Kinesis always sends canonical padded base64, so passing the text through is byte-identical
    to decoding and encoding again.
    """

    data_b64: str
    partition_key: str
    sequence_number: str
    sub_sequence_number: int
    approximate_arrival_timestamp: int  # epoch milliseconds

    @property
    def data(self) -> bytes:
        return binascii.a2b_base64(self.data_b64)

    @property
    def size(self) -> int:
        """The payload's length in bytes, from the length of its padded base64 text (nothing decoded)."""
        text = self.data_b64
        return len(text) // 4 * 3 - (2 if text.endswith("==") else 1 if text.endswith("=") else 0)

    def decoded(self) -> Record:
        return Record(
            self.data,
            self.partition_key,
            self.sequence_number,
            self.sub_sequence_number,
            self.approximate_arrival_timestamp,
        )


#: A record in a ``processRecords`` message, with its payload as bytes or as its base64 text.
AnyRecord = Record | EncodedRecord


@dataclass(frozen=True, slots=True)
class Initialize:
    action: ClassVar[str] = "initialize"
    shard_id: str
    sequence_number: str | None
    sub_sequence_number: int | None
    #: kcl-daemon's log/metric channel offer (:mod:`kcl_protocol.extensions`); None: not offered
    channel: ChannelOffer | None = None
    #: several streams per application (kcl-daemon extension): the plain stream name and the
    #: ``accountId:streamName:creationEpoch`` identity; absent on the wire for single-stream workers
    stream_name: str | None = None
    stream_identifier: str | None = None


@dataclass(frozen=True, slots=True)
class ProcessRecords:
    action: ClassVar[str] = "processRecords"
    #: a tuple of records, or a :class:`kcl_protocol.columns.RecordColumns` (the daemon's reads)
    records: Sequence[AnyRecord]
    millis_behind_latest: int | None


@dataclass(frozen=True, slots=True)
class LeaseLost:
    action: ClassVar[str] = "leaseLost"


@dataclass(frozen=True, slots=True)
class ShardEnded:
    action: ClassVar[str] = "shardEnded"


@dataclass(frozen=True, slots=True)
class ShutdownRequested:
    action: ClassVar[str] = "shutdownRequested"


@dataclass(frozen=True, slots=True)
class LegacyShutdown:
    """KCL 1.x ``shutdown`` (reason ``TERMINATE`` or ``ZOMBIE``); only for the opt-in v1 protocol."""

    action: ClassVar[str] = "shutdown"
    reason: str


@dataclass(frozen=True, slots=True)
class CheckpointReply:
    """Daemon's answer to a checkpoint request: an echo of the request plus ``error`` (None = success)."""

    action: ClassVar[str] = "checkpoint"
    sequence_number: str | None
    sub_sequence_number: int | None
    error: str | None


@dataclass(frozen=True, slots=True)
class Status:
    """Child's reply that it finished the named action."""

    action: ClassVar[str] = "status"
    response_for: str | None


@dataclass(frozen=True, slots=True)
class CheckpointRequest:
    """Child asks to checkpoint. ``sequence_number`` None means "the last record delivered"."""

    action: ClassVar[str] = "checkpoint"
    sequence_number: str | None
    sub_sequence_number: int | None
    #: Why the request's fields cannot be used (a wrong type, a number out of range); the daemon then
    #: answers ``IllegalArgumentException``. The fields hold what could be read, else None.
    malformed: str | None = None


ActionMessage = Initialize | ProcessRecords | LeaseLost | ShardEnded | ShutdownRequested | LegacyShutdown
DaemonMessage = ActionMessage | CheckpointReply
ChildMessage = Status | CheckpointRequest

#: Action name -> message class, for every message that opens an exchange and expects a status.
ACTION_MESSAGES: dict[str, type[ActionMessage]] = {
    cls.action: cls
    for cls in (Initialize, ProcessRecords, LeaseLost, ShardEnded, ShutdownRequested, LegacyShutdown)
}
