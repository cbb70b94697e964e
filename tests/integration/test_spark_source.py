"""The Spark source against the emulators, with a real local[2] SparkSession (one per test session).

moto_server for reads, restarts and KPL aggregates; kinesalite for a split and a merge mid-stream
(moto keeps writing into a closed parent and never ends it).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_kinesis_agg.aggregator import RecordAggregator

from kcl_daemon.aws.clients import AwsClients, ClientSettings, build_clients
from tests.integration.conftest import wait_for_stream
from tests.integration.spark_helpers import REGION, put, rows, run_query, source_options

pytestmark = [pytest.mark.integration, pytest.mark.spark]


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


def test_one_thousand_records_on_two_shards_come_out_exactly_once(
    spark_session: Any, moto_clients: AwsClients, moto_endpoint: str, moto_stream: Any, tmp_path: Path
) -> None:
    stream = moto_stream(2)
    put(moto_clients, stream, range(1000))
    query = run_query(
        spark_session, source_options(stream, moto_endpoint), tmp_path / "out", tmp_path / "chk"
    )
    found = rows(tmp_path / "out")
    assert len(found) == 1000
    assert {(r["shardId"], r["sequenceNumber"], r["subSequenceNumber"]) for r in found}.__len__() == 1000
    assert {r["data"] for r in found} == {f"record-{n}".encode() for n in range(1000)}
    assert {r["shardId"] for r in found} == {"shardId-000000000000", "shardId-000000000001"}
    assert all(r["stream"] == stream and r["partitionKey"].startswith("key-") for r in found)
    progress = query.lastProgress
    assert progress is not None
    assert "maxMillisBehindLatest" in progress["sources"][0]["latestOffset"]
