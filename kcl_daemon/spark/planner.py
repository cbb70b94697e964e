"""Executor reads (the default ``readMode``): the driver plans each micro-batch, executors fetch it.

The driver's source runner keeps one :class:`ExecutorStreamReader` per query. Planning batch n + 1
(``latestOffset``, the rules are :mod:`kcl_daemon.core.spark.batches`):

* read the publications of batch n (consistent BatchGetItem calls, one per 100 shards it read): they
  are the exact starts of batch n + 1;
* ListShards at most every ``shardDiscoveryIntervalMs``;
* for each shard whose last read reached its tip, ask Kinesis once: GetShardIterator after its end and
  GetRecords with ``Limit`` 1 (in parallel over the shards asked). A record is news; it rides to the
  executor inside the task, so it is not fetched twice (polling mode). These calls and at most one record
  per such shard are everything the driver fetches, whatever the volume;
* with ``leaseTableName``, hold a lease for every shard the batch reads (executors publish on it).

``partitions`` turns the offset into tasks (:class:`~kcl_daemon.spark.executor_read.ExecutorPartition`),
``commit`` writes the lease checkpoints of a committed batch from its publications (sub-sequence exact)
and removes publications no batch needs. Without ``leaseTableName`` the ends go to the metadata table
(created at start). Enhanced fan-out: the consumer is registered (or found) once, at the query's first
call, and its ARN travels in every task; it is deregistered on ``stop`` only when asked to.

A query whose checkpoint holds offsets of ``readMode=driver`` (v1) continues here: its last v1 batch is
replayed as it was planned, and the next batch starts from its end positions.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Final

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.streaming.datasource import (
    ReadLimit,
    ReadMaxRows,
)

from kcl_daemon.aws.batch_ends import BatchEnds, LeaseItemEnds, MetadataTableEnds
from kcl_daemon.aws.kinesis import GetRecordsResult
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.shards.iterator import IteratorPosition, IteratorType, iterator_position_for
from kcl_daemon.core.spark.batches import (
    BatchOffset,
    PublishedEnd,
    batches_to_prune,
    committed_offset,
    first_offset,
    frontier,
    parse_offset,
    plan_next,
)
from kcl_daemon.core.spark.leases import is_ahead
from kcl_daemon.core.spark.offsets import ShardPos, SourceOffset, group_ranges, shard_ranges
from kcl_daemon.retry import KINESIS
from kcl_daemon.spark.clients import batch_ends_for, fanout_for, kinesis_for, reaching_table
from kcl_daemon.spark.lease_bridge import LeaseBridge
from kcl_daemon.spark.options import ConsumerMode, SourceOptions
from kcl_daemon.spark.partitions import ExecutorPartition, ShardTask
from kcl_daemon.spark.stream_reader import StreamReaderBase, new_bridge

logger = logging.getLogger(__name__)

PROBE_THREADS: Final = 16


class ExecutorStreamReader(StreamReaderBase):
    """Driver-side planning of executor reads (one instance per query in the source runner), and the
    executors' ``read``."""

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self._initial: dict[str, object] | None = None
        self._run: str | None = None  # drawn when this runner first needs one
        self._ready = False
        self._bridge: LeaseBridge | None = None
        self._joined_at_start = False
        self._checked_restart = False
        self._consumer_arn: str | None = None
        self._planned: set[tuple[str, int]] = set()
        self._heads: dict[str, tuple[ShardPos, GetRecordsResult]] = {}
        self._after: dict[tuple[str, int], SourceOffset] = {}  # positions after a batch, for commit
        self._read_by_batch: dict[tuple[str, int], tuple[str, ...]] = {}
        self._report: dict[str, object] = {}
        self.driver_calls = {"GetShardIterator": 0, "GetRecords": 0, "records": 0}

    # -- set-up (driver, once) ---------------------------------------------------------------------

    def _setup(self) -> dict[str, ShardPos] | None:
        """Join the fleet (with a lease table) or make sure the metadata table exists; register the
        fan-out consumer. Returns the lease table's positions when this call joined."""
        if self._ready:
            return None
        joined: dict[str, ShardPos] | None = None
        if self.options.lease_table_name is not None:
            self._bridge = new_bridge(self.options)
            with reaching_table(self.options, self.options.lease_table_name):
                joined = dict(self._bridge.join())
        else:
            store = batch_ends_for(self.options)
            if isinstance(store, MetadataTableEnds):
                with reaching_table(self.options, store.table_name):
                    store.create_if_missing()
        if self.options.consumer_mode is ConsumerMode.EFO:
            fanout = fanout_for(self.options)
            stream_arn = KINESIS.call(fanout.stream_arn, self.options.stream_name)
            assert self.options.consumer_name is not None
            self._consumer_arn = fanout.ensure_consumer(stream_arn, self.options.consumer_name)
            logger.info("reading through stream consumer %s", self.options.consumer_name)
        self._ready = True
        return joined

    def _new_run(self) -> str:
        if self._run is None:
            self._run = uuid.uuid4().hex[:12]
        return self._run

    # -- the streaming reader API ------------------------------------------------------------------

    def initialOffset(self) -> dict[str, object]:
        if self._initial is None:  # called twice at start: must be the same offset both times
            listing: list[Shard] | None = None
            if self._ready or self.options.lease_table_name is not None:
                lease_positions = self._setup()  # joining may wait for leases: list the shards after it
            else:  # the metadata table's check and the listing are independent: overlap their calls
                with ThreadPoolExecutor(1, thread_name_prefix="spark-start") as pool:
                    listed = pool.submit(self._shards, fresh=True)
                    lease_positions = self._setup()
                    listing = listed.result()
            self._joined_at_start = self._bridge is not None
            start = self._starting_offset(lease_positions, listing)
            self._initial = first_offset(start, self._new_run()).to_json()
        return self._initial

    def _previous(self, start: Mapping[str, object]) -> BatchOffset:
        parsed = parse_offset(start)
        if isinstance(parsed, SourceOffset):  # a readMode=driver checkpoint continues with executor reads
            logger.info("continuing a readMode=driver checkpoint with executor reads")
            return first_offset(parsed, self._new_run())
        return parsed

    def _ends(self, offset: BatchOffset) -> dict[str, PublishedEnd]:
        if not offset.read_shards:
            return {}
        return batch_ends_for(self.options).read_batch(offset.run, offset.batch, offset.read_shards)

    def latestOffset(self, start: dict[str, object], limit: ReadLimit) -> dict[str, object]:
        self._setup()
        previous = self._previous(start)
        ends = self._ends(previous)
        listing = self._shards()
        front = frontier(previous, ends, listing, self._cutoff_ms)
        self._after[(previous.run, previous.batch)] = SourceOffset(previous.stream, dict(front.positions))
        self._check_restart(front.positions)
        news = self._probe(front.to_probe, front.positions)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        plan = plan_next(
            front,
            news,
            max_rows=max_rows,
            per_shard_cap=self.options.per_shard_row_cap,
            until_ms=self._cutoff_ms,
        )
        self._report = {
            "batch": previous.batch if plan is None else plan.batch,
            "driverGetRecords": self.driver_calls["GetRecords"],
            "driverRecords": self.driver_calls["records"],
            "probedShards": len(front.to_probe),
            "readShards": 0 if plan is None else len(plan.read_shards),
            "trackedShards": len(front.positions),
        }
        if plan is None:
            return start
        if self._bridge is not None:
            reading = {shard: plan.shards[shard].start for shard in plan.read_shards}
            missing = self._bridge.ensure_leases(listing, reading)
            if missing:
                raise RuntimeError(
                    f"lease table {self.options.lease_table_name}: the query cannot hold the lease(s) of "
                    f"{', '.join(missing)} (another worker took them?)"
                )
        self._planned.add((plan.run, plan.batch))
        self._read_by_batch[(plan.run, plan.batch)] = plan.read_shards
        return plan.to_json()

    def _check_restart(self, positions: Mapping[str, ShardPos]) -> None:
        """A query restarted from its checkpoint must not rewind shards daemons read on meanwhile."""
        if self._checked_restart:
            return
        self._checked_restart = True
        if self._joined_at_start or self._bridge is None:
            return
        table = self._bridge.positions()
        ahead = sorted(s for s, pos in positions.items() if s in table and is_ahead(table[s].checkpoint, pos))
        if ahead:
            self._bridge.release()
            raise RuntimeError(
                f"lease table {self.options.lease_table_name} is ahead of this query's checkpoint on "
                f"{', '.join(ahead)}: other workers processed records after this query stopped. Start "
                "the query with a new checkpointLocation to continue from the lease table."
            )

    def _probe(self, shard_ids: Sequence[str], positions: Mapping[str, ShardPos]) -> dict[str, bool]:
        """Ask each shard for one record after its position: is there news (before the cut-off)?"""
        self._heads = {}
        if not shard_ids:
            return {}
        kinesis = kinesis_for(self.options)
        stream = self.options.stream_name

        def ask(shard_id: str) -> tuple[str, GetRecordsResult]:
            pos = positions[shard_id]
            if pos.checkpoint.is_sentinel:
                timestamp = (
                    None if pos.timestamp_ms is None else datetime.fromtimestamp(pos.timestamp_ms / 1000, UTC)
                )
                position = iterator_position_for(pos.checkpoint, timestamp=timestamp)
            else:  # every record up to the tip was taken, aggregates whole: look after it
                position = IteratorPosition(
                    IteratorType.AFTER_SEQUENCE_NUMBER, sequence_number=pos.checkpoint.sequence_number
                )
            iterator = KINESIS.call(kinesis.get_shard_iterator, stream, shard_id, position)
            return shard_id, KINESIS.call(kinesis.get_records, iterator, 1)

        with ThreadPoolExecutor(min(PROBE_THREADS, len(shard_ids)), thread_name_prefix="spark-probe") as pool:
            pages = dict(pool.map(ask, shard_ids))
        news: dict[str, bool] = {}
        for shard_id, page in pages.items():
            self.driver_calls["GetShardIterator"] += 1
            self.driver_calls["GetRecords"] += 1
            self.driver_calls["records"] += len(page.records)
            if not page.records:
                news[shard_id] = page.next_iterator is None  # closed and read to its end: publish "end"
                continue
            cutoff = self._cutoff_ms
            news[shard_id] = cutoff is None or page.records[0].approximate_arrival_timestamp <= cutoff
            if news[shard_id] and self.options.consumer_mode is ConsumerMode.POLLING:
                self._heads[shard_id] = (positions[shard_id], page)
        return news

    def reportLatestOffset(self) -> dict[str, object] | None:
        return self._report

    def partitions(self, start: dict[str, object], end: dict[str, object]) -> Sequence[InputPartition]:
        if start == end:
            return []
        self._setup()
        parsed = parse_offset(end)
        listing = {s.shard_id: s for s in self._shards()}
        if isinstance(parsed, SourceOffset):  # the last batch readMode=driver planned: replay it as planned
            from kcl_daemon.spark.driver_read import KinesisPartition

            ranges = shard_ranges(SourceOffset.from_json(start), parsed, listing)
            return [
                KinesisPartition(self.options, group, ())
                for group in group_ranges(ranges, self.options.shards_per_task)
            ]
        replay = (parsed.run, parsed.batch) not in self._planned
        tasks = []
        for shard_id in parsed.read_shards:
            entry = parsed.shards[shard_id]
            shard = listing.get(shard_id)
            head = self._heads.get(shard_id)
            tasks.append(
                ShardTask(
                    shard_id,
                    entry.start,
                    entry.max_rows,
                    shard is not None and not shard.is_open,
                    0 if shard is None else shard.starting_hash_key,
                    (2**128 - 1) if shard is None else shard.ending_hash_key,
                    head[1] if head is not None and head[0] == entry.start and not replay else None,
                )
            )
        self._heads = {}
        per = self.options.shards_per_task
        return [
            ExecutorPartition(
                self.options,
                parsed.run,
                parsed.batch,
                parsed.until_ms,
                tuple(tasks[i : i + per]),
                self._consumer_arn,
                replay,
            )
            for i in range(0, len(tasks), per)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # The read paths load here, in the processes that run tasks: the driver's source runner, a new
        # process for every query, never imports them (see :mod:`kcl_daemon.spark.partitions`).
        if isinstance(partition, ExecutorPartition):
            from kcl_daemon.spark.executor_read import read_partition

            return read_partition(partition)
        from kcl_daemon.spark.driver_read import KinesisPartition, read_ranges

        if isinstance(partition, KinesisPartition):
            return read_ranges(partition)
        raise TypeError(f"not a partition of this source: {partition!r}")

    def commit(self, end: dict[str, object]) -> None:
        """Batch ``end`` is done: its ends become the lease checkpoints; old publications go."""
        parsed = parse_offset(end)
        if isinstance(parsed, SourceOffset):
            if self._bridge is not None:
                self._bridge.checkpoint(parsed, self._shards())
            return
        key = (parsed.run, parsed.batch)
        store = batch_ends_for(self.options)
        if self._bridge is not None:
            after = self._after.get(key) or committed_offset(parsed, self._ends(parsed))
            self._bridge.checkpoint(after, self._shards())
            if isinstance(store, LeaseItemEnds):
                for shard_id, names in self._bridge.stale_ends(parsed.run, parsed.batch - 1).items():
                    store.remove_attributes(parsed.run, shard_id, names)
        else:
            self._prune(store, parsed)
        for old in [k for k in self._after if k[0] == parsed.run and k[1] < parsed.batch]:
            del self._after[old]

    def _prune(self, store: BatchEnds, offset: BatchOffset) -> None:
        drop = list(batches_to_prune(offset.batch))
        shards = sorted({s for b in drop for s in self._read_by_batch.pop((offset.run, b), ())})
        if shards:
            store.prune(offset.run, drop, shards)

    def stop(self) -> None:
        if self._bridge is not None:
            self._bridge.release()
        if (
            self._consumer_arn is not None
            and self.options.require_consumer_deregistration
            and self.options.consumer_name is not None
        ):
            fanout = fanout_for(self.options)
            fanout.deregister_consumer(None, None, self._consumer_arn)
            logger.info("deregistered stream consumer %s", self.options.consumer_name)
