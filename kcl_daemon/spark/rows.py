"""The source's rows: one per user record, kept column by column and handed to Spark as Arrow batches.

A read of a shard collects its user records in a :class:`Rows` (one Python list per column, no object
per record: a page of 10,000 records is appended in a few milliseconds) and :meth:`Rows.to_arrow` turns
them into one Arrow batch (the fastest way out of a Python source). :func:`user_rows` turns a page of
Kinesis records into user records: plain records as they are (their payloads decoded from the page's
base64 text), KPL aggregates split by the daemon's :class:`Deaggregator`.
"""

from __future__ import annotations

import bisect
from binascii import a2b_base64
from collections.abc import Iterator, Sequence
from typing import Final

import pyarrow as pa

from kcl_daemon.aws.kinesis import AnyRawRecord, RawRecord
from kcl_daemon.aws.records_page import EncodedRawRecord, PageRecords
from kcl_daemon.core.spark.whole_pages import PageFacts
from kcl_daemon.retrieval.deaggregate import MAGIC, MAGIC_B64_PREFIX, Deaggregator

#: The Arrow form of ``partitions.SCHEMA_DDL``.
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


def _texts(raws: Sequence[AnyRawRecord]) -> list[str]:
    """The base64 texts of a page whose payloads are all still text."""
    if type(raws) is PageRecords:
        return raws.data_b64
    return [raw.data_b64 for raw in raws]  # type: ignore[union-attr]


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


#: The longest partition key Kinesis takes (characters): what one row of an aggregate may hold besides
#: its payload, in :func:`page_facts`' bound.
MAX_PARTITION_KEY_CHARS: Final = 256


def page_facts(raws: Sequence[AnyRawRecord], deaggregate: bool) -> PageFacts:
    """What a read can know of a page before turning it into rows: its last sequence number, latest
    arrival, and upper bounds of its rows and of the bytes they hold (:func:`held_bytes`). A plain
    record is one row of its payload and key; a KPL aggregate (when ``deaggregate``) is bounded by
    one row per byte of its payload, each with the longest partition key."""
    if not raws:
        return PageFacts(0, None, None, 0, 0)
    if type(raws) is PageRecords:  # the page's own columns: nothing built per record
        latest = max(raws.arrival_millis)
        keys = sum(map(len, raws.partition_keys))
    else:
        latest = max(raw.approximate_arrival_timestamp for raw in raws)
        keys = sum(len(raw.partition_key) for raw in raws)
    if type(raws) is PageRecords or all(type(raw) is EncodedRawRecord for raw in raws):
        texts = _texts(raws)
        payload = sum(map(len, texts)) * 3 // 4  # at least the decoded size
        aggregates = [len(text) * 3 // 4 for text in texts if text.startswith(MAGIC_B64_PREFIX)]
    else:
        payloads = [raw.data for raw in raws]
        payload = sum(map(len, payloads))
        aggregates = [len(data) for data in payloads if data.startswith(MAGIC)]
    count = len(raws)
    rows, held = count, payload + keys + count * ROW_OVERHEAD_BYTES
    if not deaggregate:
        aggregates = []  # delivered whole, one row each
    if aggregates:
        inside = sum(aggregates)
        rows += inside - len(aggregates)
        held += inside * (MAX_PARTITION_KEY_CHARS + ROW_OVERHEAD_BYTES)
    last = int(raws[-1].sequence_number)
    return PageFacts(count, last, latest, rows, held, len(aggregates))


class Rows:
    """User records of one shard, column by column, in sequence order."""

    __slots__ = ("data", "explicit_hash_keys", "partition_keys", "sequence_numbers", "stamps", "subs")

    def __init__(self) -> None:
        self.sequence_numbers: list[str] = []
        self.subs: list[int] = []
        self.partition_keys: list[str] = []
        self.explicit_hash_keys: list[str | None] = []
        self.stamps: list[int] = []
        self.data: list[bytes] = []

    def __len__(self) -> int:
        return len(self.sequence_numbers)

    def append(self, row: UserRow) -> None:
        seq, _, sub, key, ehk, stamp, data = row
        self.sequence_numbers.append(seq)
        self.subs.append(sub)
        self.partition_keys.append(key)
        self.explicit_hash_keys.append(ehk)
        self.stamps.append(stamp)
        self.data.append(data)

    def add_plain(self, raws: Sequence[AnyRawRecord]) -> int:
        """Every record of ``raws`` as one row (none is a KPL aggregate to split), column by column;
        returns the bytes the new rows hold (:func:`held_bytes`)."""
        count = len(raws)
        if type(raws) is PageRecords:  # the page's own columns
            sequence_numbers, keys, stamps = raws.sequence_numbers, raws.partition_keys, raws.arrival_millis
        else:
            sequence_numbers = [raw.sequence_number for raw in raws]
            keys = [raw.partition_key for raw in raws]
            stamps = [raw.approximate_arrival_timestamp for raw in raws]
        if type(raws) is PageRecords or all(type(raw) is EncodedRawRecord for raw in raws):
            data = list(map(a2b_base64, _texts(raws)))
        else:
            data = [raw.data for raw in raws]
        self.sequence_numbers += sequence_numbers
        self.subs += [0] * count
        self.partition_keys += keys
        self.explicit_hash_keys += [None] * count
        self.stamps += stamps
        self.data += data
        return sum(map(len, data)) + sum(map(len, keys)) + count * ROW_OVERHEAD_BYTES

    def extend(self, other: Rows) -> None:
        for name in self.__slots__:
            getattr(self, name).extend(getattr(other, name))

    def up_to(self, number: int, sub: int) -> Rows:
        """The rows at or before (sequence number, sub-sequence)."""
        keys = [(int(seq), s) for seq, s in zip(self.sequence_numbers, self.subs, strict=True)]
        count = bisect.bisect_right(keys, (number, sub))
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
