"""Spike of the executor-read design (docs/spark-design.md): executors fetch, the driver only plans.

``format("kinesis-exec")``, with the options of ``format("kinesis")`` and ``leaseTableName`` naming the
table executors publish their ends to (:mod:`kcl_daemon.spark.end_store`); ``endStoreUpsert=true``
lets the spike use a table of its own. Not wired to the lease bridge (takes, renewals, checkpoints):
the design says how they fit.

A micro-batch's end offset says, per shard, where the batch starts (exact: a sequence and
sub-sequence number) and whether and how much it reads; the *end* of each read is decided by the
executor task (row budget, the shard's tip, its end, the AvailableNow cut-off) and published before
the task yields a row (first publication wins). Offsets (canonical key order)::

    {"batch": 7, "run": "<uuid>", "shards": {"shardId-…": {"from": {"seq": "…", "sub": 0},
     "last": "tip", "max": 100000, "read": true}}, "stream": "s", "until": null, "v": 2}

The driver, planning batch n+1, reads batch n's publications (one scan), turns them into exact
starts, and decides which shards to read: a shard whose last read stopped on its budget (or was never
read) is read; a shard whose last read reached its tip is read only if a one-record GetRecords after
its end finds a record (arrived before the AvailableNow cut-off, if any): the only records the driver
fetches. Nothing to read: the start offset comes back unchanged and Spark plans no batch.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from kcl_daemon.aws import source_clients
from kcl_daemon.aws.source_clients import kinesis_for
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.core.shard_graph import Shard
from kcl_daemon.core.shard_iterator import IteratorPosition, IteratorType, iterator_position_for
from kcl_daemon.retry import KINESIS
from kcl_daemon.spark.end_store import LeaseTableEndStore, PublishedEnd
from kcl_daemon.spark.offsets import (
    ShardPos,
    SourceOffset,
    initial_offset,
    readable_shards,
    split_budget,
    track_new_shards,
)
from kcl_daemon.spark.options import SourceOptions, parse_options
from kcl_daemon.spark.shard_reader import ReadLimits, ShardRead, read_shard
from kcl_daemon.spark.source import SCHEMA_DDL, to_arrow

logger = logging.getLogger(__name__)

VERSION: Final = 2
SPIKE_OPTIONS: Final = ("endStoreUpsert",)


@dataclass(frozen=True, slots=True)
class ShardTask:
    shard_id: str
    start: ShardPos
    max_rows: int
    closed: bool
    starting_hash_key: int
    ending_hash_key: int


@dataclass(frozen=True)
class ExecPartition(InputPartition):
    options: SourceOptions
    upsert: bool
    run: str
    batch: int
    until_ms: int | None
    shards: tuple[ShardTask, ...]


def _store(options: SourceOptions, upsert: bool) -> LeaseTableEndStore:
    key = source_clients._Key(  # the spike borrows the per-process client cache
        "dynamodb",
        options.lease_table_region or options.region,
        options.lease_table_endpoint_url or options.endpoint_url,
        options.credentials,
    )
    assert options.lease_table_name is not None
    return LeaseTableEndStore(source_clients._client(key), options.lease_table_name, upsert=upsert)


def _pos_of(end: PublishedEnd) -> ShardPos:
    return ShardPos(ExtendedSequenceNumber(end.seq, end.sub), end.ts)


def _end_of(start: ShardPos, read: ShardRead, max_rows: int) -> PublishedEnd:
    if read.end.is_shard_end:
        reason = "end"
    elif len(read.records) >= max_rows:
        reason = "budget"
    elif read.at_tip:
        reason = "tip"
    else:
        reason = "cutoff"
    end = read.end
    return PublishedEnd(
        end.checkpoint.sequence_number,
        end.checkpoint.sub_sequence_number,
        reason,
        len(read.records),
        end.timestamp_ms if end == start else None,
    )


def read_partition(p: ExecPartition) -> Iterator[pa.RecordBatch]:
    """Executor side: per shard, read (or re-read to the standing publication), publish, then yield."""
    options = p.options
    kinesis = kinesis_for(options)
    store = _store(options, p.upsert)
    for task in p.shards:
        common: dict[str, Any] = {
            "deaggregate": options.kpl_deaggregate,
            "hash_range": (task.starting_hash_key, task.ending_hash_key),
            "fail_on_data_loss": options.fail_on_data_loss,
            "closed": task.closed,
        }
        limits = ReadLimits(
            get_records_limit=options.get_records_limit, min_interval_s=options.min_fetch_interval_s
        )
        standing = store.get(p.run, p.batch, task.shard_id)
        if standing is None:
            decide = ReadLimits(
                max_records=task.max_rows,
                get_records_limit=min(options.get_records_limit, max(task.max_rows, 1)),
                min_interval_s=options.min_fetch_interval_s,
                cutoff_ms=p.until_ms,
            )
            read = read_shard(
                kinesis, options.stream_name, task.shard_id, task.start, limits=decide, **common
            )
            mine = _end_of(task.start, read, task.max_rows)
            standing = store.publish(p.run, p.batch, task.shard_id, mine)
            if standing != mine:  # another attempt published first: read exactly what it read
                logger.info(
                    "shard %s batch %s: adopting the standing end %s", task.shard_id, p.batch, standing
                )
                read = _read_to(kinesis, options, task, standing, limits, common)
        else:  # a retry, a speculative copy, or the replay after a restart
            read = _read_to(kinesis, options, task, standing, limits, common)
        if read.records:
            yield to_arrow(options.stream_name, task.shard_id, read.records)


def _read_to(
    kinesis: Any,
    options: SourceOptions,
    task: ShardTask,
    end: PublishedEnd,
    limits: ReadLimits,
    common: dict[str, Any],
) -> ShardRead:
    target = _pos_of(end)
    if target == task.start or end.rows == 0:
        return ShardRead(end=task.start)
    return read_shard(
        kinesis, options.stream_name, task.shard_id, task.start, stop_at=target, limits=limits, **common
    )


def _now_ms() -> int:
    return int(time.time() * 1000)


class ExecutorReadStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, upsert: bool) -> None:
        self.options = options
        self.upsert = upsert
        self._initial: dict[str, Any] | None = None
        self._cutoff_ms: int | None = None
        self._listing: list[Shard] = []
        self._listed_at: float | None = None
        self.driver_probes = 0
        self.driver_probe_records = 0

    def _shards(self) -> list[Shard]:
        now = time.monotonic()
        if self._listed_at is None or now - self._listed_at >= self.options.shard_discovery_interval_s:
            self._listing = KINESIS.call(kinesis_for(self.options).list_shards, self.options.stream_name)
            self._listed_at = now
        return self._listing

    def initialOffset(self) -> dict[str, Any]:
        if self._initial is None:
            start = initial_offset(
                self.options.stream_name, self._shards(), self.options.starting_position, _now_ms()
            )
            shards = {
                s: {"from": start.shards[s].to_json(), "last": None, "max": 0, "read": False}
                for s in sorted(start.shards)
            }
            self._initial = {
                "batch": -1,
                "run": uuid.uuid4().hex[:12],
                "shards": shards,
                "stream": start.stream,
                "until": None,
                "v": VERSION,
            }
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_records_per_batch is not None:
            return ReadMaxRows(self.options.max_records_per_batch)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._cutoff_ms = _now_ms()

    def _has_news(self, shard_id: str, pos: ShardPos) -> bool:
        """One GetShardIterator + one GetRecords(Limit=1) after ``pos``: a record (before the cut-off)?"""
        kinesis = kinesis_for(self.options)
        if pos.checkpoint.is_sentinel:
            position = iterator_position_for(
                pos.checkpoint,
                timestamp=None if pos.timestamp_ms is None else _datetime(pos.timestamp_ms),
            )
        else:  # the last read took every record up to the tip, aggregates whole: look after it
            position = IteratorPosition(
                IteratorType.AFTER_SEQUENCE_NUMBER, sequence_number=pos.checkpoint.sequence_number
            )
        iterator = KINESIS.call(kinesis.get_shard_iterator, self.options.stream_name, shard_id, position)
        page = KINESIS.call(kinesis.get_records, iterator, 1)
        self.driver_probes += 1
        self.driver_probe_records += len(page.records)
        if not page.records:
            return page.next_iterator is None  # a closed shard read to its end: the read publishes "end"
        return self._cutoff_ms is None or page.records[0].approximate_arrival_timestamp <= self._cutoff_ms

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        batch, run = int(start["batch"]), str(start["run"])
        entries: Mapping[str, Mapping[str, Any]] = start["shards"]
        was_read = [s for s, e in entries.items() if e["read"]]
        published = _store(self.options, self.upsert).read_batch(run, batch) if was_read else {}
        positions: dict[str, ShardPos] = {}
        last: dict[str, str | None] = {}
        for shard_id, entry in entries.items():
            if entry["read"]:
                end = published.get(shard_id)
                if end is None:
                    raise RuntimeError(
                        f"batch {batch} of run {run} read shard {shard_id} but its end is not in "
                        f"{self.options.lease_table_name}: the table lost it"
                    )
                positions[shard_id], last[shard_id] = _pos_of(end), end.reason
            else:
                positions[shard_id] = ShardPos.from_json(shard_id, entry["from"])
                last[shard_id] = entry["last"]
        listing = self._shards()
        after = SourceOffset(str(start["stream"]), positions)
        tracked = track_new_shards(after, listing)
        to_read = [
            s
            for s in readable_shards(after, tracked, listing)
            if last.get(s) in (None, "budget") or self._has_news(s, tracked.shards[s])
        ]
        if not to_read:
            return start
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        budget = {
            s: n
            for s, n in split_budget(max_rows, self.options.max_records_per_shard_per_batch, to_read).items()
            if n > 0
        }
        shards = {
            s: {
                "from": tracked.shards[s].to_json(),
                "last": last.get(s),
                "max": budget.get(s, 0),
                "read": s in budget,
            }
            for s in sorted(tracked.shards)
        }
        return {
            "batch": batch + 1,
            "run": run,
            "shards": shards,
            "stream": tracked.stream,
            "until": self._cutoff_ms,
            "v": VERSION,
        }

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return {"driverProbeRecords": self.driver_probe_records, "driverProbes": self.driver_probes}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[ExecPartition]:
        if end["batch"] == start.get("batch"):
            return []
        by_id = {s.shard_id: s for s in self._shards()}
        tasks = []
        for shard_id, entry in sorted(end["shards"].items()):
            if not entry["read"]:
                continue
            shard = by_id.get(shard_id)
            tasks.append(
                ShardTask(
                    shard_id,
                    ShardPos.from_json(shard_id, entry["from"]),
                    int(entry["max"]),
                    shard is not None and not shard.is_open,
                    0 if shard is None else shard.starting_hash_key,
                    (2**128 - 1) if shard is None else shard.ending_hash_key,
                )
            )
        per = self.options.shards_per_task
        return [
            ExecPartition(
                self.options,
                self.upsert,
                str(end["run"]),
                int(end["batch"]),
                end["until"],
                tuple(tasks[i : i + per]),
            )
            for i in range(0, len(tasks), per)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ExecPartition)
        return read_partition(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Batch ``end['batch']`` is done: its ends are the lease checkpoints (not written by the
        spike); publications older than it are dropped."""
        batch = int(end["batch"])
        if batch >= 1:
            _store(self.options, self.upsert).prune(str(end["run"]), batch, end["shards"])

    def stop(self) -> None:
        pass


def _datetime(ms: int) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, tz=UTC)


class ExecutorReadDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kinesis-exec"

    def _parsed(self) -> tuple[SourceOptions, bool]:
        raw = {
            k: v
            for k, v in self.options.items()
            if k not in SPIKE_OPTIONS and k.lower() not in {o.lower() for o in SPIKE_OPTIONS}
        }
        upsert = str(self.options.get("endStoreUpsert", "false")).lower() == "true"
        options = parse_options(raw)
        if options.lease_table_name is None:
            raise ValueError("kinesis-exec needs leaseTableName (where executors publish their ends)")
        return options, upsert

    def schema(self) -> str:
        self._parsed()
        return SCHEMA_DDL

    def streamReader(self, schema: StructType) -> ExecutorReadStreamReader:
        return ExecutorReadStreamReader(*self._parsed())


def register(spark: Any) -> None:
    spark.dataSource.register(ExecutorReadDataSource)
