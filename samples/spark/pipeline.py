"""A Spark pipeline on the embedded local backend: count records by partition key per window, to parquet.

Runs with no AWS account: ``kcl_daemon.local`` starts moto on 127.0.0.1 with a 4-shard stream and the
sample producer (KPL aggregates included), the Kinesis source reads it from TRIM_HORIZON, and every
micro-batch's counts per (10-second window, partition key) go to ``<out>/batch=<id>`` as parquet. A
window can span batches: the totals printed at the end sum them.

    .venv/bin/python samples/spark/pipeline.py --seconds 20 --out /tmp/kinesis-counts

Needs ``pip install 'kcl-daemon[spark,local]'`` and Java 17.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kcl_daemon.local import local_stack
from kcl_daemon.spark import register


def counts(batch: DataFrame) -> DataFrame:
    """Records per (10-second arrival window, partition key) of one micro-batch."""
    return (
        batch.groupBy(F.window("approximateArrivalTimestamp", "10 seconds"), "partitionKey")
        .count()
        .select(F.col("window.start").alias("windowStart"), "partitionKey", "count")
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the query runs")
    parser.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="kinesis-counts-")))
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors use this interpreter

    with local_stack("spark-sample", aggregate_every=4) as stack:
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("kinesis-sample")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        credentials = stack.backend.credentials
        records = (
            spark.readStream.format("kinesis")
            .option("streamName", stack.stream_name)
            .option("region", stack.backend.region)
            .option("endpointUrl", stack.backend.endpoint)
            .option("awsAccessKeyId", credentials.access_key_id)  # the backend's dummy keys
            .option("awsSecretKey", credentials.secret_access_key)
            .option("startingPosition", "TRIM_HORIZON")
            .load()
        )

        def write(batch: DataFrame, batch_id: int) -> None:
            counts(batch).write.mode("overwrite").parquet(str(args.out / f"batch={batch_id}"))

        query = (
            records.writeStream.foreachBatch(write)
            .option("checkpointLocation", str(args.out / "_checkpoint"))
            .trigger(processingTime="2 seconds")
            .start()
        )
        time.sleep(args.seconds)
        deadline = time.monotonic() + 120
        while query.status["isTriggerActive"] and time.monotonic() < deadline:
            time.sleep(0.2)  # stop between batches: a batch cut short only wastes its work
        query.stop()
        totals: Any = (
            spark.read.parquet(str(args.out / "batch=*"))
            .groupBy("windowStart", "partitionKey")
            .agg(F.sum("count").alias("records"))
            .orderBy("windowStart", "partitionKey")
        )
        totals.show(20, truncate=False)
        print(f"parquet under {args.out}")
        spark.stop()


if __name__ == "__main__":
    main()
