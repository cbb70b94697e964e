"""Spike of the executor-read design: who fetches the records, and how fast is the whole query.

kinesalite + dynalite on 127.0.0.1; a stream of ``--shards`` shards with ``--records`` distinct
records; a raw GetRecords loop (a thread per shard, back-to-back calls, Limit 10000) reads it once
for the baseline; then ``format("kinesis-exec")`` (kcl_daemon/spark/executor_source.py) reads it in
an AvailableNow query into a parquet file sink on ``--master`` (``local[2]`` or
``local-cluster[2,1,1024]``), after a warm-up query on a small stream. Every Kinesis call of the Spark
processes goes through ``_attributing_proxy`` and is attributed to the driver side or an executor by
the calling process's ancestry. The output is checked: every record exactly once.

``--kill-executor-after N``: SIGKILL the executor JVM (``--kill-target worker``: only the task's Python
worker) that made the N-th executor GetRecords call of the measured query (use with
``--max-records-per-batch`` and a small ``--get-records-limit`` so a batch lasts long enough), then
check the file sink again. ``--sink noop`` skips the sink check; ``--format kinesis`` runs the shipped
driver-probe source on the same data for comparison. Driver-side Python CPU (source runner, planners)
is sampled from /proc while the query runs.

    flock /tmp/kcl-heavy.lock .venv/bin/python bench/spark_executor_read.py --master 'local-cluster[2,1,1024]'

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _attributing_proxy import AttributingProxy  # noqa: E402
from _emulators import REGION, running_emulators  # noqa: E402

from kcl_daemon.aws.clients import AwsClients  # noqa: E402


def make_stream(clients: AwsClients, name: str, shards: int, records: int, size: int) -> dict[str, int]:
    kinesis = clients.kinesis
    kinesis.create_stream(StreamName=name, ShardCount=shards)
    while (
        kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamStatus"]
        != "ACTIVE"
    ):
        time.sleep(0.05)
    per_shard: dict[str, int] = {}
    for offset in range(0, records, 500):
        entries = [
            {"Data": f"{n:010d}".encode().ljust(size, b"."), "PartitionKey": f"key-{n}"}
            for n in range(offset, min(records, offset + 500))
        ]
        response = kinesis.put_records(StreamName=name, Records=entries)  # type: ignore[arg-type]
        assert not response.get("FailedRecordCount")
        for result in response["Records"]:
            per_shard[result["ShardId"]] = per_shard.get(result["ShardId"], 0) + 1
    return per_shard


def raw_loop_s(clients: AwsClients, stream: str, per_shard: dict[str, int]) -> float:
    kinesis = clients.kinesis

    def read(shard_id: str) -> int:
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        seen = 0
        while seen < per_shard[shard_id]:
            response = kinesis.get_records(ShardIterator=iterator, Limit=10000)
            seen += len(response["Records"])
            iterator = response["NextShardIterator"]
        return seen

    start = time.perf_counter()
    with ThreadPoolExecutor(len(per_shard)) as pool:
        assert sum(pool.map(read, per_shard)) == sum(per_shard.values())
    return time.perf_counter() - start


def session(master: str) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # every Spark process binds and advertises loopback
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    from pyspark.sql import SparkSession

    from kcl_daemon.spark import register as register_shipped
    from kcl_daemon.spark.executor_source import register

    builder = (
        SparkSession.builder.master(master)
        .appName("spark-executor-read")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if master.startswith("local-cluster"):
        wanted = int(master.split("[", 1)[1].split(",", 1)[0])
        deadline = time.monotonic() + 120
        while spark.sparkContext._jsc.sc().getExecutorIds().size() < wanted:
            if time.monotonic() > deadline:
                raise TimeoutError("the executors did not register")
            time.sleep(0.1)
    register(spark)
    register_shipped(spark)
    return spark


def run_query(
    spark: Any,
    options: dict[str, str],
    out: Path,
    chk: Path,
    sink: str = "parquet",
    fmt: str = "kinesis-exec",
) -> tuple[float, list[dict[str, Any]]]:
    if fmt == "kinesis":  # the shipped driver-probe source, for comparison: no publication store
        drop = ("leaseTableName", "leaseTableEndpointUrl", "endStoreUpsert")
        options = {k: v for k, v in options.items() if k not in drop}
    frame = spark.readStream.format(fmt).options(**options).load()
    start = time.perf_counter()
    writer = frame.writeStream.format(sink)
    if sink == "parquet":
        writer = writer.option("path", str(out))
    query = writer.option("checkpointLocation", str(chk)).trigger(availableNow=True).start()
    query.awaitTermination()
    wall = time.perf_counter() - start
    return wall, [dict(p) for p in query.recentProgress]


def check_sink(spark: Any, out: Path, records: int) -> dict[str, Any]:
    import pyarrow.parquet as pq

    files = sorted(p for p in out.glob("*.parquet"))
    # the file sink's own log says which files are committed: read through Spark, like a user would
    frame = spark.read.parquet(str(out))
    rows = frame.select("shardId", "sequenceNumber", "subSequenceNumber", "data").collect()
    keys = {(r[0], r[1], r[2]) for r in rows}
    payloads = sorted(bytes(r[3])[:10] for r in rows)
    expected = [f"{n:010d}".encode() for n in range(records)]
    on_disk = sum(pq.read_metadata(p).num_rows for p in files)
    return {
        "rows": len(rows),
        "distinct": len(keys),
        "exact": payloads == expected,
        "parquet_files": len(files),
        "rows_in_all_files_on_disk": on_disk,
    }


class DriverCpu:
    """CPU seconds of the driver side's Python processes started during the query (source runner,
    planners), sampled from /proc every 0.1 s while they live (the runner exits with the query)."""

    MARKERS = (b"python_streaming_source_runner", b"plan_data_source_read", b"create_data_source")

    def __init__(self) -> None:
        self.before = set(self._pids())
        self.last: dict[int, float] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _pids(self) -> list[int]:
        out = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    argv = Path(f"/proc/{entry.name}/cmdline").read_bytes()
                except OSError:
                    continue
                if any(marker in argv for marker in self.MARKERS):
                    out.append(int(entry.name))
        return out

    def _loop(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        while not self.done.wait(0.1):
            for pid in self._pids():
                try:
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                self.last[pid] = (int(fields[11]) + int(fields[12])) / tick

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.done.set()
        self.thread.join()

    def seconds(self) -> float:
        """CPU of processes that appeared after start() (a reused planner daemon counts whole)."""
        return sum(cpu for pid, cpu in self.last.items() if pid not in self.before)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--master", default="local-cluster[2,1,1024]")
    parser.add_argument("--records", type=int, default=40_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--max-records-per-batch", type=int, default=0)
    parser.add_argument("--get-records-limit", type=int, default=10000)
    parser.add_argument("--kill-executor-after", type=int, default=0)
    parser.add_argument("--kill-target", choices=("jvm", "worker"), default="jvm")
    parser.add_argument("--sink", choices=("parquet", "noop"), default="parquet")
    parser.add_argument("--format", choices=("kinesis-exec", "kinesis"), default="kinesis-exec")
    args = parser.parse_args()

    with running_emulators() as emulators, AttributingProxy(emulators.kinesis_endpoint) as proxy:
        clients = emulators.clients()
        table = "spark-ends"
        clients.dynamodb.create_table(
            TableName=table,
            KeySchema=[{"AttributeName": "leaseKey", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "leaseKey", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        per_shard = make_stream(clients, "measured", args.shards, args.records, args.size)
        make_stream(clients, "warmup", 1, 100, args.size)
        raw = min(raw_loop_s(clients, "measured", per_shard) for _ in range(3))

        started = time.perf_counter()
        spark = session(args.master)
        session_s = time.perf_counter() - started

        def options(stream: str) -> dict[str, str]:
            extra = (
                {"maxRecordsPerBatch": str(args.max_records_per_batch)} if args.max_records_per_batch else {}
            )
            return {
                "streamName": stream,
                "region": REGION,
                "endpointUrl": proxy.endpoint,
                "startingPosition": "TRIM_HORIZON",
                "awsAccessKeyId": "bench",
                "awsSecretKey": "bench",
                "leaseTableName": table,
                "leaseTableEndpointUrl": emulators.dynamodb_endpoint,
                "endStoreUpsert": "true",
                "shardDiscoveryIntervalMs": "0",
                "getRecordsLimit": str(args.get_records_limit),
                **extra,
            }

        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            run_query(spark, options("warmup"), root / "warm-out", root / "warm-chk", "noop", args.format)
            proxy.reset()
            killed: dict[str, Any] = {}
            if args.kill_executor_after:

                def killer() -> None:
                    while True:
                        calls = proxy.calls("executor", "GetRecords")
                        if calls >= args.kill_executor_after and proxy.executor_jvms:
                            worker = max(proxy.executor_jvms, key=lambda pid: proxy.calls_by_pid[pid])
                            jvm = proxy.executor_jvms[worker]
                            os.kill(jvm if args.kill_target == "jvm" else worker, signal.SIGKILL)
                            killed.update(
                                jvm=jvm, worker=worker, at_executor_calls=calls, t=time.perf_counter()
                            )
                            return
                        time.sleep(0.01)

                threading.Thread(target=killer, daemon=True).start()
            sampler = DriverCpu()
            sampler.start()
            wall, progress = run_query(
                spark, options("measured"), root / "out", root / "chk", args.sink, args.format
            )
            sampler.stop()
            report = proxy.report()
            fetched = proxy.records()
            executor_jvms = sorted(set(proxy.executor_jvms.values()))
            sink = check_sink(spark, root / "out", args.records) if args.sink == "parquet" else {}
        spark.stop()

    delivered = sum(p["numInputRows"] for p in progress)
    total = sum(fetched.values())
    print(
        json.dumps(
            {
                "master": args.master,
                "format": args.format,
                "sink": args.sink,
                "records": args.records,
                "shards": args.shards,
                "session_start_s": round(session_s, 1),
                "batches": [(p["batchId"], p["numInputRows"]) for p in progress if p["numInputRows"]],
                "delivered_rows": delivered,
                "fetched_by_role": fetched,
                "calls_by_role": {role: tally["calls"] for role, tally in report.items()},
                "fetched_total_over_delivered": round(total / max(1, delivered), 4),
                "driver_share": round(fetched.get("driver", 0) / max(1, args.records), 5),
                "whole_query_s": round(wall, 2),
                "whole_query_rps": round(args.records / wall),
                "raw_loop_s": round(raw, 2),
                "raw_loop_rps": round(args.records / raw),
                "ratio_vs_raw": round(raw / wall, 2),
                "sink_check": sink,
                "driver_side_python_cpu_s": round(sampler.seconds(), 3),
                "driver_side_python_cpu_s_per_10k": round(sampler.seconds() / (args.records / 10_000), 4),
                "durations_ms": [p["durationMs"] for p in progress],
                "killed": {**killed, "target": args.kill_target} if killed else {},
                "executor_jvms_that_fetched": executor_jvms,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
