"""An executor's enhanced fan-out read over a fake SubscribeToShard: stop rules, resubscribes, 5 s rule."""

from __future__ import annotations

from kcl_daemon.aws.fanout import ConsumerInUse
from kcl_daemon.aws.kinesis import RawRecord
from kcl_daemon.core.shards.iterator import IteratorType
from kcl_daemon.core.spark.offsets import AT_SHARD_END, AT_TRIM_HORIZON, ShardPos, after
from kcl_daemon.spark.efo_read import read_efo
from kcl_daemon.spark.rows import ROW_OVERHEAD_BYTES
from kcl_daemon.spark.shard_reader import ShardRead
from tests.support.spark_fakes import FakeFanout, aggregate, plain


def efo(fanout: FakeFanout, start: ShardPos, max_rows: int = 100, cutoff: int | None = None) -> ShardRead:
    return read_efo(
        fanout,  # type: ignore[arg-type]
        "arn:consumer",
        "stream",
        "shardId-0",
        start,
        max_rows=max_rows,
        cutoff_ms=cutoff,
        sleep=lambda s: None,
        monotonic=lambda: 0.0,
    )


def seqs(read: ShardRead) -> list[tuple[str, int]]:
    return read.records.pairs()


def test_events_are_taken_until_one_at_the_tip() -> None:
    fanout = FakeFanout(plain(1, 2, 3, 4, 5, 6, 7))
    read = efo(fanout, AT_TRIM_HORIZON)
    assert seqs(read) == [(str(s), 0) for s in range(1, 8)]
    assert read.at_tip and read.end == after("7") and read.calls == 3
    assert fanout.subscriptions[0].closed


def test_the_budget_ends_the_read_inside_an_event() -> None:
    read = efo(FakeFanout(plain(1, 2, 3, 4, 5)), AT_TRIM_HORIZON, max_rows=4)
    assert seqs(read) == [(str(s), 0) for s in range(1, 5)] and read.end == after("4")
    assert not read.at_tip


def test_the_bytes_budget_ends_the_read_inside_an_event() -> None:
    fanout = FakeFanout(plain(1, 2, 3, 4, 5))
    read = read_efo(
        fanout,  # type: ignore[arg-type]
        "arn:consumer",
        "stream",
        "shardId-0",
        AT_TRIM_HORIZON,
        max_rows=100,
        cutoff_ms=None,
        max_bytes=2 * ROW_OVERHEAD_BYTES,
        sleep=lambda s: None,
        monotonic=lambda: 0.0,
    )
    assert seqs(read) == [("1", 0), ("2", 0)] and read.full and read.end == after("2")
    assert not read.at_tip


def test_a_closed_shard_read_to_its_end_ends_at_shard_end() -> None:
    read = efo(FakeFanout(plain(1, 2), closed=True), after("1"))
    assert seqs(read) == [("2", 0)] and read.end == AT_SHARD_END


def test_the_start_is_read_at_its_sequence_number_dropping_the_sub_records_it_covers() -> None:
    fanout = FakeFanout([RawRecord(aggregate(4), "agg", "5", 1000), *plain(6)])
    read = efo(fanout, after("5", 1))
    assert seqs(read) == [("5", 2), ("5", 3), ("6", 0)]
    assert fanout.positions[0].type is IteratorType.AT_SEQUENCE_NUMBER


def test_a_subscription_refused_within_five_seconds_of_the_last_is_retried() -> None:
    fanout = FakeFanout(plain(1, 2), refuse=[ConsumerInUse("in use"), ConsumerInUse("in use")])
    read = efo(fanout, AT_TRIM_HORIZON)
    assert seqs(read) == [("1", 0), ("2", 0)] and len(fanout.positions) == 3


def test_the_cutoff_stops_before_later_arrivals() -> None:
    read = efo(FakeFanout(plain(1, 2, arrival=100) + plain(3, arrival=900)), AT_TRIM_HORIZON, cutoff=500)
    assert seqs(read) == [("1", 0), ("2", 0)] and read.cut
