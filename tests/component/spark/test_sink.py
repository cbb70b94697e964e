"""The Kinesis sink's writer over a fake PutRecords: call sizes, partial failures, aggregation."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kcl_daemon.aws.kinesis import RawRecord
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.shards.hash_keys import effective_hash_key
from kcl_daemon.retrieval.deaggregate import Deaggregator
from kcl_daemon.spark import sink
from kcl_daemon.spark.options import SinkOptions
from kcl_daemon.spark.sink import SinkFailed, _Writer
from tests.support.spark_fakes import FakePuts

HALF = 2**127
SHARDS = [
    Shard("low", starting_hash_key=0, ending_hash_key=HALF - 1),
    Shard("high", starting_hash_key=HALF, ending_hash_key=2**128 - 1),
]


def rows(count: int, size: int = 10, ehk: bool = False) -> list[pa.RecordBatch]:
    columns = {
        "data": pa.array([f"{n:08d}".encode().ljust(size, b".") for n in range(count)], pa.binary()),
        "partitionKey": pa.array([f"key-{n}" for n in range(count)], pa.string()),
    }
    if ehk:
        columns["explicitHashKey"] = pa.array([str(HALF + n) for n in range(count)], pa.string())
    return [pa.RecordBatch.from_pydict(columns)]


def writer(puts: FakePuts, **options: object) -> _Writer:
    sink._shard_maps.clear()
    return _Writer(
        SinkOptions(stream_name="out", **options),  # type: ignore[arg-type]
        puts,  # type: ignore[arg-type]
        sleep=lambda s: None,
        monotonic=lambda: 0.0,
    )


def test_rows_go_out_in_order_in_calls_of_at_most_500() -> None:
    puts = FakePuts(SHARDS)
    stats = writer(puts).write_batches(rows(1200))
    assert puts.calls == [500, 500, 200]
    assert [data[:8] for data, _, _ in puts.written] == [f"{n:08d}".encode() for n in range(1200)]
    assert (stats.records, stats.entries, stats.calls, stats.resent) == (1200, 1200, 3, 0)


def test_calls_stay_under_five_mib() -> None:
    puts = FakePuts(SHARDS)
    writer(puts).write_batches(rows(12, size=1000 * 1000))
    assert puts.calls == [5, 5, 2]


def test_only_the_entries_a_response_reports_failed_are_sent_again() -> None:
    puts = FakePuts(
        SHARDS, answers=[[None, "ProvisionedThroughputExceededException", None, "InternalFailure"]]
    )
    stats = writer(puts).write_batches(rows(4))
    assert puts.calls == [4, 2]
    assert sorted(data[:8] for data, _, _ in puts.written) == [f"{n:08d}".encode() for n in range(4)]
    assert stats.resent == 2 and stats.entries == 4


def test_a_permanent_failure_or_a_bad_row_fails_the_task() -> None:
    with pytest.raises(SinkFailed, match="KMSAccessDeniedException"):
        writer(FakePuts(SHARDS, answers=[[None, "KMSAccessDeniedException"]])).write_batches(rows(2))
    bad = [pa.RecordBatch.from_pydict({"data": [b"x", b"y"], "partitionKey": ["k", ""]})]
    with pytest.raises(SinkFailed, match="row 1 of this task: partitionKey must have 1 to 256"):
        writer(FakePuts(SHARDS)).write_batches(bad)


def deaggregated(written: list[tuple[bytes, str, str | None]], shard: Shard) -> list[tuple[bytes, str]]:
    splitter = Deaggregator(shard.shard_id, shard.starting_hash_key, shard.ending_hash_key)
    raws = [RawRecord(data, key, str(n + 1), 0) for n, (data, key, _) in enumerate(written)]
    return [(r.data, r.partition_key) for r, _ in splitter.deaggregate_with_hash_keys(raws)]


def test_aggregation_packs_the_records_of_each_shard_into_aggregates_its_readers_keep() -> None:
    puts = FakePuts(SHARDS)
    stats = writer(puts, aggregation_enabled=True, aggregation_max_bytes=4096).write_batches(rows(300))
    assert stats.records == 300 and stats.entries < 300
    for shard in SHARDS:  # each aggregate holds the records of one shard only
        mine = [w for w, landed in zip(puts.written, puts.shard_of, strict=True) if landed == shard.shard_id]
        users = deaggregated(mine, shard)
        assert users  # both shards got records
        assert all(
            shard.starting_hash_key <= effective_hash_key(key, None) <= shard.ending_hash_key
            for _, key in users
        )
    everything = deaggregated(puts.written, Shard("all", starting_hash_key=0, ending_hash_key=2**128 - 1))
    assert sorted(data[:8] for data, _ in everything) == [f"{n:08d}".encode() for n in range(300)]


def test_an_aggregate_that_lands_on_a_shard_not_holding_its_records_is_sent_again_record_by_record() -> None:
    puts = FakePuts(SHARDS, landed="low")  # every entry reports shard "low": the map was stale
    stats = writer(puts, aggregation_enabled=True).write_batches(rows(20, ehk=True))  # all hash to "high"
    plain_entries = [w for w in puts.written if w[2] is not None and int(w[2]) >= HALF and w[0][:8].isdigit()]
    assert len(plain_entries) == 20  # every record again, one by one
    assert stats.resent == 20
