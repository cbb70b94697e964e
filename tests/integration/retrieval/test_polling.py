"""Polling retrieval (GetShardIterator/GetRecords, de-aggregation, shard end) against moto and kinesalite.

Emulator behaviour these tests rely on (see clients-and-emulators.md):

* kinesalite ends a closed shard with a null ``NextShardIterator`` but no ``ChildShards``: the reader
  finds the children with ListShards.
* moto never ends a closed shard (iterators forever, no ``ChildShards``): the reader ends it once
  ListShards says it is closed and the shard's ending sequence number has been fetched.
* Neither expires iterators on demand, so expired-iterator recovery is covered by the unit tests.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor

import pytest
from aws_kinesis_agg.aggregator import RecordAggregator

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.core.sequence import TRIM_HORIZON, ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.shards.iterator import IteratorPosition, IteratorType
from kcl_daemon.retrieval.polling import PollingRecordSource
from kcl_daemon.retrieval.settings import RetrievalSettings
from kcl_protocol import Record

pytestmark = pytest.mark.integration

SETTINGS = RetrievalSettings(max_records=10, idle_between_reads_s=0.0)  # 0.2 s between calls


@pytest.fixture(scope="module")
def executor() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="kinesis-read") as pool:
        yield pool


def wait_active(clients: AwsClients, stream: str) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        summary = clients.kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]
        if summary["StreamStatus"] == "ACTIVE":
            return
        time.sleep(0.01)
    pytest.fail(f"stream {stream} did not become ACTIVE")


@pytest.fixture
def stream(aws_clients: AwsClients) -> Iterator[str]:
    name = f"retrieval-{uuid.uuid4().hex[:10]}"
    aws_clients.kinesis.create_stream(StreamName=name, ShardCount=1)
    wait_active(aws_clients, name)
    yield name
    aws_clients.kinesis.delete_stream(StreamName=name)


def put(clients: AwsClients, stream: str, data: bytes, key: str, explicit_hash_key: str | None = None) -> str:
    extra = {} if explicit_hash_key is None else {"ExplicitHashKey": explicit_hash_key}
    response = clients.kinesis.put_record(StreamName=stream, Data=data, PartitionKey=key, **extra)
    return response["SequenceNumber"]


def only_shard(kinesis: Kinesis, stream: str) -> Shard:
    (shard,) = kinesis.list_shards(stream)
    return shard


async def read_until_caught_up(source: PollingRecordSource, max_batches: int = 20) -> list[Record]:
    """Records until an empty batch (open shard) or the shard end."""
    records: list[Record] = []
    for _ in range(max_batches):
        batch = await source.next_batch()
        if batch is None or not batch.records:
            return records
        records.extend(batch.records)
    raise AssertionError(f"still reading after {max_batches} batches")


async def test_reads_every_record_in_order(
    aws_clients: AwsClients, kinesis: Kinesis, stream: str, executor: ThreadPoolExecutor
) -> None:
    before_ms = int(time.time() * 1000) - 60_000
    sequence_numbers = [put(aws_clients, stream, f"r{i}".encode(), f"key-{i % 7}") for i in range(23)]
    source = PollingRecordSource(kinesis, stream, only_shard(kinesis, stream), executor, SETTINGS)
    await source.start(TRIM_HORIZON)
    records = await read_until_caught_up(source)
    assert [r.data for r in records] == [f"r{i}".encode() for i in range(23)]
    assert [r.sequence_number for r in records] == sequence_numbers
    assert [int(s) for s in sequence_numbers] == sorted(int(s) for s in sequence_numbers)
    assert {r.sub_sequence_number for r in records} == {0}
    assert records[3].partition_key == "key-3"
    assert all(before_ms < r.approximate_arrival_timestamp < before_ms + 120_000 for r in records)
    assert source.stats.get_records_calls >= 3  # 10 per call
    assert source.child_shards is None


class _NoThreads(Executor):
    """For a reader that must not hand its reads to a thread."""

    def submit(self, *_: object, **__: object) -> Future[object]:
        raise AssertionError("a read was handed to a thread")


async def test_reads_on_the_event_loop_without_a_thread(
    aws_clients: AwsClients, kinesis: Kinesis, stream: str
) -> None:
    """With the lean request path (the default) GetShardIterator and GetRecords are awaited on the
    event loop itself: the reader never uses its executor."""
    sequence_numbers = [put(aws_clients, stream, f"e{i}".encode(), f"key-{i}") for i in range(12)]
    shard = only_shard(kinesis, stream)
    assert kinesis.reads_async()
    source = PollingRecordSource(kinesis, stream, shard, _NoThreads(), SETTINGS)
    await source.start(TRIM_HORIZON)
    records = await read_until_caught_up(source)
    assert [r.sequence_number for r in records] == sequence_numbers
    assert [r.data for r in records] == [f"e{i}".encode() for i in range(12)]
    await source.start(ExtendedSequenceNumber(sequence_numbers[4]))  # a new iterator, after a checkpoint
    assert [r.data for r in await read_until_caught_up(source)] == [f"e{i}".encode() for i in range(5, 12)]
    assert source.stats.shard_iterators == 2


async def test_resumes_after_a_checkpoint(
    aws_clients: AwsClients, kinesis: Kinesis, stream: str, executor: ThreadPoolExecutor
) -> None:
    sequence_numbers = [put(aws_clients, stream, f"r{i}".encode(), "k") for i in range(6)]
    source = PollingRecordSource(kinesis, stream, only_shard(kinesis, stream), executor, SETTINGS)
    await source.start(ExtendedSequenceNumber(sequence_numbers[2]))
    records = await read_until_caught_up(source)
    assert [r.data for r in records] == [b"r3", b"r4", b"r5"]


async def test_de_aggregates_and_resumes_inside_an_aggregate(
    aws_clients: AwsClients, kinesis: Kinesis, stream: str, executor: ThreadPoolExecutor
) -> None:
    aggregator = RecordAggregator()
    for i in range(4):
        aggregator.add_user_record(f"user-{i}", f"u{i}".encode(), "12345" if i == 2 else None)
    aggregate = aggregator.clear_and_get()
    assert aggregate is not None
    partition_key, explicit_hash_key, data = aggregate.get_contents()
    put(aws_clients, stream, b"before", "k")
    aggregate_seq = put(aws_clients, stream, data, partition_key, explicit_hash_key)
    put(aws_clients, stream, b"after", "k")
    shard = only_shard(kinesis, stream)

    source = PollingRecordSource(kinesis, stream, shard, executor, SETTINGS)
    await source.start(TRIM_HORIZON)
    everything = await read_until_caught_up(source)
    assert [(r.data, r.sub_sequence_number) for r in everything] == [
        (b"before", 0),
        (b"u0", 0),
        (b"u1", 1),
        (b"u2", 2),
        (b"u3", 3),
        (b"after", 0),
    ]
    assert [r.partition_key for r in everything[1:5]] == ["user-0", "user-1", "user-2", "user-3"]
    assert {r.sequence_number for r in everything[1:5]} == {aggregate_seq}

    resumed = PollingRecordSource(kinesis, stream, shard, executor, SETTINGS)
    await resumed.start(ExtendedSequenceNumber(aggregate_seq, 1))
    assert [r.data for r in await read_until_caught_up(resumed)] == [b"u2", b"u3", b"after"]
    assert resumed.deaggregator.stats.aggregates == 1
    assert resumed.deaggregator.stats.undecodable == 0


async def test_a_split_parent_reaches_shard_end_with_its_children(
    aws_clients: AwsClients, kinesis: Kinesis, stream: str, executor: ThreadPoolExecutor
) -> None:
    for i in range(3):
        put(aws_clients, stream, f"r{i}".encode(), f"k{i}")
    parent = only_shard(kinesis, stream)
    aws_clients.kinesis.split_shard(
        StreamName=stream, ShardToSplit=parent.shard_id, NewStartingHashKey=str(2**127)
    )
    wait_active(aws_clients, stream)
    shards = {shard.shard_id: shard for shard in kinesis.list_shards(stream)}
    parent = shards[parent.shard_id]
    assert not parent.is_open
    children = sorted(sid for sid, shard in shards.items() if parent.shard_id in shard.parent_shard_ids)
    assert len(children) == 2

    source = PollingRecordSource(kinesis, stream, parent, executor, SETTINGS)
    await source.start(TRIM_HORIZON)
    records: list[Record] = []
    for _ in range(10):
        batch = await source.next_batch()
        if batch is None:
            break
        records.extend(batch.records)
    assert [r.data for r in records] == [b"r0", b"r1", b"r2"]
    assert source.child_shards is not None, "the closed parent never ended"
    assert sorted(child.shard_id for child in source.child_shards) == children
    assert all(child.parent_shard_ids == (parent.shard_id,) for child in source.child_shards)
    assert source.stats.list_shards_calls == 1  # neither emulator returns ChildShards (AWS would: 0)
    assert await source.next_batch() is None


async def test_a_missing_shard_is_shard_end_without_children(
    kinesis: Kinesis, stream: str, executor: ThreadPoolExecutor
) -> None:
    source = PollingRecordSource(kinesis, stream, Shard("shardId-000000000099"), executor, SETTINGS)
    await source.start(TRIM_HORIZON)
    assert await source.next_batch() is None
    assert source.child_shards == ()


def test_raw_get_records_path_matches_botocore_parse(aws_clients: AwsClients, stream: str) -> None:
    """The orjson page (payloads kept as base64) reads the same records as botocore's parse, on the lean
    request path (the default, every test of this module reads on it) and on botocore's."""
    agg = RecordAggregator()
    agg.add_user_record("a", b"sub-1")
    agg.add_user_record("b", b"sub-2")
    aggregated = agg.clear_and_get()
    assert aggregated is not None
    put(aws_clients, stream, bytes(aggregated.get_contents()[2]), "agg")
    for index in range(5):
        put(aws_clients, stream, f"plain-{index}".encode(), f"k{index}")
    raw, parsed = Kinesis(aws_clients.kinesis), Kinesis(aws_clients.kinesis, raw_get_records=False)
    on_botocore = Kinesis(aws_clients.kinesis, lean=False)
    assert raw.lean and not parsed.lean and not on_botocore.lean
    shard = raw.list_shards(stream)[0]
    iterator = raw.get_shard_iterator(stream, shard.shard_id, IteratorPosition(IteratorType.TRIM_HORIZON))
    from_parsed = parsed.get_records(iterator, 100)
    for path in (raw, on_botocore):
        from_raw = path.get_records(iterator, 100)
        assert [(r.data, r.partition_key, r.sequence_number) for r in from_raw.records] == [
            (r.data, r.partition_key, r.sequence_number) for r in from_parsed.records
        ]
        assert [r.approximate_arrival_timestamp for r in from_raw.records] == [
            r.approximate_arrival_timestamp for r in from_parsed.records
        ]
        assert len(from_raw.records) == 6
    # the plain client is untouched for other callers: botocore still decodes for them
    direct = aws_clients.kinesis.get_records(ShardIterator=iterator, Limit=100)
    assert isinstance(direct["Records"][0]["Data"], bytes)
