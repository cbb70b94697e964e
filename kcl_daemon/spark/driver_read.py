"""``readMode=driver``: the driver reads every record while planning (offsets v1).

The driver's source runner plans each micro-batch by reading every readable shard from the batch's start
(the *probe*: up to the batch's share of the row limit, the shard's tip, its end, or the AvailableNow
cut-off) and hands those rows to the executors inside the tasks (up to ``shipRecordsMax``); a batch
replayed after a restart is read again by the executors from its start up to its planned end, so a
batch is a pure function of its two offsets. No DynamoDB is needed (without ``leaseTableName``); one
process fetches the whole stream, so this mode is for small streams and local work. The default,
executor reads, is :mod:`kcl_daemon.spark.planner`; it also replays the last v1 batch of a checkpoint
this mode wrote, through :func:`read_ranges`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Final

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.streaming.datasource import (
    ReadLimit,
    ReadMaxRows,
)

from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.spark.leases import is_ahead
from kcl_daemon.core.spark.offsets import (
    BadOffset,
    ShardPos,
    ShardRange,
    SourceOffset,
    group_ranges,
    readable_shards,
    shard_ranges,
    split_budget,
    track_new_shards,
)
from kcl_daemon.spark.clients import kinesis_for, reaching_table
from kcl_daemon.spark.lease_bridge import LeaseBridge
from kcl_daemon.spark.options import SourceOptions
from kcl_daemon.spark.rows import to_ipc
from kcl_daemon.spark.shard_reader import ReadLimits, Resume, ShardRead, read_shard
from kcl_daemon.spark.stream_reader import StreamReaderBase, new_bridge

logger = logging.getLogger(__name__)

PROBE_THREADS: Final = 16


@dataclass(frozen=True)
class KinesisPartition(InputPartition):
    """One Spark task: up to ``shardsPerTask`` shard ranges of one micro-batch.

    ``shipped[i]`` is range i's rows as Arrow IPC bytes when the driver's probe read exactly that range
    just before (then the executor does not read Kinesis again), else None (a replayed batch, or a
    range over ``shipRecordsMax``): the executor reads it. Both are the same rows.
    """

    options: SourceOptions
    ranges: tuple[ShardRange, ...]
    shipped: tuple[bytes | None, ...] = field(default=(), repr=False)  # never megabytes in a message


def read_ranges(partition: KinesisPartition) -> Iterator[pa.RecordBatch]:
    """Executor side: every planned range, records after its start up to and including its end."""
    options = partition.options
    kinesis = kinesis_for(options)
    limits = ReadLimits(
        get_records_limit=options.get_records_limit, min_interval_s=options.min_fetch_interval_s
    )
    shipped = partition.shipped or (None,) * len(partition.ranges)
    for shard_range, data in zip(partition.ranges, shipped, strict=True):
        if data is not None:
            yield from pa.ipc.open_stream(data)
            continue
        read = read_shard(
            kinesis,
            options.stream_name,
            shard_range.shard_id,
            shard_range.start,
            stop_at=shard_range.end,
            limits=limits,
            deaggregate=options.kpl_deaggregate,
            hash_range=(shard_range.starting_hash_key, shard_range.ending_hash_key),
            fail_on_data_loss=options.fail_on_data_loss,
        )
        if read.records:
            yield read.records.to_arrow(options.stream_name, shard_range.shard_id)


def _v1(data: dict[str, object]) -> SourceOffset:
    if data.get("v") == 2:
        raise BadOffset(
            "this checkpoint was written by readMode=executor: keep readMode=executor, or start the "
            "query with a new checkpointLocation"
        )
    return SourceOffset.from_json(data)


class DriverStreamReader(StreamReaderBase):
    """``readMode=driver``: planning by reading (one instance per query in the source runner), and the
    executors' read of shipped or replayed ranges."""

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self._initial: dict[str, object] | None = None
        self._bridge: LeaseBridge | None = None
        self._joined_at_start = False
        self._checked_restart = False
        self._report: dict[str, object] | None = None
        self._probed: dict[tuple[str, ShardPos, ShardPos], bytes] = {}
        self._resume: dict[str, tuple[ShardPos, Resume]] = {}  # shard -> (end it follows, iterator)

    # -- shard listing and lease bridge (driver) -------------------------------------------------

    def _join(self) -> dict[str, ShardPos] | None:
        """Join the fleet once (with leaseTableName); the table's positions by shard, else None."""
        if self.options.lease_table_name is None:
            return None
        if self._bridge is None:
            self._bridge = new_bridge(self.options)
            with reaching_table(self.options, self.options.lease_table_name):
                return dict(self._bridge.join())
        return dict(self._bridge.positions())

    # -- the streaming reader API ----------------------------------------------------------------

    def initialOffset(self) -> dict[str, object]:
        if self._initial is None:  # called twice at start: must be the same offset both times
            lease_positions = self._join()
            self._joined_at_start = True
            self._initial = self._starting_offset(lease_positions).to_json()
        return self._initial

    def _check_restart(self, start: SourceOffset) -> None:
        """A query restarted from its checkpoint must not rewind shards daemons read on meanwhile."""
        if self._checked_restart:
            return
        self._checked_restart = True
        if self._joined_at_start or self._bridge is None:
            return
        table = self._bridge.positions()
        ahead = sorted(
            shard
            for shard, pos in start.shards.items()
            if shard in table and is_ahead(table[shard].checkpoint, pos)
        )
        if ahead:
            self._bridge.release()
            raise RuntimeError(
                f"lease table {self.options.lease_table_name} is ahead of this query's checkpoint on "
                f"{', '.join(ahead)}: other workers processed records after this query stopped. Start "
                "the query with a new checkpointLocation to continue from the lease table."
            )

    def latestOffset(self, start: dict[str, object], limit: ReadLimit) -> dict[str, object]:
        self._join()
        start_offset = _v1(start)
        self._check_restart(start_offset)
        listing = self._shards()
        tracked = track_new_shards(start_offset, listing)
        readable = readable_shards(start_offset, tracked, listing)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        budget = split_budget(max_rows, self.options.per_shard_row_cap, readable)
        by_id = {s.shard_id: s for s in listing}
        probes = {shard: n for shard, n in budget.items() if n > 0}
        results = self._probe(tracked, probes, by_id)
        positions = dict(tracked.shards)
        self._probed = {}
        shipped = 0
        for shard_id, read in results.items():
            positions[shard_id] = read.end
            if read.resume is not None:
                self._resume[shard_id] = (read.end, read.resume)
            else:
                self._resume.pop(shard_id, None)
            if read.records and shipped + len(read.records) <= self.options.ship_records_max:
                shipped += len(read.records)
                batch = read.records.to_arrow(tracked.stream, shard_id)
                self._probed[(shard_id, tracked.position(shard_id), read.end)] = to_ipc(batch)
        behind = {s: r.millis_behind_latest for s, r in results.items() if r.millis_behind_latest is not None}
        self._report = {
            "maxMillisBehindLatest": max(behind.values(), default=0),
            "millisBehindLatest": dict(sorted(behind.items())),
            "probedRecords": sum(len(r.records) for r in results.values()),
            "readableShards": len(readable),
            "trackedShards": len(positions),
        }
        return SourceOffset(tracked.stream, positions).to_json()

    def _probe(
        self, tracked: SourceOffset, budget: dict[str, int], by_id: dict[str, Shard]
    ) -> dict[str, ShardRead]:
        if not budget:
            return {}
        kinesis = kinesis_for(self.options)
        options = self.options

        resumes = dict(self._resume)

        def probe(shard_id: str) -> ShardRead:
            shard = by_id.get(shard_id)
            start = tracked.position(shard_id)
            hint = resumes.get(shard_id)
            limits = ReadLimits(
                max_records=budget[shard_id],
                max_calls=options.max_fetch_calls_per_shard_per_batch,
                get_records_limit=options.get_records_limit,
                min_interval_s=options.min_fetch_interval_s,
                cutoff_ms=self._cutoff_ms,
                max_bytes=options.max_bytes_per_shard_per_batch,
            )
            return read_shard(
                kinesis,
                options.stream_name,
                shard_id,
                start,
                limits=limits,
                deaggregate=options.kpl_deaggregate,
                hash_range=(0, 2**128 - 1)
                if shard is None
                else (shard.starting_hash_key, shard.ending_hash_key),
                fail_on_data_loss=options.fail_on_data_loss,
                closed=shard is not None and not shard.is_open,
                resume=hint[1] if hint is not None and hint[0] == start else None,
            )

        shard_ids = sorted(budget)
        with ThreadPoolExecutor(
            max_workers=min(PROBE_THREADS, len(shard_ids)), thread_name_prefix="spark-probe"
        ) as pool:
            return dict(zip(shard_ids, pool.map(probe, shard_ids), strict=True))

    def reportLatestOffset(self) -> dict[str, object] | None:
        return self._report

    def partitions(self, start: dict[str, object], end: dict[str, object]) -> Sequence[KinesisPartition]:
        self._join()
        start_offset, end_offset = _v1(start), _v1(end)
        by_id = {s.shard_id: s for s in self._shards()}
        ranges = shard_ranges(start_offset, end_offset, by_id)
        probed, self._probed = self._probed, {}
        return [
            KinesisPartition(
                self.options, group, tuple(probed.get((r.shard_id, r.start, r.end)) for r in group)
            )
            for group in group_ranges(ranges, self.options.shards_per_task)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KinesisPartition):
            raise TypeError(f"not a partition of this source: {partition!r}")
        return read_ranges(partition)

    def commit(self, end: dict[str, object]) -> None:
        if self._bridge is not None:
            self._bridge.checkpoint(_v1(end), self._shards())

    def stop(self) -> None:
        if self._bridge is not None:
            self._bridge.release()
