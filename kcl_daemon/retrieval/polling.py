"""Polling retrieval for one shard: a :class:`~kcl_daemon.retrieval.source.RecordSource` over GetRecords.

The shell around the pure rules in :mod:`kcl_daemon.core.shards.iterator` (where to start),
:mod:`kcl_daemon.core.shards.read_pacing` (when to call) and
:mod:`kcl_daemon.core.shards.shard_end` (whether the shard ended). Blocking boto3 calls run on
the executor passed in; time comes from a :class:`~kcl_daemon.clock.Clock`.

* ``start(after)`` positions the reader at a checkpoint (lazily: the first ``next_batch`` gets the
  iterator). User records at or before ``after`` are dropped (resuming inside a KPL aggregate).
* ``next_batch()`` waits for its turn (``idle_between_reads_s``, at least 0.2 s between call starts),
  calls GetRecords, de-aggregates and returns a :class:`Batch` - possibly empty - whose records are
  the page's columns (:class:`kcl_protocol.RecordColumns`), never an object per record. Once the shard has
  ended it returns ``None`` and ``child_shards`` holds the children (empty: shard or stream gone, or
  unknown).
* Throttling, network trouble, expired iterators and inconsistent responses are retried under
  ``settings.retry`` with backoff; an expired iterator is replaced by one ``AFTER_SEQUENCE_NUMBER`` of
  the last record fetched (not the checkpoint). When the policy gives up the error propagates.
* Cancellation-safe: state changes only after a call returns, so a cancelled ``next_batch`` loses
  nothing (the next call reads again with the same iterator).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import ParamSpec, Protocol, TypeVar, cast

from kcl_daemon.aws.kinesis import GetRecordsResult
from kcl_daemon.blocking import run_blocking
from kcl_daemon.clock import Clock, SystemClock
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import ChildShard, Shard
from kcl_daemon.core.shards.iterator import (
    IteratorPosition,
    NothingToRead,
    iterator_position_for,
    records_after,
    refresh_position,
)
from kcl_daemon.core.shards.read_pacing import (
    MIN_IDLE_BETWEEN_READS_S,
    read_interval_s,
    seconds_until_next_read,
)
from kcl_daemon.core.shards.shard_end import (
    ReadOutcome,
    ReadVerdict,
    ResponseFacts,
    children_of,
    judge_response,
)
from kcl_daemon.errors import (
    DependencyUnavailable,
    InconsistentResponse,
    IteratorExpired,
    ShardNotFound,
    Throttled,
)
from kcl_daemon.retrieval.deaggregate import Deaggregator
from kcl_daemon.retrieval.settings import RetrievalSettings
from kcl_daemon.retrieval.source import Batch
from kcl_protocol import AnyRecord

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


class KinesisReader(Protocol):
    """The part of :class:`kcl_daemon.aws.kinesis.Kinesis` a polling reader uses (fakes implement it)."""

    def get_shard_iterator(self, stream_name: str, shard_id: str, position: IteratorPosition) -> str: ...

    def get_records(self, iterator: str, limit: int) -> GetRecordsResult: ...

    def list_shards(self, stream_name: str) -> Sequence[Shard]: ...


class AsyncKinesisReader(Protocol):
    """What a reader offers on top of :class:`KinesisReader` when it can be awaited on the event loop
    (:class:`kcl_daemon.aws.kinesis.Kinesis` on the lean request path)."""

    def reads_async(self, position: IteratorPosition | None = None) -> bool: ...

    async def get_shard_iterator_async(
        self, stream_name: str, shard_id: str, position: IteratorPosition
    ) -> str: ...

    async def get_records_async(self, iterator: str, limit: int) -> GetRecordsResult: ...


@dataclass(slots=True)
class PollingStats:
    get_records_calls: int = 0
    shard_iterators: int = 0  # GetShardIterator calls that succeeded
    iterator_refreshes: int = 0  # expired/invalid iterators replaced
    throttled: int = 0
    inconsistent_responses: int = 0
    list_shards_calls: int = 0
    kinesis_records: int = 0  # records GetRecords returned (aggregates count once)
    user_records: int = 0  # user records delivered in batches


@dataclass(slots=True)
class _Position:
    """Where the reader is; replaced as a whole by ``start``."""

    start: IteratorPosition
    after: ExtendedSequenceNumber
    iterator: str | None = None
    refresh_at: IteratorPosition | None = None  # set when the iterator expired
    last_fetched: str | None = None  # sequence number of the last Kinesis record fetched
    drop_up_to: ExtendedSequenceNumber | None = None


class PollingRecordSource:
    """Reads one shard with GetRecords. ``child_shards`` is set once ``next_batch`` has returned None."""

    def __init__(
        self,
        kinesis: KinesisReader,
        stream_name: str,
        shard: Shard,
        executor: Executor,
        settings: RetrievalSettings | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.stream_name = stream_name
        self.shard_id = shard.shard_id
        self.settings = settings or RetrievalSettings()
        self.stats = PollingStats()
        self.deaggregator = Deaggregator(shard.shard_id, shard.starting_hash_key, shard.ending_hash_key)
        #: None while the shard has not ended; then its children (empty: gone, or none known).
        self.child_shards: tuple[ChildShard, ...] | None = None
        #: Why the shard ended as "not found" (ResourceNotFound), if it did: not a real shard end.
        self.not_found: str | None = None
        self._kinesis = kinesis
        #: the same reader when it can also serve calls on the event loop (None: it cannot)
        self._aio = cast(AsyncKinesisReader, kinesis) if hasattr(kinesis, "reads_async") else None
        self._executor = executor
        self._clock: Clock = clock or SystemClock()
        self._shard: Shard | None = shard  # what ListShards last said; None = not listed any more
        self._position: _Position | None = None
        self._last_call_started: float | None = None
        self._last_success_ended: float | None = None  # idle time counts from here, as in Java
        self._last_millis_behind: int | None = None

    @property
    def ended(self) -> bool:
        return self.child_shards is not None

    async def start(self, after: ExtendedSequenceNumber) -> None:
        """Read from right after ``after`` (a checkpoint) on the next ``next_batch``."""
        self.child_shards = None
        try:
            start = iterator_position_for(after, timestamp=self.settings.at_timestamp)
        except NothingToRead:
            logger.info("shard %s: checkpoint is SHARD_END; nothing to read", self.shard_id)
            self._position = None
            self.child_shards = ()
            return
        self._position = _Position(start=start, after=after, drop_up_to=None if after.is_sentinel else after)
        logger.debug("shard %s: reading from %s (checkpoint %s)", self.shard_id, start, after)

    async def next_batch(self) -> Batch | None:
        if self.child_shards is not None:
            return None
        position = self._position
        if position is None:
            raise RuntimeError("PollingRecordSource.next_batch() before start()")
        interval = read_interval_s(
            self.settings.idle_between_reads_s,
            reduced_tps_threshold_s=self.settings.reduced_tps_threshold_s,
            last_millis_behind_latest=self._last_millis_behind,
        )
        await self._wait_turn(interval)
        try:
            verdict, result = await self._read(position)
        except ShardNotFound as exc:
            logger.info("shard %s: %s; the shard ended without children", self.shard_id, exc)
            self.not_found = str(exc)
            self._end(())
            return None
        records: Sequence[AnyRecord] = self.deaggregator.columns(result.records)
        if position.drop_up_to is not None:
            records = records_after(records, position.drop_up_to)
            if records:
                position.drop_up_to = None
        if result.records:
            position.last_fetched = result.records[-1].sequence_number
        position.iterator = result.next_iterator
        self._last_millis_behind = result.millis_behind_latest
        self.stats.kinesis_records += len(result.records)
        self.stats.user_records += len(records)
        if verdict.outcome is ReadOutcome.SHARD_END:
            logger.info(
                "shard %s: shard end (%s); children: %s",
                self.shard_id,
                verdict.reason,
                ", ".join(c.shard_id for c in verdict.child_shards) or "none",
            )
            self._end(verdict.child_shards)
            if not records:
                return None
        return Batch(records, result.millis_behind_latest)

    def _end(self, children: tuple[ChildShard, ...]) -> None:
        self.child_shards = children
        self._position = None

    async def _wait_turn(self, interval_s: float) -> None:
        now = self._clock.monotonic()
        delay = max(
            seconds_until_next_read(now, self._last_call_started, MIN_IDLE_BETWEEN_READS_S),
            seconds_until_next_read(now, self._last_success_ended, interval_s),
        )
        if delay > 0:
            await self._clock.sleep(delay)

    async def _run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await run_blocking(self._executor, functools.partial(fn, *args, **kwargs))

    async def _read(self, position: _Position) -> tuple[ReadVerdict, GetRecordsResult]:
        return await self.settings.retry.run_async(
            functools.partial(self._read_once, position),
            sleep=self._clock.sleep,
            monotonic=self._clock.monotonic,
            before_retry=functools.partial(self._wait_turn, MIN_IDLE_BETWEEN_READS_S),
        )

    async def _read_once(self, position: _Position) -> tuple[ReadVerdict, GetRecordsResult]:
        """One GetRecords (after GetShardIterator if needed) and its verdict; errors propagate."""
        kinesis, aio = self._kinesis, self._aio
        if position.iterator is None:
            at = position.refresh_at or position.start
            if aio is not None and aio.reads_async(at):
                iterator = await aio.get_shard_iterator_async(self.stream_name, self.shard_id, at)
            else:
                iterator = await self._run(kinesis.get_shard_iterator, self.stream_name, self.shard_id, at)
            position.iterator = iterator
            position.refresh_at = None
            self.stats.shard_iterators += 1
        self._last_call_started = self._clock.monotonic()
        self.stats.get_records_calls += 1
        try:
            if aio is not None and aio.reads_async():
                result = await aio.get_records_async(position.iterator, self.settings.max_records)
            else:
                result = await self._run(kinesis.get_records, position.iterator, self.settings.max_records)
        except IteratorExpired as exc:
            position.iterator = None
            position.refresh_at = refresh_position(position.last_fetched, position.start)
            self.stats.iterator_refreshes += 1
            logger.info("shard %s: %s; reading again from %s", self.shard_id, exc, position.refresh_at)
            raise
        except Throttled:
            self.stats.throttled += 1
            raise
        self._last_success_ended = self._clock.monotonic()
        verdict = await self._judge(result, position)
        if verdict.outcome is ReadOutcome.INVALID:
            self.stats.inconsistent_responses += 1
            raise InconsistentResponse(f"GetRecords on shard {self.shard_id}: {verdict.reason}")
        return verdict, result

    async def _judge(self, result: GetRecordsResult, position: _Position) -> ReadVerdict:
        """The verdict on ``result``, listing shards first when the rules need ListShards."""
        facts = ResponseFacts(
            has_next_iterator=result.next_iterator is not None,
            child_shards=result.child_shards,
            record_count=len(result.records),
        )
        last = result.records[-1].sequence_number if result.records else position.last_fetched
        last_fetched = None if last is None else int(last)
        verdict = judge_response(facts, shard=self._shard, last_fetched=last_fetched, listed_children=None)
        if verdict.outcome is not ReadOutcome.LIST_SHARDS:
            return verdict
        self.stats.list_shards_calls += 1
        try:
            shards = await self._run(self._kinesis.list_shards, self.stream_name)
        except DependencyUnavailable as exc:
            logger.info("shard %s: listing shards: %s; treating the shard as gone", self.shard_id, exc)
            shards = []
        self._shard = next((s for s in shards if s.shard_id == self.shard_id), None)
        children = children_of(self.shard_id, shards)
        return judge_response(facts, shard=self._shard, last_fetched=last_fetched, listed_children=children)
