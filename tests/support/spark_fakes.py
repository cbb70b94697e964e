"""In-memory fakes of what the Spark source and sink talk to: one Kinesis shard (GetShardIterator,
GetRecords, ListShards, PutRecords), the store of published batch ends, and SubscribeToShard."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from aws_kinesis_agg.aggregator import RecordAggregator

from kcl_daemon.aws.fanout import FanoutEvent
from kcl_daemon.aws.kinesis import GetRecordsResult, RawRecord
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.shards.hash_keys import HashKeyMap, effective_hash_key
from kcl_daemon.core.shards.iterator import IteratorPosition, IteratorType
from kcl_daemon.core.spark.batches import PublishedEnd
from kcl_daemon.core.spark.puts import EntryResult
from kcl_daemon.errors import AwsError, IteratorExpired


def aggregate(n: int, keys: Sequence[str] | None = None) -> bytes:
    """A KPL aggregate of ``n`` user records ``sub-0``... (partition keys ``keys`` or ``k0``...)."""
    agg = RecordAggregator()
    for i in range(n):
        assert agg.add_user_record(keys[i] if keys else f"k{i}", f"sub-{i}".encode()) is None
    record = agg.clear_and_get()
    assert record is not None
    return bytes(record.get_contents()[2])


def plain(*seqs: int, arrival: int = 1000) -> list[RawRecord]:
    return [RawRecord(f"r{s}".encode(), f"k{s}", str(s), arrival) for s in seqs]


@dataclass
class FakeKinesis:
    """One shard: records by position; pages of ``page`` records; closed or open at its end."""

    records: list[RawRecord]
    closed: bool = False
    page: int = 3
    expire_once_at: int | None = None
    iterators: list[IteratorPosition] = field(default_factory=list)
    calls: int = 0
    fetched: int = 0

    def get_shard_iterator(self, stream: str, shard_id: str, position: IteratorPosition) -> str:
        self.iterators.append(position)
        if position.type is IteratorType.TRIM_HORIZON:
            return "0"
        seq = int(position.sequence_number or 0)
        index = next(
            (i for i, r in enumerate(self.records) if int(r.sequence_number) >= seq), len(self.records)
        )
        if position.type is IteratorType.AFTER_SEQUENCE_NUMBER and index < len(self.records):
            index += int(self.records[index].sequence_number) == seq
        return str(index)

    def get_records(self, iterator: str, limit: int) -> GetRecordsResult:
        index = int(iterator)
        if self.expire_once_at is not None and index >= self.expire_once_at:
            self.expire_once_at = None
            raise IteratorExpired("expired")
        page = self.records[index : index + min(limit, self.page)]
        self.calls += 1
        self.fetched += len(page)
        nxt = index + len(page)
        at_end = nxt >= len(self.records)
        return GetRecordsResult(
            records=tuple(page),
            next_iterator=None if (at_end and self.closed and not page) else str(nxt),
            millis_behind_latest=0 if at_end else 1000,
            child_shards=(),
        )

    def list_shards(self, stream: str) -> list[Shard]:
        return [Shard("shardId-0", ending_sequence_number=1 if self.closed else None)]


class FakeEnds:
    """The published-ends store, first writer wins, in memory."""

    table_name = "fake-ends"

    def __init__(self) -> None:
        self.items: dict[tuple[str, int, str], PublishedEnd] = {}
        self.publishes = 0
        self.gets = 0

    def publish(self, run: str, batch: int, shard_id: str, end: PublishedEnd) -> PublishedEnd:
        self.publishes += 1
        return self.items.setdefault((run, batch, shard_id), end)

    def get(self, run: str, batch: int, shard_id: str) -> PublishedEnd | None:
        self.gets += 1
        return self.items.get((run, batch, shard_id))

    def read_batch(self, run: str, batch: int, shard_ids: Sequence[str]) -> dict[str, PublishedEnd]:
        return {s: self.items[(run, batch, s)] for s in shard_ids if (run, batch, s) in self.items}

    def prune(self, run: str, batches: Iterable[int], shard_ids: Iterable[str]) -> None:
        for batch in list(batches):
            for shard in list(shard_ids):
                self.items.pop((run, batch, shard), None)


class FakeSubscription:
    def __init__(self, events: list[FanoutEvent]) -> None:
        self.events = events
        self.closed = False

    def __iter__(self) -> Iterator[FanoutEvent]:
        yield from self.events

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeFanout:
    """SubscribeToShard over a list of records: events of ``per_event`` records, the last at
    ``MillisBehindLatest`` 0 (and without a continuation when the shard is ``closed``); ``refuse`` the
    first N subscriptions with the given error."""

    records: list[RawRecord]
    per_event: int = 3
    closed: bool = False
    refuse: list[AwsError] = field(default_factory=list)
    positions: list[IteratorPosition] = field(default_factory=list)
    subscriptions: list[FakeSubscription] = field(default_factory=list)

    def subscribe(self, consumer_arn: str, shard_id: str, position: IteratorPosition) -> FakeSubscription:
        self.positions.append(position)
        if self.refuse:
            raise self.refuse.pop(0)
        if position.type is IteratorType.TRIM_HORIZON:
            rest = list(self.records)
        else:
            seq = int(position.sequence_number or 0)
            after = position.type is IteratorType.AFTER_SEQUENCE_NUMBER
            rest = [
                r
                for r in self.records
                if int(r.sequence_number) > seq or (not after and int(r.sequence_number) == seq)
            ]
        events = []
        for first in range(0, max(len(rest), 1), self.per_event):
            chunk = tuple(rest[first : first + self.per_event])
            last = first + self.per_event >= len(rest)
            events.append(
                FanoutEvent(
                    records=chunk,
                    continuation_sequence_number=None
                    if (last and self.closed)
                    else (chunk[-1].sequence_number if chunk else (position.sequence_number or "0")),
                    millis_behind_latest=0 if last else 500,
                    child_shards=(),
                )
            )
        subscription = FakeSubscription(events)
        self.subscriptions.append(subscription)
        return subscription


@dataclass
class FakePuts:
    """PutRecords into shards by hash range (an entry's explicit hash key, else the MD5 of its partition
    key); ``answers`` are error codes per call (None: accepted), consumed in order; ``landed`` overrides
    the shard an entry lands on (the writer's shard map is stale). ``shard_of[i]``: where written[i] went."""

    shards: list[Shard]
    answers: list[list[str | None]] = field(default_factory=list)
    landed: str | None = None
    written: list[tuple[bytes, str, str | None]] = field(default_factory=list)
    shard_of: list[str] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)

    def list_shards(self, stream: str) -> list[Shard]:
        return self.shards

    def put_records(self, stream: str, entries: Sequence[tuple[bytes, str, str | None]]) -> list[EntryResult]:
        self.calls.append(len(entries))
        codes = self.answers.pop(0) if self.answers else [None] * len(entries)
        results = []
        for entry, code in zip(entries, codes, strict=True):
            if code is None:
                _, key, ehk = entry
                shard = HashKeyMap(self.shards).shard_for(
                    effective_hash_key(key, None if ehk is None else int(ehk))
                )
                landed = self.landed or ("?" if shard is None else shard.shard_id)
                self.written.append(entry)
                self.shard_of.append(landed)
                results.append(EntryResult(landed, str(len(self.written))))
            else:
                results.append(EntryResult(error_code=code, error_message="injected"))
        return results
