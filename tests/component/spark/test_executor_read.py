"""The executors' side of executor reads over an in-memory shard and ends store: read, publish, yield."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace

import pyarrow as pa
import pytest

from kcl_daemon.aws.kinesis import GetRecordsResult
from kcl_daemon.core.shards.iterator import IteratorPosition
from kcl_daemon.core.spark.batches import PublishedEnd, Stop
from kcl_daemon.core.spark.offsets import AT_TRIM_HORIZON, after
from kcl_daemon.spark import executor_read
from kcl_daemon.spark.executor_read import read_partition
from kcl_daemon.spark.options import SourceOptions
from kcl_daemon.spark.partitions import ExecutorPartition, ShardTask
from kcl_daemon.spark.rows import ROW_OVERHEAD_BYTES
from kcl_daemon.spark.shard_reader import DataLoss
from tests.support.spark_fakes import FakeEnds, FakeKinesis, plain

OPTIONS = SourceOptions(stream_name="stream", min_fetch_interval_s=0.0)


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeKinesis, FakeEnds]:
    kinesis, ends = FakeKinesis(plain(1, 2, 3, 4, 5)), FakeEnds()
    monkeypatch.setattr(executor_read, "kinesis_for", lambda options: kinesis)
    monkeypatch.setattr(executor_read, "batch_ends_for", lambda options: ends)
    return kinesis, ends


def task(max_rows: int = 100, **extra: object) -> ShardTask:
    return ShardTask("shardId-0", AT_TRIM_HORIZON, max_rows, False, 0, 2**128 - 1, **extra)  # type: ignore[arg-type]


def partition(*tasks: ShardTask, replay: bool = False, until: int | None = None) -> ExecutorPartition:
    return ExecutorPartition(OPTIONS, "run1", 4, until, tasks, None, replay)


def sequences(batches: list[pa.RecordBatch]) -> list[str]:
    return [s for batch in batches for s in batch.column("sequenceNumber").to_pylist()]


def test_a_task_reads_to_the_tip_publishes_then_yields(world: tuple[FakeKinesis, FakeEnds]) -> None:
    kinesis, ends = world
    rows = list(read_partition(partition(task())))
    assert sequences(rows) == ["1", "2", "3", "4", "5"]
    assert ends.items[("run1", 4, "shardId-0")] == PublishedEnd(after("5"), Stop.TIP, 5)
    assert ends.gets == 0  # a first attempt of a batch this run planned does not look first
    assert kinesis.fetched == 5


def test_a_replay_reads_exactly_to_the_publication_even_after_more_records_arrived(
    world: tuple[FakeKinesis, FakeEnds],
) -> None:
    kinesis, ends = world
    first = sequences(list(read_partition(partition(task()))))
    kinesis.records += plain(6, 7, 8)
    assert sequences(list(read_partition(partition(task(), replay=True)))) == first
    assert ends.publishes == 1


def test_a_losing_attempt_keeps_the_rows_up_to_the_winners_end(world: tuple[FakeKinesis, FakeEnds]) -> None:
    _, ends = world
    ends.items[("run1", 4, "shardId-0")] = PublishedEnd(after("3"), Stop.TIP, 3)  # the other attempt
    assert sequences(list(read_partition(partition(task())))) == ["1", "2", "3"]
    ends.items[("run1", 4, "shardId-0")] = PublishedEnd(AT_TRIM_HORIZON, Stop.TIP, 0)
    assert sequences(list(read_partition(partition(task())))) == []


def test_budget_and_cut_off_are_the_reasons_published(world: tuple[FakeKinesis, FakeEnds]) -> None:
    kinesis, ends = world
    assert sequences(list(read_partition(partition(task(max_rows=2))))) == ["1", "2"]
    assert ends.items[("run1", 4, "shardId-0")].reason is Stop.BUDGET
    kinesis.records = plain(1, 2, arrival=100) + plain(3, arrival=900)
    cut = ExecutorPartition(OPTIONS, "run1", 5, 500, (task(),), None, False)
    assert sequences(list(read_partition(cut))) == ["1", "2"]
    assert ends.items[("run1", 5, "shardId-0")] == PublishedEnd(after("2"), Stop.CUTOFF, 2)


def test_a_full_bytes_budget_is_published_as_a_budget_stop(world: tuple[FakeKinesis, FakeEnds]) -> None:
    _, ends = world
    small = replace(OPTIONS, max_bytes_per_shard_per_batch=2 * ROW_OVERHEAD_BYTES)
    tasks = ExecutorPartition(small, "run1", 4, None, (task(),), None, False)
    assert sequences(list(read_partition(tasks))) == ["1", "2"]
    assert ends.items[("run1", 4, "shardId-0")] == PublishedEnd(after("2"), Stop.BUDGET, 2)


def test_the_planners_probe_record_is_the_first_page(world: tuple[FakeKinesis, FakeEnds]) -> None:
    kinesis, _ = world
    iterator = kinesis.get_shard_iterator("stream", "shardId-0", _after("2"))
    head = kinesis.get_records(iterator, 1)
    start = ShardTask("shardId-0", after("2"), 100, False, 0, 2**128 - 1, head)
    assert sequences(list(read_partition(partition(start)))) == ["3", "4", "5"]
    assert kinesis.fetched == 3  # the head's record once, the rest once


def _after(seq: str) -> object:
    from kcl_daemon.core.shards.iterator import IteratorPosition, IteratorType

    return IteratorPosition(IteratorType.AFTER_SEQUENCE_NUMBER, seq)


class _Shards:
    """Several in-memory shards behind one client; ``gate`` runs before every GetRecords."""

    def __init__(self, shards: dict[str, FakeKinesis], gate: Callable[[str], None]) -> None:
        self.shards, self.gate = shards, gate

    def get_shard_iterator(self, stream: str, shard_id: str, position: IteratorPosition) -> str:
        return f"{shard_id}|{self.shards[shard_id].get_shard_iterator(stream, shard_id, position)}"

    def get_records(self, iterator: str, limit: int) -> GetRecordsResult:
        shard_id, inner = iterator.split("|")
        self.gate(shard_id)
        page = self.shards[shard_id].get_records(inner, limit)
        following = None if page.next_iterator is None else f"{shard_id}|{page.next_iterator}"
        return replace(page, next_iterator=following)


def _several(monkeypatch: pytest.MonkeyPatch, count: int, gate: Callable[[str], None]) -> FakeEnds:
    shards = {f"shardId-{n}": FakeKinesis(plain(10 * n + 1, 10 * n + 2)) for n in range(count)}
    ends = FakeEnds()
    monkeypatch.setattr(executor_read, "kinesis_for", lambda options: _Shards(shards, gate))
    monkeypatch.setattr(executor_read, "batch_ends_for", lambda options: ends)
    return ends


def _tasks(count: int) -> tuple[ShardTask, ...]:
    return tuple(replace(task(), shard_id=f"shardId-{n}") for n in range(count))


def test_a_tasks_shards_are_read_at_once_and_yielded_in_the_tasks_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    both = threading.Barrier(2, timeout=5)  # breaks unless the two shards' first calls run together
    first_calls: set[str] = set()

    def gate(shard_id: str) -> None:
        if shard_id not in first_calls:
            first_calls.add(shard_id)
            both.wait()

    ends = _several(monkeypatch, 2, gate)
    rows = list(read_partition(partition(*_tasks(2))))
    assert [batch.column("shardId")[0].as_py() for batch in rows] == ["shardId-0", "shardId-1"]
    assert sequences(rows) == ["1", "2", "11", "12"]
    assert {key[2] for key in ends.items} == {"shardId-0", "shardId-1"}


def test_no_more_shards_are_read_at_once_than_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor_read, "SHARD_READS_AT_ONCE", 2)
    lock, now, most = threading.Lock(), [0], [0]

    def gate(shard_id: str) -> None:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.01)  # real time on purpose: overlapping calls are what is counted
        with lock:
            now[0] -= 1

    _several(monkeypatch, 5, gate)
    assert len(sequences(list(read_partition(partition(*_tasks(5)))))) == 10
    assert most[0] <= 2


def test_a_failed_shard_read_fails_the_task_and_starts_no_other(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor_read, "SHARD_READS_AT_ONCE", 1)
    asked: list[str] = []

    def gate(shard_id: str) -> None:
        asked.append(shard_id)
        if shard_id == "shardId-1":
            raise DataLoss("trimmed")

    _several(monkeypatch, 3, gate)
    read = read_partition(partition(*_tasks(3)))
    assert sequences([next(read)]) == ["1", "2"]
    with pytest.raises(DataLoss):
        next(read)
    assert "shardId-2" not in asked
