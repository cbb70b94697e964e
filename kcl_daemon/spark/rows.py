"""The source's rows: one per user record, built as Arrow batches (the fastest way out of a Python source)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import pyarrow as pa

from kcl_daemon.spark.shard_reader import UserRecord

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


def to_arrow(stream: str, shard_id: str, records: Sequence[UserRecord]) -> pa.RecordBatch:
    """Rows of the source's schema for one shard's records, as one Arrow batch."""
    count = len(records)
    return pa.RecordBatch.from_arrays(
        [
            pa.repeat(pa.scalar(stream, pa.string()), count) if count else pa.array([], pa.string()),
            pa.repeat(pa.scalar(shard_id, pa.string()), count) if count else pa.array([], pa.string()),
            pa.array([u.record.sequence_number for u in records], pa.string()),
            pa.array([u.record.sub_sequence_number for u in records], pa.int64()),
            pa.array([u.record.partition_key for u in records], pa.string()),
            pa.array(
                [None if u.explicit_hash_key is None else str(u.explicit_hash_key) for u in records],
                pa.string(),
            ),
            pa.array(
                [u.record.approximate_arrival_timestamp * 1000 for u in records],
                pa.timestamp("us", tz="UTC"),
            ),
            pa.array([u.record.data for u in records], pa.binary()),
        ],
        schema=ARROW_SCHEMA,
    )


def to_ipc(batch: pa.RecordBatch) -> bytes:
    """One batch as Arrow IPC stream bytes (what the driver-read mode ships inside a task)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())
