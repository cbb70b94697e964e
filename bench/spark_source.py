"""Records/s of the Spark source vs a raw boto3 GetRecords loop over the same data, and put-to-batch latency.

The stream lives in the embedded moto backend (127.0.0.1). The baseline reads every shard from
TRIM_HORIZON on its own thread with back-to-back GetRecords calls (Limit 10000). The Spark source then
reads the same stream in a local[2] SparkSession (started and warmed up first, so JVM start-up is not
counted) under Trigger.AvailableNow into the ``noop`` sink; two figures are printed:

* whole query: records / wall time from ``start()`` to the query's end (planning, the driver's probe,
  the executors' read, Spark's own bookkeeping);
* within batches: records / the batches' ``addBatch`` time (the executors' read and the sink).

Latency: a producer puts ``--latency-rate`` records/s for ``--latency-seconds`` while a query with a
0-second processing-time trigger runs; for each record, the time from its ApproximateArrivalTimestamp
to the moment foreachBatch sees it (p50/p90/p99).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _local import create_stream, put_records, quiet_logs, unique

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.local import EmbeddedBackend

LIMIT = 10000


def raw_read(clients: AwsClients, stream: str, shard_id: str, expected: int) -> int:
    kinesis = clients.kinesis
    iterator = kinesis.get_shard_iterator(
        StreamName=stream, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    seen = 0
    while seen < expected:
        response = kinesis.get_records(ShardIterator=iterator, Limit=LIMIT)
        seen += len(response["Records"])
        iterator = response["NextShardIterator"]
    return seen


def baseline_s(clients: AwsClients, stream: str, per_shard: dict[str, int]) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(len(per_shard)) as pool:
        seen = sum(pool.map(lambda item: raw_read(clients, stream, *item), per_shard.items()))
    assert seen == sum(per_shard.values())
    return time.perf_counter() - start


def spark_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kcl_daemon.spark import register

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kcl-daemon-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def options(backend: EmbeddedBackend, stream: str, **extra: str) -> dict[str, str]:
    return {
        "streamName": stream,
        "region": backend.region,
        "endpointUrl": backend.endpoint,
        "dynamoDbEndpointUrl": backend.endpoint,  # the embedded backend serves both
        "startingPosition": "TRIM_HORIZON",
        "awsAccessKeyId": backend.credentials.access_key_id,  # the embedded backend's dummy keys
        "awsSecretKey": backend.credentials.secret_access_key,
        **extra,
    }


def spark_run(spark: Any, source_options: dict[str, str], checkpoint: Path) -> tuple[float, float, int]:
    """(whole-query seconds, sum of addBatch seconds, rows) of one AvailableNow run into noop."""
    frame = spark.readStream.format("kinesis").options(**source_options).load()
    start = time.perf_counter()
    query = (
        frame.writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    wall = time.perf_counter() - start
    progress = query.recentProgress
    add_batch = sum(p["durationMs"].get("addBatch", 0) for p in progress) / 1000
    if os.environ.get("BENCH_VERBOSE"):
        for p in progress:
            print("   batch", p["batchId"], p["numInputRows"], p["durationMs"])
    rows = sum(p["numInputRows"] for p in progress)
    return wall, add_batch, rows


def latency(
    spark: Any, backend: EmbeddedBackend, clients: AwsClients, rate: float, seconds: float
) -> list[float]:
    stream = create_stream(clients, 2)
    seen: list[float] = []

    def on_batch(batch: Any, batch_id: int) -> None:
        now = time.time()
        for row in batch.select("approximateArrivalTimestamp").collect():
            seen.append(now - row[0].timestamp())

    frame = spark.readStream.format("kinesis").options(**options(backend, stream)).load()
    with tempfile.TemporaryDirectory() as tmp:
        query = (
            frame.writeStream.foreachBatch(on_batch)
            .option("checkpointLocation", tmp)
            .trigger(processingTime="0 seconds")
            .start()
        )
        time.sleep(3)  # the first batches (session warm, Python workers started)
        stop = threading.Event()

        def produce() -> None:
            n = 0
            while not stop.is_set():
                clients.kinesis.put_record(StreamName=stream, Data=b"x" * 100, PartitionKey=f"k{n}")
                n += 1
                stop.wait(1 / rate)

        producer = threading.Thread(target=produce, name="bench-producer")
        producer.start()
        time.sleep(seconds)
        stop.set()
        producer.join()
        time.sleep(3)
        if os.environ.get("BENCH_VERBOSE"):
            busy = [p["durationMs"] for p in query.recentProgress if p["numInputRows"]]
            for key in ("latestOffset", "addBatch", "walCommit", "commitOffsets", "triggerExecution"):
                values = sorted(d.get(key, 0) for d in busy)
                if values:
                    print(f"   {key}: p50 {values[len(values) // 2]} ms over {len(values)} batches")
        query.stop()
    return seen


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-records-per-batch", type=int, default=0, help="0: one batch")
    parser.add_argument("--latency-rate", type=float, default=10.0)
    parser.add_argument("--latency-seconds", type=float, default=15.0)
    args = parser.parse_args()
    quiet_logs()
    with EmbeddedBackend() as backend:
        clients = backend.build_clients()
        stream = create_stream(clients, args.shards)
        per_shard = dict(put_records(clients, stream, args.records, args.size))
        spark = spark_session()
        extra = {"maxRecordsPerBatch": str(args.max_records_per_batch)} if args.max_records_per_batch else {}
        with tempfile.TemporaryDirectory() as tmp:
            warm = create_stream(clients, 1)
            put_records(clients, warm, 100, args.size)
            spark_run(spark, options(backend, warm), Path(tmp) / unique("warm"))
            bases, wholes, withins = [], [], []
            for _ in range(args.runs):
                bases.append(baseline_s(clients, stream, per_shard))
                wall, add_batch, rows = spark_run(
                    spark, options(backend, stream, **extra), Path(tmp) / unique("q")
                )
                assert rows == args.records, f"the query read {rows} rows, not {args.records}"
                wholes.append(wall)
                withins.append(add_batch)
        base, whole, within = min(bases), min(wholes), min(withins)
        n = args.records
        print(f"{n} records of {args.size} bytes in {args.shards} shard(s), best of {args.runs}:")
        print(f"  baseline (raw boto3, thread per shard): {n / base:10,.0f} records/s ({base:.2f} s)")
        print(f"  Spark source, whole query:              {n / whole:10,.0f} records/s ({whole:.2f} s)")
        print(f"  Spark source, within batches:           {n / within:10,.0f} records/s ({within:.2f} s)")
        print(f"  ratio whole query/baseline:             {base / whole:10.2f}")
        print(f"  ratio within batches/baseline:          {base / within:10.2f}")
        if args.latency_seconds > 0:
            seen = latency(spark, backend, clients, args.latency_rate, args.latency_seconds)
            if seen:
                print(
                    f"  put-to-batch latency ({len(seen)} records at {args.latency_rate:g}/s): "
                    f"p50 {pct(seen, 0.5) * 1000:.0f} ms, p90 {pct(seen, 0.9) * 1000:.0f} ms, "
                    f"p99 {pct(seen, 0.99) * 1000:.0f} ms, mean {statistics.mean(seen) * 1000:.0f} ms"
                )
        spark.stop()


if __name__ == "__main__":
    main()
