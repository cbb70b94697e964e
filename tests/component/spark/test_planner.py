"""The driver's planning of executor reads over an in-memory shard and ends store: offsets, probes,
hand-over of the probe record, replays, a v1 checkpoint continuing, pruning."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from kcl_daemon.aws.batch_ends import MetadataTableEnds
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.spark.offsets import AT_TRIM_HORIZON, SourceOffset, after
from kcl_daemon.spark import driver_read, executor_read, planner, stream_reader
from kcl_daemon.spark.driver_read import KinesisPartition
from kcl_daemon.spark.options import SourceOptions, StartingPosition, StartKind
from kcl_daemon.spark.partitions import ExecutorPartition
from kcl_daemon.spark.planner import ExecutorStreamReader
from tests.support.spark_fakes import FakeEnds, FakeKinesis, plain

OPTIONS = SourceOptions(
    stream_name="stream",
    starting_position=StartingPosition(StartKind.TRIM_HORIZON),
    min_fetch_interval_s=0.0,
    shard_discovery_interval_s=0.0,
)


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeKinesis, FakeEnds]:
    kinesis, ends = FakeKinesis(plain(1, 2, 3, 4, 5), page=100), FakeEnds()
    for module in (planner, executor_read, driver_read, stream_reader):
        monkeypatch.setattr(module, "kinesis_for", lambda options: kinesis)
        monkeypatch.setattr(module, "batch_ends_for", lambda options: ends, raising=False)
    return kinesis, ends


def run_batch(reader: ExecutorStreamReader, start: dict[str, Any], end: dict[str, Any]) -> list[str]:
    out = []
    for part in reader.partitions(start, end):
        for batch in reader.read(part):
            out += batch.column("sequenceNumber").to_pylist()
    return out


def test_batches_read_to_the_tip_then_the_driver_only_asks(world: tuple[FakeKinesis, FakeEnds]) -> None:
    kinesis, _ = world
    reader = ExecutorStreamReader(OPTIONS)
    start = reader.initialOffset()
    assert start["batch"] == -1 and start["shards"]["shardId-0"]["from"]["seq"] == "TRIM_HORIZON"
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end["batch"] == 0 and end["shards"]["shardId-0"]["read"] is True
    assert run_batch(reader, start, end) == ["1", "2", "3", "4", "5"]
    calls_before = kinesis.calls
    again = reader.latestOffset(end, ReadAllAvailable())
    assert again is end  # nothing new: Spark plans no batch
    assert kinesis.calls == calls_before + 1 and reader.driver_calls["records"] == 0  # one empty question
    reader.commit(end)

    kinesis.records += plain(6, 7, 8)
    next_end = reader.latestOffset(end, ReadAllAvailable())
    assert next_end["batch"] == 1 and next_end["shards"]["shardId-0"]["from"] == {"seq": "5", "sub": 0}
    fetched = kinesis.fetched
    assert run_batch(reader, end, next_end) == ["6", "7", "8"]
    assert kinesis.fetched - fetched == 2  # the probe's record rode along with the task
    assert reader.driver_calls["records"] == 1


def test_a_row_limit_splits_batches_and_a_replay_is_marked(world: tuple[FakeKinesis, FakeEnds]) -> None:
    reader = ExecutorStreamReader(OPTIONS)
    start = reader.initialOffset()
    first = reader.latestOffset(start, ReadMaxRows(2))
    assert run_batch(reader, start, first) == ["1", "2"]
    second = reader.latestOffset(first, ReadMaxRows(2))  # stopped on its budget: read without asking
    assert second["shards"]["shardId-0"]["last"] == "budget"
    restarted = ExecutorStreamReader(OPTIONS)  # a new runner replays the logged batch
    parts = restarted.partitions(first, second)
    assert all(isinstance(p, ExecutorPartition) and p.replay for p in parts)
    assert run_batch(restarted, first, second) == ["3", "4"]
    assert run_batch(reader, first, second) == ["3", "4"]  # the first attempt agrees


def test_a_driver_read_checkpoint_replays_its_last_batch_then_continues(
    world: tuple[FakeKinesis, FakeEnds],
) -> None:
    reader = ExecutorStreamReader(OPTIONS)
    v1_start = SourceOffset("stream", {"shardId-0": AT_TRIM_HORIZON}).to_json()
    v1_end = SourceOffset("stream", {"shardId-0": after("2")}).to_json()
    parts = reader.partitions(v1_start, v1_end)
    assert all(isinstance(p, KinesisPartition) for p in parts)
    assert run_batch(reader, v1_start, v1_end) == ["1", "2"]
    v2 = reader.latestOffset(v1_end, ReadAllAvailable())
    assert v2["v"] == 2 and v2["shards"]["shardId-0"]["from"] == {"seq": "2", "sub": 0}
    assert run_batch(reader, v1_end, v2) == ["3", "4", "5"]


def test_commits_prune_publications_of_old_batches(world: tuple[FakeKinesis, FakeEnds]) -> None:
    kinesis, ends = world
    reader = ExecutorStreamReader(OPTIONS)
    offsets = [reader.initialOffset()]
    for n in range(4):
        kinesis.records += plain(10 + n)
        offsets.append(reader.latestOffset(offsets[-1], ReadAllAvailable()))
        run_batch(reader, offsets[-2], offsets[-1])
        reader.commit(offsets[-1])
    assert sorted(batch for _, batch, _ in ends.items) == [2, 3]


def test_a_new_query_lists_its_shards_while_the_metadata_table_is_checked(
    world: tuple[FakeKinesis, FakeEnds], monkeypatch: pytest.MonkeyPatch
) -> None:
    kinesis, _ = world
    listed = threading.Event()
    listings: list[str] = []
    list_shards = kinesis.list_shards

    def listing(stream: str) -> list[Shard]:
        listings.append(threading.current_thread().name)
        listed.set()
        return list_shards(stream)

    class CheckedEnds(FakeEnds, MetadataTableEnds):
        def create_if_missing(self, wait_s: float = 120.0, *, poll_s: float = 0.5) -> bool:
            assert listed.wait(10), "the shard listing waited for the metadata table's check"
            return False

    monkeypatch.setattr(kinesis, "list_shards", listing)
    monkeypatch.setattr(planner, "batch_ends_for", lambda options: CheckedEnds())
    reader = ExecutorStreamReader(OPTIONS)
    start = reader.initialOffset()
    assert reader.initialOffset() is start  # Spark asks twice
    assert len(listings) == 1 and listings[0].startswith("spark-start")
    assert start["shards"]["shardId-0"]["from"]["seq"] == "TRIM_HORIZON"
