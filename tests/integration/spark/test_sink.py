"""The Kinesis sink against kinesalite on the cluster: a batch write, a streaming pipeline from one
stream through a transform into another with KPL aggregation (read back by the source), and a frame
that does not fit failing at start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from kcl_daemon.errors import ConfigError
from tests.support.emulators import REGION
from tests.support.spark import numbered, put_numbered, rows, run_query, source_options
from tests.support.streams import kinesis_client, new_stream

# the first Spark test on a worker also waits for its SparkSession (JVMs) to start: 300 s, not 120
pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture
def kinesis(kinesalite_endpoint: str) -> Any:
    return kinesis_client(kinesalite_endpoint)


def raw_records(kinesis: Any, stream: str) -> list[dict[str, Any]]:
    """Every Kinesis record of the stream, read with a plain client."""
    found = []
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while True:
            page = kinesis.get_records(ShardIterator=iterator, Limit=10000)
            found += page["Records"]
            if not page["Records"]:
                break
            iterator = page["NextShardIterator"]
    return found


def sink_options(stream: str, endpoint: str, **extra: str) -> dict[str, str]:
    return {"streamName": stream, "region": REGION, "endpointUrl": endpoint, **extra}


def test_a_batch_write_puts_every_row_once(
    spark_session: Any, kinesis: Any, kinesalite_endpoint: str
) -> None:
    stream = new_stream(kinesis, 3, prefix="sink")
    frame = spark_session.range(1_200, numPartitions=3).select(
        F.format_string("%010d", "id").cast("binary").alias("data"),
        F.concat(F.lit("key-"), F.col("id").cast("string")).alias("partitionKey"),
    )
    frame.write.format("kinesis").mode("append").options(**sink_options(stream, kinesalite_endpoint)).save()
    written = raw_records(kinesis, stream)
    assert sorted(bytes(r["Data"]) for r in written) == numbered(1_200)
    assert {r["PartitionKey"] for r in written} == {f"key-{n}" for n in range(1_200)}


def test_kinesis_to_a_transform_to_kinesis_with_aggregation_is_read_back_whole(
    spark_session: Any, kinesis: Any, kinesalite_endpoint: str, dynalite_endpoint: str, tmp_path: Path
) -> None:
    source, target = new_stream(kinesis, 2, prefix="pipe-in"), new_stream(kinesis, 2, prefix="pipe-out")
    put_numbered(kinesis, source, 0, 2_000)
    frame = (
        spark_session.readStream.format("kinesis")
        .options(**source_options(source, kinesalite_endpoint, dynalite_endpoint))
        .load()
    )
    query = (
        frame.select(F.concat(F.lit(b"out-"), F.col("data")).alias("data"), F.col("partitionKey"))
        .writeStream.format("kinesis")
        .options(**sink_options(target, kinesalite_endpoint, aggregationEnabled="true"))
        .option("checkpointLocation", str(tmp_path / "chk-pipe"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert len(raw_records(kinesis, target)) < 2_000  # aggregated: fewer Kinesis records than rows
    run_query(
        spark_session,
        source_options(target, kinesalite_endpoint, dynalite_endpoint),
        tmp_path / "out",
        tmp_path / "chk-read",
    )
    found = rows(tmp_path / "out")
    assert sorted(r["data"] for r in found) == [b"out-" + data for data in numbered(2_000)]
    assert len({(r["shardId"], r["sequenceNumber"], r["subSequenceNumber"]) for r in found}) == 2_000


def test_a_frame_that_does_not_fit_fails_at_start_naming_its_columns(
    spark_session: Any, kinesis: Any, kinesalite_endpoint: str
) -> None:
    stream = new_stream(kinesis, 1, prefix="sink-bad")
    frame = spark_session.createDataFrame([(b"x", "k", 1)], "data binary, partitionKey string, extra int")
    with pytest.raises(Exception, match="'extra' are not written anywhere") as caught:
        frame.write.format("kinesis").mode("append").options(
            **sink_options(stream, kinesalite_endpoint)
        ).save()
    assert ConfigError.__name__ in str(caught.value)
