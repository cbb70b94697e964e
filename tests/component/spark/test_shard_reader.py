"""The Spark source's shard reader over an in-memory Kinesis: budgets, ends, aggregates, data loss."""

from __future__ import annotations

import pytest

from kcl_daemon.aws.kinesis import RawRecord
from kcl_daemon.core.shards.iterator import IteratorPosition, IteratorType
from kcl_daemon.core.spark.offsets import AT_SHARD_END, AT_TRIM_HORIZON, ShardPos, after
from kcl_daemon.spark.rows import held_bytes, user_rows
from kcl_daemon.spark.shard_reader import DataLoss, ReadLimits, Resume, read_shard
from tests.support.spark_fakes import FakeKinesis, aggregate, plain


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
    assert again.records.sequence_numbers == [str(s) for s in range(1, 8)]


def test_a_budget_can_end_inside_an_aggregate_and_the_next_batch_resumes_at_the_next_sub_record() -> None:
    records = [*plain(1), RawRecord(aggregate(5), "agg", "2", 1000), *plain(3)]
    kinesis = FakeKinesis(records)
    first = read(kinesis, AT_TRIM_HORIZON, limits=ReadLimits(max_records=3, max_calls=50))
    assert first.end == after("2", 1)  # sub-sequence exact: (2, 1)
    second = read(kinesis, first.end, limits=ReadLimits(max_calls=50))
    assert second.records.pairs() == [
        ("2", 2),
        ("2", 3),
        ("2", 4),
        ("3", 0),
    ]
    assert kinesis.iterators[-1] == IteratorPosition(IteratorType.AT_SEQUENCE_NUMBER, "2")


def test_the_bytes_budget_ends_a_read_at_the_row_that_fills_it_without_fetching_past_it() -> None:
    kinesis = FakeKinesis(plain(*range(1, 21)))  # pages of 3
    per_row = held_bytes(next(user_rows(None, plain(1))))
    limits = ReadLimits(max_calls=50, max_bytes=per_row * 5 - 1)  # the fifth row fills it
    first = read(kinesis, AT_TRIM_HORIZON, limits=limits)
    assert first.records.sequence_numbers == ["1", "2", "3", "4", "5"]
    assert first.full and first.end == after("5") and first.resume is None
    assert kinesis.fetched == 5  # the second call asked for the 2 rows the budget had room for
    second = read(kinesis, first.end, limits=limits)
    assert second.records.sequence_numbers == ["6", "7", "8", "9", "10"]
    huge = read(FakeKinesis(plain(1, 2)), AT_TRIM_HORIZON, limits=ReadLimits(max_calls=50, max_bytes=1))
    assert huge.records.sequence_numbers == ["1"] and huge.full  # a row over the budget still moves on


def test_a_closed_shard_is_read_through_empty_pages_to_shard_end() -> None:
    kinesis = FakeKinesis(plain(1, 2), closed=True)
    done = read(kinesis, after("2"), closed=True)
    assert done.end == AT_SHARD_END and len(done.records) == 0
    open_shard = read(FakeKinesis(plain(1, 2)), after("2"))
    assert open_shard.end == after("2") and open_shard.at_tip


def test_the_cutoff_stops_before_later_arrivals() -> None:
    kinesis = FakeKinesis(plain(1, 2, arrival=100) + plain(3, 4, arrival=900))
    probe = read(kinesis, AT_TRIM_HORIZON, limits=ReadLimits(max_calls=50, cutoff_ms=500))
    assert probe.end == after("2")


def test_an_expired_iterator_is_refreshed_after_the_last_record_fetched() -> None:
    kinesis = FakeKinesis(plain(1, 2, 3, 4, 5, 6), expire_once_at=3)
    result = read(kinesis, AT_TRIM_HORIZON)
    assert result.records.sequence_numbers == ["1", "2", "3", "4", "5", "6"]
    assert IteratorPosition(IteratorType.AFTER_SEQUENCE_NUMBER, "3") in kinesis.iterators


def test_trimmed_records_are_data_loss_unless_told_otherwise() -> None:
    kinesis = FakeKinesis(plain(8, 9))
    with pytest.raises(DataLoss, match="trimmed"):
        read(kinesis, after("5"))
    kept = read(kinesis, after("5"), fail_on_data_loss=False)
    assert kept.records.sequence_numbers == ["8", "9"]


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
    assert second.records.sequence_numbers == ["4", "5"]
    assert len(kinesis.iterators) == gets  # no GetShardIterator: the iterator went on
    budgeted = read(kinesis, AT_TRIM_HORIZON, limits=ReadLimits(max_records=2, max_calls=50))
    # the budget caps each call's Limit, so the read stops on a page boundary: the iterator is exact
    assert budgeted.calls == 1 and budgeted.end == after("2") and budgeted.resume is not None
    rest = read(kinesis, budgeted.end, resume=budgeted.resume)
    assert rest.records.sequence_numbers == ["3", "4", "5"]


def test_a_read_that_starts_from_the_planners_probe_page_fetches_nothing_twice() -> None:
    kinesis = FakeKinesis(plain(1, 2, 3, 4, 5))
    iterator = kinesis.get_shard_iterator(
        "stream", "shardId-0", IteratorPosition(IteratorType.AFTER_SEQUENCE_NUMBER, "1")
    )
    head = kinesis.get_records(iterator, 1)  # the planner's question: one record after the end
    gets = len(kinesis.iterators)
    result = read(kinesis, after("1"), head=head, resume=Resume(head.next_iterator or "", None))
    assert result.records.sequence_numbers == ["2", "3", "4", "5"]
    assert len(kinesis.iterators) == gets  # the head's iterator went on: no GetShardIterator
    assert kinesis.fetched == 4  # the probe's record was not fetched again


def test_at_the_tip_the_end_moves_past_an_aggregate_the_shard_does_not_hold() -> None:
    outside = RawRecord(aggregate(3), "agg", "2", 1000)  # its keys hash all over the key space
    kinesis = FakeKinesis([*plain(1), outside])
    narrow = (0, 10)  # a shard whose range holds none of them: the aggregate is dropped whole
    result = read(kinesis, AT_TRIM_HORIZON, hash_range=narrow)
    assert result.records.sequence_numbers == ["1"]
    assert result.at_tip and result.end == after("2")  # not after("1"): asking again finds nothing new
    replay = read(kinesis, AT_TRIM_HORIZON, stop_at=result.end, limits=ReadLimits(), hash_range=narrow)
    assert replay.records.sequence_numbers == ["1"]  # the dropped end is reached
