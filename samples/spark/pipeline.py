"""A Spark pipeline on the embedded local backend: Kinesis -> transform -> a Kinesis stream and parquet.

Runs with no AWS account, in one command::

    .venv/bin/python samples/spark/pipeline.py --seconds 20 --out /tmp/kinesis-pipeline

``kcl_daemon.local`` starts moto on 127.0.0.1 with a 4-shard stream ``spark-sample`` and the sample
producer (JSON records ``{"n": 17, "at": "..."}``, every fifth Kinesis record a KPL aggregate). Two
streaming queries read it with ``format("kinesis")`` (executor reads; each query keeps its own ends in
the metadata table, so the two do not interfere), apply the same transform (parse the JSON, keep even
``n``, add ``doubled``), and write:

* ``enriched``: to the Kinesis stream ``spark-sample-out`` with ``writeStream.format("kinesis")``
  (partition key ``n mod 8``, KPL aggregation on);
* ``archive``: to parquet under ``<out>/archive`` (the file sink).

When the time is up the producer stops, both queries process what is left and stop between batches, and
the sample reads ``spark-sample-out`` back with the source and prints what each side holds: every even
``n`` the producer sent, once in the stream and once in the parquet files (the Kinesis sink is at
least once: a failure between a write and Spark's commit would send a batch again).

Needs ``pip install 'kcl-daemon[spark,local]'`` and Java 17. ``--master`` runs it elsewhere than on
``local[2]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

from kcl_daemon.aws.provision import ensure_stream
from kcl_daemon.local import local_stack
from kcl_daemon.local.stack import LocalStack
from kcl_daemon.spark import register

SOURCE_STREAM = "spark-sample"
OUTPUT_STREAM = "spark-sample-out"
RECORD = StructType(
    [StructField("n", LongType()), StructField("at", StringType()), StructField("agg", BooleanType())]
)


@dataclass(frozen=True)
class Summary:
    produced: int  # user records the producer had acknowledged
    expected: set[int]  # the even n among them
    in_stream: list[int]  # n of every record read back from the output stream (duplicates kept)
    in_parquet: list[int]  # n of every row in the parquet files


def transform(records: DataFrame) -> DataFrame:
    """Parse the producer's JSON, keep even ``n``, add ``doubled``: the pipeline's business logic."""
    parsed = records.select(F.from_json(F.col("data").cast("string"), RECORD).alias("r"), "shardId")
    return parsed.where(F.col("r.n") % 2 == 0).select(
        F.col("r.n").alias("n"),
        F.col("r.at").alias("at"),
        (F.col("r.n") * 2).alias("doubled"),
        "shardId",
    )


def connection(stack: LocalStack) -> dict[str, str]:
    """Where the embedded backend is, and its dummy keys."""
    credentials = stack.backend.credentials
    return {
        "region": stack.backend.region,
        "endpointUrl": stack.backend.endpoint,
        "awsAccessKeyId": credentials.access_key_id,
        "awsSecretKey": credentials.secret_access_key,
    }


def table(stack: LocalStack) -> dict[str, str]:
    """Where a source's table is: the embedded backend serves DynamoDB too (endpointUrl is Kinesis' only)."""
    return {"dynamoDbEndpointUrl": stack.backend.endpoint}


def start_queries(spark: SparkSession, stack: LocalStack, out: Path) -> list[Any]:
    """The two streaming queries of the pipeline, started (2-second processing-time triggers)."""
    source = {
        **connection(stack),
        **table(stack),
        "streamName": stack.stream_name,
        "startingPosition": "TRIM_HORIZON",
    }
    records = spark.readStream.format("kinesis").options(**source).load()
    enriched = (
        transform(records)
        .select(
            F.to_json(F.struct("n", "at", "doubled", "shardId")).cast("binary").alias("data"),
            (F.col("n") % 8).cast("string").alias("partitionKey"),
        )
        .writeStream.format("kinesis")
        .options(**connection(stack), streamName=OUTPUT_STREAM, aggregationEnabled="true")
        .option("checkpointLocation", str(out / "_checkpoints" / "enriched"))
        .trigger(processingTime="2 seconds")
        .queryName("enriched")
        .start()
    )
    archive = (
        transform(spark.readStream.format("kinesis").options(**source).load())
        .writeStream.format("parquet")
        .option("path", str(out / "archive"))
        .option("checkpointLocation", str(out / "_checkpoints" / "archive"))
        .trigger(processingTime="2 seconds")
        .queryName("archive")
        .start()
    )
    return [enriched, archive]


def drain(queries: list[Any]) -> None:
    """Let each query process everything its source has (the producer stopped), then stop it between
    batches (a batch cut short only wastes its work)."""
    for query in queries:
        query.processAllAvailable()
        query.stop()


def read_back(spark: SparkSession, stack: LocalStack, out: Path) -> list[int]:
    """``n`` of every record in the output stream, read with the source (AvailableNow)."""
    options = {
        **connection(stack),
        **table(stack),
        "streamName": OUTPUT_STREAM,
        "startingPosition": "TRIM_HORIZON",
    }
    frame = spark.readStream.format("kinesis").options(**options).load()
    seen: list[int] = []

    def collect(batch: DataFrame, batch_id: int) -> None:
        values = batch.select(F.get_json_object(F.col("data").cast("string"), "$.n").cast("long")).collect()
        seen.extend(int(row[0]) for row in values)

    query = (
        frame.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(out / "_checkpoints" / "read-back"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return seen


def run(spark: SparkSession, out: Path, *, seconds: float, rate_per_s: float = 20.0) -> Summary:
    """The whole pipeline on a fresh embedded backend; what each side holds at the end."""
    with local_stack(SOURCE_STREAM, aggregate_every=4, rate_per_s=rate_per_s) as stack:
        ensure_stream(stack.clients.kinesis, OUTPUT_STREAM, 2)
        queries = start_queries(spark, stack, out)
        time.sleep(seconds)
        assert stack.producer is not None
        stats = stack.producer.stop()
        drain(queries)
        in_stream = read_back(spark, stack, out)
    in_parquet = [int(row[0]) for row in spark.read.parquet(str(out / "archive")).select("n").collect()]
    expected = {n for n in range(stats.user_records) if n % 2 == 0}
    return Summary(stats.user_records, expected, in_stream, in_parquet)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the producer runs")
    parser.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="kinesis-pipeline-")))
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors use this interpreter
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master(args.master)
        .appName("kinesis-pipeline-sample")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    summary = run(spark, args.out, seconds=args.seconds)
    print(f"the producer sent {summary.produced} records; {len(summary.expected)} have an even n")
    print(f"{OUTPUT_STREAM}: {len(summary.in_stream)} records, {len(set(summary.in_stream))} distinct n")
    print(f"parquet under {args.out / 'archive'}: {len(summary.in_parquet)} rows")
    ok = set(summary.in_stream) == summary.expected and sorted(summary.in_parquet) == sorted(summary.expected)
    print("every even n in both sinks" if ok else "MISMATCH between the producer and the sinks")
    spark.stop()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
