"""The Spark source against the emulators, on the tests' Spark cluster (one per test session).

moto_server for reads, restarts and KPL aggregates; kinesalite for a split and a merge mid-stream
(moto keeps writing into a closed parent and never ends it).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_kinesis_agg.aggregator import RecordAggregator

from kcl_daemon.aws.clients import AwsClients, ClientSettings, build_clients
from kcl_daemon.errors import ConfigError
from tests.support.emulators import REGION
from tests.support.spark import rows, run_query, source_options
from tests.support.streams import put, wait_for_stream

# the first Spark test on a worker also waits for its SparkSession (JVMs) to start: 300 s, not 120
pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def moto_clients(moto_endpoint: str) -> AwsClients:
    return build_clients(
        ClientSettings(region=REGION, kinesis_endpoint=moto_endpoint, dynamodb_endpoint=moto_endpoint)
    )


def _stream_maker(clients: AwsClients) -> Iterator[Callable[[int], str]]:
    names: list[str] = []

    def make(shard_count: int) -> str:
        name = f"spark-{uuid.uuid4().hex[:10]}"
        clients.kinesis.create_stream(StreamName=name, ShardCount=shard_count)
        names.append(name)
        wait_for_stream(clients, name)
        return name

    yield make
    for name in names:
        clients.kinesis.delete_stream(StreamName=name)


@pytest.fixture
def moto_stream(moto_clients: AwsClients) -> Iterator[Callable[[int], str]]:
    yield from _stream_maker(moto_clients)


@pytest.mark.parametrize("read_mode", ["executor", "driver"])
def test_one_thousand_records_on_two_shards_come_out_exactly_once(
    spark_session: Any,
    moto_clients: AwsClients,
    moto_endpoint: str,
    moto_stream: Any,
    tmp_path: Path,
    read_mode: str,
) -> None:
    stream = moto_stream(2)
    put(moto_clients, stream, range(1000))
    query = run_query(
        spark_session,
        source_options(stream, moto_endpoint, readMode=read_mode),
        tmp_path / "out",
        tmp_path / "chk",
    )
    found = rows(tmp_path / "out")
    assert len(found) == 1000
    assert {(r["shardId"], r["sequenceNumber"], r["subSequenceNumber"]) for r in found}.__len__() == 1000
    assert {r["data"] for r in found} == {f"record-{n}".encode() for n in range(1000)}
    assert {r["shardId"] for r in found} == {"shardId-000000000000", "shardId-000000000001"}
    assert all(r["stream"] == stream and r["partitionKey"].startswith("key-") for r in found)
    progress = query.lastProgress
    assert progress is not None
    report = progress["sources"][0]["latestOffset"]
    assert ("driverRecords" if read_mode == "executor" else "maxMillisBehindLatest") in report


class Crash(RuntimeError):
    pass


def test_a_crash_in_foreach_batch_and_a_restart_lose_nothing_and_duplicate_nothing(
    spark_session: Any, moto_clients: AwsClients, moto_endpoint: str, moto_stream: Any, tmp_path: Path
) -> None:
    stream = moto_stream(2)
    put(moto_clients, stream, range(1000))
    options = source_options(stream, moto_endpoint, maxRecordsPerBatch=200)
    out, chk = tmp_path / "out", tmp_path / "chk"

    def crash_after_batch_2(batch_id: int) -> None:
        if batch_id == 2:
            raise Crash("crash after writing batch 2")

    with pytest.raises(Exception, match="crash after writing batch 2"):
        run_query(spark_session, options, out, chk, on_batch=crash_after_batch_2)
    first_run = rows(out)
    batch_2_before = sorted(
        (r["shardId"], r["sequenceNumber"], r["data"]) for r in first_run if r["batch"] == 2
    )
    assert len(batch_2_before) == 200
    assert {r["batch"] for r in first_run} == {0, 1, 2}

    run_query(spark_session, options, out, chk)  # restart: replays batch 2, then the rest
    found = rows(out)
    batch_2_after = sorted((r["shardId"], r["sequenceNumber"], r["data"]) for r in found if r["batch"] == 2)
    assert batch_2_after == batch_2_before  # replayed byte for byte
    assert all(n <= 200 for n in _batch_sizes(found).values())  # ReadMaxRows admission control
    assert len(found) == 1000
    assert {r["data"] for r in found} == {f"record-{n}".encode() for n in range(1000)}

    put(moto_clients, stream, range(1000, 1300))  # appended records: a third run resumes
    run_query(spark_session, options, out, chk)
    found = rows(out)
    assert len(found) == 1300 and len({(r["shardId"], r["sequenceNumber"]) for r in found}) == 1300


def _batch_sizes(found: list[dict[str, Any]]) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for row in found:
        sizes[row["batch"]] = sizes.get(row["batch"], 0) + 1
    return sizes


def test_shards_per_task_groups_shards_into_fewer_spark_tasks(
    spark_session: Any, moto_clients: AwsClients, moto_endpoint: str, moto_stream: Any, tmp_path: Path
) -> None:
    stream = moto_stream(4)
    put(moto_clients, stream, range(400))
    tasks: list[int] = []

    def count_tasks(batch: Any, batch_id: int) -> None:
        tasks.append(batch.rdd.getNumPartitions())
        batch.write.mode("overwrite").parquet(str(tmp_path / "out" / f"batch={batch_id}"))

    for per_task, expected in (("1", 4), ("3", 2)):
        frame = (
            spark_session.readStream.format("kinesis")
            .options(**source_options(stream, moto_endpoint, shardsPerTask=per_task))
            .load()
        )
        query = (
            frame.writeStream.foreachBatch(count_tasks)
            .option("checkpointLocation", str(tmp_path / f"chk-{per_task}"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(90)
        assert tasks[-1] == expected
        assert len(rows(tmp_path / "out")) == 400


def test_kpl_aggregates_come_out_deaggregated_with_sub_sequence_numbers(
    spark_session: Any, moto_clients: AwsClients, moto_endpoint: str, moto_stream: Any, tmp_path: Path
) -> None:
    stream = moto_stream(1)
    aggregator = RecordAggregator()
    for n in range(5):
        assert aggregator.add_user_record(f"key-{n}", f"user-{n}".encode(), str(2**127 + n)) is None
    partition_key, _, data = aggregator.clear_and_get().get_contents()
    moto_clients.kinesis.put_record(StreamName=stream, Data=data, PartitionKey=partition_key)
    put(moto_clients, stream, range(3), prefix="plain")
    run_query(spark_session, source_options(stream, moto_endpoint), tmp_path / "out", tmp_path / "chk")
    found = sorted(rows(tmp_path / "out"), key=lambda r: (int(r["sequenceNumber"]), r["subSequenceNumber"]))
    assert [r["data"] for r in found[:5]] == [f"user-{n}".encode() for n in range(5)]
    assert [r["subSequenceNumber"] for r in found[:5]] == [0, 1, 2, 3, 4]
    assert [r["explicitHashKey"] for r in found[:5]] == [str(2**127 + n) for n in range(5)]
    assert len({r["sequenceNumber"] for r in found[:5]}) == 1
    assert [r["data"] for r in found[5:]] == [f"plain-{n}".encode() for n in range(3)]
    assert all(r["explicitHashKey"] is None and r["subSequenceNumber"] == 0 for r in found[5:])


def test_bad_options_fail_at_load_with_every_problem_named(spark_session: Any) -> None:
    options = {"startingPosition": "YESTERDAY", "maxRecordsPerBatch": "lots", "minFetchIntervalMs": "10"}
    with pytest.raises(Exception, match="streamName is required") as caught:
        spark_session.readStream.format("kinesis").options(**options).load()
    message = str(caught.value)
    for problem in (
        "streamName is required",
        "YESTERDAY",
        "maxRecordsPerBatch='lots'",
        "minFetchIntervalMs=10",
    ):
        assert problem in message
    assert ConfigError.__name__ in message


@pytest.fixture(scope="module")
def kinesalite_clients(kinesalite_endpoint: str, moto_endpoint: str) -> AwsClients:
    return build_clients(
        ClientSettings(region=REGION, kinesis_endpoint=kinesalite_endpoint, dynamodb_endpoint=moto_endpoint)
    )


@pytest.fixture
def kinesalite_stream(kinesalite_clients: AwsClients) -> Iterator[Callable[[int], str]]:
    yield from _stream_maker(kinesalite_clients)


def test_a_split_and_a_merge_mid_stream_keep_parents_before_children(
    spark_session: Any,
    kinesalite_clients: AwsClients,
    kinesalite_endpoint: str,
    moto_endpoint: str,
    kinesalite_stream: Any,
    tmp_path: Path,
) -> None:
    stream = kinesalite_stream(3)
    kinesis = kinesalite_clients.kinesis
    options = source_options(stream, kinesalite_endpoint, moto_endpoint, maxRecordsPerBatch=150)
    out, chk = tmp_path / "out", tmp_path / "chk"
    put(kinesalite_clients, stream, range(300))
    run_query(spark_session, options, out, chk)  # part of the stream read before the reshard

    shards = sorted(
        kinesis.list_shards(StreamName=stream)["Shards"],
        key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]),
    )
    hash_range = shards[0]["HashKeyRange"]
    middle = (int(hash_range["StartingHashKey"]) + int(hash_range["EndingHashKey"])) // 2
    kinesis.split_shard(StreamName=stream, ShardToSplit=shards[0]["ShardId"], NewStartingHashKey=str(middle))
    wait_for_stream(kinesalite_clients, stream)
    kinesis.merge_shards(
        StreamName=stream, ShardToMerge=shards[1]["ShardId"], AdjacentShardToMerge=shards[2]["ShardId"]
    )
    wait_for_stream(kinesalite_clients, stream)
    put(kinesalite_clients, stream, range(300, 900))
    run_query(spark_session, options, out, chk)

    found = rows(out)
    assert len(found) == 900
    assert {r["data"] for r in found} == {f"record-{n}".encode() for n in range(900)}
    listed = kinesis.list_shards(StreamName=stream)["Shards"]
    parents_of = {
        s["ShardId"]: [p for p in (s.get("ParentShardId"), s.get("AdjacentParentShardId")) if p]
        for s in listed
    }
    batches: dict[str, list[int]] = {}
    for row in found:
        batches.setdefault(row["shardId"], []).append(row["batch"])
    children = [s for s, parents in parents_of.items() if parents and s in batches]
    assert len(children) == 3, (children, parents_of)
    for child in children:
        for parent in parents_of[child]:
            assert max(batches[parent]) < min(batches[child]), (parent, child)
