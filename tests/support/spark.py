"""Helpers of the Spark tests and benchmarks: a session on a real multi-process cluster, the source's
options, running a query, reading its output back.

:func:`start_session` starts ``local-cluster[N,1,1024]`` (N executor JVMs with their own Python workers,
from the pip-installed pyspark) or ``local[N]``: every Spark process binds and advertises 127.0.0.1,
the executors get this checkout on their ``PYTHONPATH`` (the shared virtualenv has another checkout
installed) and the session waits until every executor has registered.

A query writes each micro-batch to ``<out>/batch=<id>`` (overwrite, so a replayed batch replaces its
own output: the idempotent sink of the Spark docs); the tests read every batch back with pyarrow.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tests.support.emulators import REGION
from tests.support.paths import REPO

#: The Spark tests' cluster: two executor JVMs, one core and 1 GiB each (override: KCL_SPARK_MASTER).
CLUSTER = "local-cluster[2,1,1024]"


def session_master() -> str:
    """The tests' master: :data:`CLUSTER`, unless ``KCL_SPARK_MASTER`` says otherwise."""
    return os.environ.get("KCL_SPARK_MASTER", CLUSTER)


def executors_wanted(master: str) -> int:
    """How many executors ``local-cluster[N,...]`` starts (0 for ``local[...]``: tasks run in the driver)."""
    if not master.startswith("local-cluster"):
        return 0
    return int(master.split("[", 1)[1].split(",", 1)[0])


def executor_count(spark: Any) -> int:
    """Executors registered now (the driver is not one)."""
    ids = spark.sparkContext._jsc.sc().getExecutorIds()
    return int(ids.size())


def wait_for_executors(spark: Any, wanted: int, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while executor_count(spark) < wanted:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{executor_count(spark)} of {wanted} executors registered in {timeout_s}s")
        time.sleep(0.1)


def start_session(
    master: str, app: str, *, warehouse: Path | None = None, conf: Mapping[str, str] = {}
) -> Any:
    """A SparkSession on ``master`` with ``format("kinesis")`` registered (see the module docstring)."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # else Spark binds and advertises the external address
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers use this venv's packages
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    path = os.pathsep.join(
        p
        for p in (
            str(REPO),
            str(REPO / "protocol"),
            str(REPO / "clients" / "python"),
            os.environ.get("PYTHONPATH", ""),
        )
        if p
    )
    from pyspark.sql import SparkSession

    from kcl_daemon.spark import register

    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.executorEnv.PYTHONPATH", path)
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
    )
    if warehouse is not None:
        builder = builder.config("spark.sql.warehouse.dir", str(warehouse))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    wait_for_executors(spark, executors_wanted(master))
    register(spark)
    return spark


def put_numbered(kinesis: Any, stream: str, first: int, count: int) -> None:
    """Records with payloads ``<n:010d>`` and partition keys ``key-<n>`` for n in first..first+count-1,
    500 per PutRecords, four calls at a time (``kinesis``: a boto3 client)."""

    def put(offset: int) -> None:
        entries = [
            {"Data": f"{n:010d}".encode(), "PartitionKey": f"key-{n}"}
            for n in range(offset, min(first + count, offset + 500))
        ]
        assert not kinesis.put_records(StreamName=stream, Records=entries).get("FailedRecordCount")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(put, range(first, first + count, 500)))


def numbered(count: int, first: int = 0) -> list[bytes]:
    """The payloads :func:`put_numbered` puts, in order."""
    return [f"{n:010d}".encode() for n in range(first, first + count)]


def source_options(
    stream: str, kinesis_endpoint: str, dynamodb_endpoint: str | None = None, **extra: str | int
) -> dict[str, str]:
    """The source's options for a stream on an emulator; executors publish their ends to the metadata
    table on ``dynamodb_endpoint`` (default: the Kinesis endpoint, as moto serves both: set explicitly,
    as a user would, since ``endpointUrl`` alone is Kinesis' only)."""
    options = {
        "streamName": stream,
        "region": REGION,
        "endpointUrl": kinesis_endpoint,
        "startingPosition": "TRIM_HORIZON",
        "shardDiscoveryIntervalMs": "0",
    }
    options["dynamoDbEndpointUrl"] = kinesis_endpoint if dynamodb_endpoint is None else dynamodb_endpoint
    options.update({k: str(v) for k, v in extra.items()})
    return options


def run_query(
    spark: Any,
    options: Mapping[str, str],
    out: Path,
    checkpoint: Path,
    *,
    on_batch: Callable[[int], None] | None = None,
    timeout_s: float = 90.0,
    listeners: tuple[Any, ...] = (),
) -> Any:
    """Run an AvailableNow query to its end; returns the finished query (its progress is kept)."""
    frame = spark.readStream.format("kinesis").options(**options).load()

    def write(batch: Any, batch_id: int) -> None:
        batch.write.mode("overwrite").parquet(str(out / f"batch={batch_id}"))
        if on_batch is not None:
            on_batch(batch_id)

    for listener in listeners:
        spark.streams.addListener(listener)
    try:
        query = (
            frame.writeStream.foreachBatch(write)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        finished = query.awaitTermination(timeout_s)
        if not finished:
            query.stop()
            raise AssertionError(f"the query did not finish within {timeout_s}s")
        return query
    finally:
        for listener in listeners:
            spark.streams.removeListener(listener)


def rows(out: Path) -> list[dict[str, Any]]:
    """Every row of every batch written under ``out``, with its batch id."""
    found: list[dict[str, Any]] = []
    for batch_dir in sorted(out.glob("batch=*"), key=lambda p: int(p.name.split("=")[1])):
        batch_id = int(batch_dir.name.split("=")[1])
        if not any(batch_dir.glob("*.parquet")):
            continue
        for row in pq.read_table(batch_dir).to_pylist():
            found.append({**row, "batch": batch_id})
    return found


def last_committed_offset(checkpoint: Path) -> dict[str, Any]:
    """The source's end offset of the last committed batch, from Spark's checkpoint files."""
    commits = sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    lines = (checkpoint / "offsets" / str(commits[-1])).read_text().splitlines()
    return dict(json.loads(lines[2]))
