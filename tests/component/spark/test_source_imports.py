"""What the driver's source runner loads: Spark starts it as a new Python process for every query, so
what ``kcl_daemon.spark.source`` imports is paid once per query. It loads the planner, not the read
paths, the driver-read mode or the sink; those load when a task or a writer needs them."""

from __future__ import annotations

import json
import subprocess
import sys

from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from kcl_daemon.spark.driver_read import DriverStreamReader
from kcl_daemon.spark.planner import ExecutorStreamReader
from kcl_daemon.spark.sink import KinesisBatchWriter, KinesisStreamWriter
from kcl_daemon.spark.source import KinesisDataSource
from tests.support.paths import REPO

#: Modules of the read paths and the sink (and the heavy libraries only they need).
NOT_ON_THE_DRIVER = (
    "kcl_daemon.spark.executor_read",
    "kcl_daemon.spark.shard_reader",
    "kcl_daemon.spark.rows",
    "kcl_daemon.spark.efo_read",
    "kcl_daemon.spark.driver_read",
    "kcl_daemon.spark.sink",
    "kcl_daemon.retrieval.deaggregate",
    "kcl_daemon.retrieval.fanout",
    "kcl_protocol",
    "aws_kinesis_agg",
    "asyncio",
)


def test_the_source_module_loads_the_planner_and_not_the_read_paths() -> None:
    probe = (
        "import json, sys; import kcl_daemon.spark.source; "
        f"print(json.dumps([m for m in {list(NOT_ON_THE_DRIVER)!r} if m in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout) == []


def test_the_lazily_loaded_readers_and_writers_are_the_ones_asked_for() -> None:
    base = {"streamName": "s", "region": "us-east-1"}
    assert isinstance(KinesisDataSource(base).streamReader(StructType()), ExecutorStreamReader)
    driver = KinesisDataSource({**base, "readMode": "driver"}).streamReader(StructType())
    assert isinstance(driver, DriverStreamReader)
    schema = StructType([StructField("data", BinaryType()), StructField("partitionKey", StringType())])
    assert isinstance(KinesisDataSource(base).writer(schema, False), KinesisBatchWriter)
    assert isinstance(KinesisDataSource(base).streamWriter(schema, False), KinesisStreamWriter)
