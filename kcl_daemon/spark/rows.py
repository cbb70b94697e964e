"""The source's rows: one per user record, kept column by column and handed to Spark as Arrow batches.

A read of a shard collects its user records in a :class:`Rows` (one Python list per column, no object
per record: a page of 10,000 records is appended in a few milliseconds) and :meth:`Rows.to_arrow` turns
them into one Arrow batch (the fastest way out of a Python source). :func:`user_rows` turns a page of
Kinesis records into user records: plain records as they are (their payloads decoded from the page's
base64 text), KPL aggregates split by the daemon's :class:`Deaggregator`.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from typing import Final

import pyarrow as pa

from kcl_daemon.aws.kinesis import AnyRawRecord, RawRecord
from kcl_daemon.aws.records_page import EncodedRawRecord
from kcl_daemon.retrieval.deaggregate import MAGIC, MAGIC_B64_PREFIX, Deaggregator

SCHEMA_DDL: Final = (
    "stream string, shardId string, sequenceNumber string, subSequenceNumber long, partitionKey string, "
    "explicitHashKey string, approximateArrivalTimestamp timestamp, data binary"
)
ARROW_SCHEMA: Final = pa.schema(
    [
        ("stream", pa.string()),
        ("shardId", pa.string()),
        ("sequenceNumber", pa.string()),
        ("subSequenceNumber", pa.int64()),
        ("partitionKey", pa.string()),
        ("explicitHashKey", pa.string()),
        ("approximateArrivalTimestamp", pa.timestamp("us", tz="UTC")),
        ("data", pa.binary()),
    ]
)

#: One user record: (sequence number, its integer value, sub-sequence, partition key, explicit hash key,
#: arrival in epoch ms, payload).
UserRow = tuple[str, int, int, str, str | None, int, bytes]

#: What a row held in :class:`Rows` costs besides its payload and partition key (the sequence number's
#: string and integer, the stamp, seven list slots: about 400 bytes, measured with tracemalloc).
ROW_OVERHEAD_BYTES: Final = 400


def held_bytes(row: UserRow) -> int:
    """The memory a row takes while a read holds it (the estimate ``maxBytesPerShardPerBatch`` counts)."""
    return len(row[6]) + len(row[3]) + ROW_OVERHEAD_BYTES


def _is_aggregate(raw: AnyRawRecord) -> bool:
    if type(raw) is EncodedRawRecord:
        return raw.data_b64.startswith(MAGIC_B64_PREFIX)
    return raw.data.startswith(MAGIC)


def user_rows(deaggregator: Deaggregator | None, raws: Sequence[AnyRawRecord]) -> Iterator[UserRow]:
    """The user records of a page, in order (aggregates split when ``deaggregator`` is given)."""
    for raw in raws:
        if deaggregator is not None and _is_aggregate(raw):
            decoded = (
                raw
                if type(raw) is RawRecord
                else RawRecord(
                    raw.data, raw.partition_key, raw.sequence_number, raw.approximate_arrival_timestamp
                )
            )
            for record, ehk in deaggregator.deaggregate_with_hash_keys((decoded,)):
                yield (
                    record.sequence_number,
                    int(record.sequence_number),
                    record.sub_sequence_number,
                    record.partition_key,
                    None if ehk is None else str(ehk),
                    record.approximate_arrival_timestamp,
                    record.data,
                )
        else:
            yield (
                raw.sequence_number,
                int(raw.sequence_number),
                0,
                raw.partition_key,
                None,
                raw.approximate_arrival_timestamp,
                raw.data,
            )


class Rows:
    """User records of one shard, column by column, in sequence order."""

    __slots__ = ("data", "explicit_hash_keys", "keys", "partition_keys", "sequence_numbers", "stamps", "subs")

    def __init__(self) -> None:
        self.sequence_numbers: list[str] = []
        self.keys: list[tuple[int, int]] = []  # (sequence number, sub-sequence) for ordering
        self.subs: list[int] = []
        self.partition_keys: list[str] = []
        self.explicit_hash_keys: list[str | None] = []
        self.stamps: list[int] = []
        self.data: list[bytes] = []

    def __len__(self) -> int:
        return len(self.sequence_numbers)

    def append(self, row: UserRow) -> None:
        seq, number, sub, key, ehk, stamp, data = row
        self.sequence_numbers.append(seq)
        self.keys.append((number, sub))
        self.subs.append(sub)
        self.partition_keys.append(key)
        self.explicit_hash_keys.append(ehk)
        self.stamps.append(stamp)
        self.data.append(data)

    def extend(self, other: Rows) -> None:
        for name in self.__slots__:
            getattr(self, name).extend(getattr(other, name))

    def up_to(self, number: int, sub: int) -> Rows:
        """The rows at or before (sequence number, sub-sequence)."""
        count = bisect.bisect_right(self.keys, (number, sub))
        kept = Rows()
        for name in self.__slots__:
            getattr(kept, name).extend(getattr(self, name)[:count])
        return kept

    def pairs(self) -> list[tuple[str, int]]:
        """(sequence number, sub-sequence) of every row."""
        return list(zip(self.sequence_numbers, self.subs, strict=True))

    def to_arrow(self, stream: str, shard_id: str) -> pa.RecordBatch:
        """Rows of the source's schema, as one Arrow batch."""
        count = len(self)
        return pa.RecordBatch.from_arrays(
            [
                pa.array([stream] * count, pa.string()),
                pa.array([shard_id] * count, pa.string()),
                pa.array(self.sequence_numbers, pa.string()),
                pa.array(self.subs, pa.int64()),
                pa.array(self.partition_keys, pa.string()),
                pa.array(self.explicit_hash_keys, pa.string()),
                pa.array([stamp * 1000 for stamp in self.stamps], pa.timestamp("us", tz="UTC")),
                pa.array(self.data, pa.binary()),
            ],
            schema=ARROW_SCHEMA,
        )


def to_ipc(batch: pa.RecordBatch) -> bytes:
    """One batch as Arrow IPC stream bytes (what the driver-read mode ships inside a task)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())
