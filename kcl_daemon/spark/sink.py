"""The Kinesis sink: ``df.writeStream.format("kinesis")`` and ``df.write.format("kinesis")``.

Each Spark task sends its rows (``data``, ``partitionKey``, optional ``explicitHashKey``) in PutRecords
calls of at most 500 entries and 5 MiB, one call at a time, in row order. Entries a response reports
failed (throttled, an internal failure) are sent again, alone, with exponential backoff and jitter under
the named ``PUT_RECORDS`` policy; a call that fails whole is sent again whole under the same policy; an
entry that fails for good (a KMS access error) or a policy that gives up fails the task, and Spark
retries it. The decisions are :mod:`kcl_daemon.core.spark.puts`.

With ``aggregationEnabled`` user records are packed into KPL aggregates (``aws_kinesis_agg``), one
aggregator per target shard (ListShards' hash ranges; a record's explicit hash key or the MD5 of its
partition key), so each aggregate lands whole on the shard its records hash to, where KCL, the daemon
and this source split it again. An aggregate that lands on another shard (the stream was resharded
since the listing) and holds a record outside that shard's range would be dropped whole by those
readers: its records are sent again one by one.

Delivery is at least once: a retried task sends its rows again, and a micro-batch replayed after a
failure between the sink's writes and Spark's commit is sent again whole. Sending again can put a
record of a key after a later record of the same key. Never logs payloads.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa
from aws_kinesis_agg.aggregator import RecordAggregator
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.core.shards.hash_keys import HashKeyMap, effective_hash_key
from kcl_daemon.core.spark.puts import (
    CallFiller,
    RetryPlan,
    check_columns,
    entry_problem,
    entry_size,
    misrouted,
    retry_plan,
)
from kcl_daemon.errors import AwsError, ConfigError, KclError, Throttled
from kcl_daemon.retry import KINESIS, PUT_RECORDS, RetryPolicy
from kcl_daemon.spark.clients import kinesis_for
from kcl_daemon.spark.options import SinkOptions

logger = logging.getLogger(__name__)

#: How long a task's process reuses a ListShards result for aggregation (a misroute refreshes it).
SHARD_MAP_TTL_S: Final = 30.0


class SinkFailed(AwsError):
    """Records the sink could not write (a permanent per-entry error, or the retry policy gave up)."""


class _Unfinished(Throttled):
    """Entries of a call still to send (retriable): raised inside the retry loop, never outside it."""


def check_schema(schema: StructType, overwrite: bool) -> None:
    """Fail at start when the frame does not fit the sink, naming every problem."""
    problems = check_columns({f.name: f.dataType.simpleString() for f in schema.fields})
    if overwrite:
        problems.append("a stream cannot be overwritten: write with mode('append')")
    if problems:
        raise ConfigError([f"kinesis sink: {problem}" for problem in problems])


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task wrote."""

    records: int = 0  # user records written
    entries: int = 0  # Kinesis records written (aggregates count once)
    calls: int = 0
    resent: int = 0  # entries sent again after a partial failure or a misroute


@dataclass(slots=True)
class _Entry:
    data: bytes
    partition_key: str
    explicit_hash_key: str | None
    users: list[tuple[bytes, str, str | None]] | None = None  # the user records of an aggregate
    hash_keys: list[int] = field(default_factory=list)


@dataclass(slots=True)
class _CallState:
    left: list[_Entry]
    misrouted: list[tuple[bytes, str, str | None]] = field(default_factory=list)


_shard_maps: dict[tuple[str, str | None], tuple[float, HashKeyMap]] = {}


def _shard_map(kinesis: Kinesis, options: SinkOptions, *, fresh: bool = False) -> HashKeyMap:
    key = (options.stream_name, options.endpoint_url)
    cached = _shard_maps.get(key)
    if cached is None or fresh or time.monotonic() - cached[0] > SHARD_MAP_TTL_S:
        shards = KINESIS.call(kinesis.list_shards, options.stream_name)
        cached = (time.monotonic(), HashKeyMap(shards))
        _shard_maps[key] = cached
    return cached[1]


