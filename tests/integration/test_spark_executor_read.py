"""The executor-read spike (``format("kinesis-exec")``, docs/spark-design.md) on local[2]: kinesalite for
the stream, dynalite for the table the executors publish their ends to.

The replay test is the one that matters for the design: a batch whose executors read to the shard's tip
is replayed after a crash *after more records arrived*; a reader that decided its end again would now
read more, the publication makes it read exactly the same rows. The local-cluster measurements
(who fetches what, killed executors) are in ``bench/spark_executor_read.py``.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from kcl_daemon.aws.clients import AwsClients, ClientSettings, build_clients
from kcl_daemon.spark.end_store import LeaseTableEndStore, PublishedEnd
from tests.integration.conftest import wait_for_stream
from tests.integration.spark_helpers import REGION, put, rows

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.fixture(scope="module")
def clients(kinesalite_endpoint: str, dynalite_endpoint: str) -> AwsClients:
    return build_clients(
        ClientSettings(
            region=REGION, kinesis_endpoint=kinesalite_endpoint, dynamodb_endpoint=dynalite_endpoint
        )
    )


@pytest.fixture
def stream_and_table(clients: AwsClients) -> tuple[str, str]:
    name = f"exec-{uuid.uuid4().hex[:8]}"
    clients.kinesis.create_stream(StreamName=name, ShardCount=2)
    wait_for_stream(clients, name)
    clients.dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "leaseKey", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "leaseKey", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name, name


def options(stream: str, table: str, kinesalite: str, dynalite: str, **extra: str) -> dict[str, str]:
    return {
        "streamName": stream,
        "region": REGION,
        "endpointUrl": kinesalite,
        "startingPosition": "TRIM_HORIZON",
        "leaseTableName": table,
        "leaseTableEndpointUrl": dynalite,
        "endStoreUpsert": "true",
        "shardDiscoveryIntervalMs": "0",
        **extra,
    }


def run(spark: Any, opts: dict[str, str], out: Path, chk: Path, crash_after: int | None = None) -> None:
    frame = spark.readStream.format("kinesis-exec").options(**opts).load()

    def write(batch: Any, batch_id: int) -> None:
        batch.write.mode("overwrite").parquet(str(out / f"batch={batch_id}"))
        if batch_id == crash_after:
            raise RuntimeError(f"crash after writing batch {batch_id}")

    query = frame.writeStream.foreachBatch(write).option("checkpointLocation", str(chk))
    started = query.trigger(availableNow=True).start()
    assert started.awaitTermination(90)


@pytest.fixture
def spark(spark_session: Any) -> Any:
    from kcl_daemon.spark.executor_source import register

    register(spark_session)
    return spark_session


def test_every_record_once_and_a_replay_reads_the_published_end_not_the_new_tip(
    spark: Any,
    clients: AwsClients,
    stream_and_table: tuple[str, str],
    kinesalite_endpoint: str,
    dynalite_endpoint: str,
    tmp_path: Path,
) -> None:
    stream, table = stream_and_table
    opts = options(stream, table, kinesalite_endpoint, dynalite_endpoint, maxRecordsPerBatch="2000")
    out, chk = tmp_path / "out", tmp_path / "chk"
    put(clients, stream, range(1000))
    with pytest.raises(Exception, match="crash after writing batch 0"):
        run(spark, opts, out, chk, crash_after=0)
    before = sorted((r["shardId"], r["sequenceNumber"]) for r in rows(out))
    assert len(before) == 1000  # batch 0 read both shards to their tips

    put(clients, stream, range(1000, 1300))  # a fresh decision would now read 1300 in batch 0
    run(spark, opts, out, chk)
    found = rows(out)
    replayed = sorted((r["shardId"], r["sequenceNumber"]) for r in found if r["batch"] == 0)
    assert replayed == before
    assert len(found) == 1300
    assert {r["data"] for r in found} == {f"record-{n}".encode() for n in range(1300)}


def test_the_first_publication_of_a_batch_stands(
    clients: AwsClients, stream_and_table: tuple[str, str]
) -> None:
    _, table = stream_and_table
    store = LeaseTableEndStore(clients.dynamodb, table, upsert=True)
    first = PublishedEnd("49000000000000000000000000000000000000000000000000000001", 0, "tip", 10)
    second = PublishedEnd("49000000000000000000000000000000000000000000000000000009", 3, "budget", 50)
    assert store.publish("run1", 4, "shardId-000000000000", first) == first
    assert store.publish("run1", 4, "shardId-000000000000", second) == first  # the loser adopts it
    assert store.publish("run1", 5, "shardId-000000000000", second) == second
    assert store.read_batch("run1", 4) == {"shardId-000000000000": first}
    store.prune("run1", 6, {"shardId-000000000000": None})
    assert store.read_batch("run1", 4) == {} and store.read_batch("run1", 5) == {}
