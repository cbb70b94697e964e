"""The Spark source's shard reader over an in-memory Kinesis: budgets, ends, aggregates, data loss."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from aws_kinesis_agg.aggregator import RecordAggregator

from kcl_daemon.aws.kinesis import GetRecordsResult, RawRecord
from kcl_daemon.core.shards.iterator import IteratorPosition, IteratorType
from kcl_daemon.errors import IteratorExpired
from kcl_daemon.spark.offsets import AT_SHARD_END, AT_TRIM_HORIZON, ShardPos, after
from kcl_daemon.spark.shard_reader import DataLoss, ReadLimits, read_shard


def aggregate(n: int) -> bytes:
    agg = RecordAggregator()
    for i in range(n):
        assert agg.add_user_record(f"k{i}", f"sub-{i}".encode()) is None
    record = agg.clear_and_get()
    assert record is not None
    return bytes(record.get_contents()[2])


@dataclass
class FakeKinesis:
    """One shard: records by position; pages of ``page`` records; closed or open at its end."""

    records: list[RawRecord]
    closed: bool = False
    page: int = 3
    expire_once_at: int | None = None
    iterators: list[IteratorPosition] = field(default_factory=list)

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
        nxt = index + len(page)
        at_end = nxt >= len(self.records)
        return GetRecordsResult(
            records=tuple(page),
            next_iterator=None if (at_end and self.closed and not page) else str(nxt),
            millis_behind_latest=0 if at_end else 1000,
            child_shards=(),
        )


def plain(*seqs: int, arrival: int = 1000) -> list[RawRecord]:
    return [RawRecord(f"r{s}".encode(), f"k{s}", str(s), arrival) for s in seqs]


def read(kinesis: FakeKinesis, start: ShardPos, **kwargs: object) -> object:
    limits = kwargs.pop("limits", ReadLimits(max_calls=50))
    return read_shard(
        kinesis,  # type: ignore[arg-type]
        "stream",
        "shardId-0",
        start,
        limits=limits,  # type: ignore[arg-type]
        sleep=lambda s: None,
        monotonic=lambda: 0.0,
        **kwargs,  # type: ignore[arg-type]
    )


def test_the_probe_stops_at_the_tip_and_the_read_replays_exactly_that() -> None:
    kinesis = FakeKinesis(plain(1, 2, 3, 4, 5, 6, 7))
    probe = read(kinesis, AT_TRIM_HORIZON)
    assert probe.end == after("7") and probe.at_tip and len(probe.records) == 7
    again = read(kinesis, AT_TRIM_HORIZON, stop_at=probe.end, limits=ReadLimits())
    assert [u.record.sequence_number for u in again.records] == [str(s) for s in range(1, 8)]


def test_a_budget_can_end_inside_an_aggregate_and_the_next_batch_resumes_at_the_next_sub_record() -> None:
    records = [*plain(1), RawRecord(aggregate(5), "agg", "2", 1000), *plain(3)]
    kinesis = FakeKinesis(records)
    first = read(kinesis, AT_TRIM_HORIZON, limits=ReadLimits(max_records=3, max_calls=50))
    assert first.end == after("2", 1)  # sub-sequence exact: (2, 1)
    second = read(kinesis, first.end, limits=ReadLimits(max_calls=50))
    assert [(u.record.sequence_number, u.record.sub_sequence_number) for u in second.records] == [
        ("2", 2),
        ("2", 3),
        ("2", 4),
        ("3", 0),
    ]
    assert kinesis.iterators[-1] == IteratorPosition(IteratorType.AT_SEQUENCE_NUMBER, "2")


def test_a_closed_shard_is_read_through_empty_pages_to_shard_end() -> None:
    kinesis = FakeKinesis(plain(1, 2), closed=True)
    done = read(kinesis, after("2"), closed=True)
    assert done.end == AT_SHARD_END and done.records == []
    open_shard = read(FakeKinesis(plain(1, 2)), after("2"))
    assert open_shard.end == after("2") and open_shard.at_tip


def test_the_cutoff_stops_before_later_arrivals() -> None:
    kinesis = FakeKinesis(plain(1, 2, arrival=100) + plain(3, 4, arrival=900))
    probe = read(kinesis, AT_TRIM_HORIZON, limits=ReadLimits(max_calls=50, cutoff_ms=500))
    assert probe.end == after("2")


def test_an_expired_iterator_is_refreshed_after_the_last_record_fetched() -> None:
    kinesis = FakeKinesis(plain(1, 2, 3, 4, 5, 6), expire_once_at=3)
    result = read(kinesis, AT_TRIM_HORIZON)
    assert [u.record.sequence_number for u in result.records] == ["1", "2", "3", "4", "5", "6"]
    assert IteratorPosition(IteratorType.AFTER_SEQUENCE_NUMBER, "3") in kinesis.iterators


def test_trimmed_records_are_data_loss_unless_told_otherwise() -> None:
    kinesis = FakeKinesis(plain(8, 9))
    with pytest.raises(DataLoss, match="trimmed"):
        read(kinesis, after("5"))
    kept = read(kinesis, after("5"), fail_on_data_loss=False)
    assert [u.record.sequence_number for u in kept.records] == ["8", "9"]


def test_a_planned_end_beyond_the_tip_is_data_loss() -> None:
    with pytest.raises(DataLoss, match="tip"):
        read(FakeKinesis(plain(1, 2)), AT_TRIM_HORIZON, stop_at=after("7"), limits=ReadLimits())


def test_a_read_that_took_every_record_fetched_resumes_with_its_iterator() -> None:
    kinesis = FakeKinesis(plain(1, 2, 3))
    first = read(kinesis, AT_TRIM_HORIZON)
    assert first.resume is not None and first.end == after("3")
    kinesis.records += plain(4, 5)
    gets = len(kinesis.iterators)
    second = read(kinesis, first.end, resume=first.resume)
    assert [u.record.sequence_number for u in second.records] == ["4", "5"]
    assert len(kinesis.iterators) == gets  # no GetShardIterator: the iterator went on
    budgeted = read(kinesis, AT_TRIM_HORIZON, limits=ReadLimits(max_records=2, max_calls=50))
    assert budgeted.resume is None  # stopped inside a page: the iterator is past the end