class _Writer:
    """One task's writes (see the module docstring)."""

    def __init__(
        self,
        options: SinkOptions,
        kinesis: Kinesis,
        *,
        retry: RetryPolicy = PUT_RECORDS,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.options = options
        self.kinesis = kinesis
        self.retry = retry
        self.sleep = sleep
        self.monotonic = monotonic
        self.stats = SinkCommitMessage()
        self.pending: list[_Entry] = []
        self.filler = CallFiller()
        self.aggregators: dict[
            str, tuple[RecordAggregator, list[int], list[tuple[bytes, str, str | None]]]
        ] = {}

    # -- rows in -------------------------------------------------------------------------------------

    def write_batches(self, batches: Iterable[pa.RecordBatch]) -> SinkCommitMessage:
        row = 0
        for batch in batches:
            names = batch.schema.names
            data = batch.column(names.index("data")).to_pylist()
            keys = batch.column(names.index("partitionKey")).to_pylist()
            hashes = (
                batch.column(names.index("explicitHashKey")).to_pylist()
                if "explicitHashKey" in names
                else [None] * batch.num_rows
            )
            for payload, key, ehk in zip(data, keys, hashes, strict=True):
                raw = payload.encode("utf-8") if isinstance(payload, str) else payload
                problem = entry_problem(raw, key, ehk)
                if problem is not None:
                    raise SinkFailed(f"kinesis sink: row {row} of this task: {problem}")
                self._add(raw, key, ehk)
                row += 1
        self._flush_aggregators()
        self._send_pending()
        return self.stats

    def _add(self, data: bytes, key: str, ehk: str | None) -> None:
        self.stats.records += 1
        if not self.options.aggregation_enabled:
            self._queue(_Entry(data, key, ehk))
            return
        hash_key = effective_hash_key(key, None if ehk is None else int(ehk))
        shard = _shard_map(self.kinesis, self.options).shard_for(hash_key)
        target = "?" if shard is None else shard.shard_id
        if target not in self.aggregators:
            self.aggregators[target] = (RecordAggregator(self.options.aggregation_max_bytes), [], [])
        aggregator, hash_keys, users = self.aggregators[target]
        full = aggregator.add_user_record(key, data, ehk)
        if full is not None:  # the aggregate before this record is complete; this one starts the next
            self._queue(self._aggregate_entry(full, hash_keys, users))
            hash_keys.clear()
            users.clear()
        hash_keys.append(hash_key)
        users.append((data, key, ehk))

    @staticmethod
    def _aggregate_entry(
        record: Any, hash_keys: list[int], users: list[tuple[bytes, str, str | None]]
    ) -> _Entry:
        partition_key, explicit_hash_key, data = record.get_contents()
        return _Entry(bytes(data), str(partition_key), explicit_hash_key, list(users), list(hash_keys))

    def _flush_aggregators(self) -> None:
        for aggregator, hash_keys, users in self.aggregators.values():
            if aggregator.get_num_user_records():
                self._queue(self._aggregate_entry(aggregator.clear_and_get(), hash_keys, users))
            hash_keys.clear()
            users.clear()

    def _queue(self, entry: _Entry) -> None:
        size = entry_size(entry.data, entry.partition_key)
        if not self.filler.fits(size):
            self._send_pending()
        self.pending.append(entry)
        self.filler.add(size)
        if self.filler.full:
            self._send_pending()

    # -- calls out -----------------------------------------------------------------------------------

    def _send_pending(self) -> None:
        if self.pending:
            entries, self.pending = self.pending, []
            self.filler.reset()
            self._send(entries)

    def _send(self, entries: list[_Entry]) -> None:
        """Send ``entries`` until every one is written, under the retry policy."""
        state = _CallState(entries)
        for attempt in self.retry.retrying(sleep=self.sleep, monotonic=self.monotonic):
            with attempt:
                self._call(state)
        if state.misrouted:
            self.stats.resent += len(state.misrouted)
            for data, key, ehk in state.misrouted:
                self._queue(_Entry(data, key, ehk))
            self._send_pending()

    def _call(self, state: _CallState) -> None:
        left = state.left
        results = self.kinesis.put_records(
            self.options.stream_name, [(e.data, e.partition_key, e.explicit_hash_key) for e in left]
        )
        self.stats.calls += 1
        plan: RetryPlan = retry_plan(results)
        if plan.failed:
            first = plan.failed[0]
            raise SinkFailed(
                f"kinesis sink: {len(plan.failed)} record(s) failed for good ({first.code}: {first.message})"
            )
        retry = set(plan.retry)
        for index, (entry, result) in enumerate(zip(left, results, strict=True)):
            if index in retry:
                continue
            self.stats.entries += 1
            if entry.users is not None and self._misrouted(entry, result.shard_id):
                state.misrouted.extend(entry.users)
        if retry:
            self.stats.resent += len(retry)
            state.left = [left[i] for i in sorted(retry)]
            raise _Unfinished(f"{len(retry)} of {len(left)} record(s) throttled or failed inside the call")

    def _misrouted(self, entry: _Entry, shard_id: str | None) -> bool:
        shards = {s.shard_id: s for s in _shard_map(self.kinesis, self.options).shards}
        if shard_id not in shards:
            shards = {s.shard_id: s for s in _shard_map(self.kinesis, self.options, fresh=True).shards}
        if not misrouted(entry.hash_keys, shards.get(shard_id or "")):
            return False
        logger.warning(
            "kinesis sink: an aggregate of %d record(s) landed on %s, whose hash range does not hold them "
            "all (the stream was resharded?); sending them again one by one",
            len(entry.hash_keys),
            shard_id,
        )
        _shard_map(self.kinesis, self.options, fresh=True)
        return True


def write_rows(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
    """One task's rows to Kinesis (executor side)."""
    writer = _Writer(options, kinesis_for(options))
    try:
        return writer.write_batches(batches)
    except KclError:
        raise
    except Exception as exc:  # a malformed row Arrow could not hand over, say: name the sink
        raise SinkFailed(f"kinesis sink: {exc!r}") from exc


def _log_commit(messages: list[WriterCommitMessage | None], what: str) -> None:
    done = [m for m in messages if isinstance(m, SinkCommitMessage)]
    logger.info(
        "kinesis sink: %s: %d record(s) in %d Kinesis record(s), %d call(s), %d sent again",
        what,
        sum(m.records for m in done),
        sum(m.entries for m in done),
        sum(m.calls for m in done),
        sum(m.resent for m in done),
    )


class KinesisBatchWriter(DataSourceArrowWriter):
    """``df.write.format("kinesis").mode("append").save()``."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return write_rows(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_commit(messages, "written")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_commit(messages, "aborted after writing (records sent stay in the stream)")


class KinesisStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("kinesis")``: at least once (see the module docstring)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return write_rows(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_commit(messages, f"batch {batchId} written")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_commit(messages, f"batch {batchId} aborted after writing (records sent stay in the stream)")
