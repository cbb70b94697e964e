"""Executor reads on a real multi-process cluster (``local-cluster[2,1,1024]``, one per test session):
kinesalite for the stream, behind a proxy that attributes every Kinesis call to the process that made
it (the driver side or an executor JVM, by process ancestry); dynalite for the metadata table the
executors publish their ends to (the default without ``leaseTableName``).

* every record exactly once into the file sink, the driver side fetching at most 1 % of the records and
  everyone together at most 1.05 times them;
* an executor JVM killed in the middle of a batch: Spark runs the lost tasks again, and the file sink
  holds every record exactly once;
* a batch replayed after a crash, once more records arrived, yields the rows it yielded the first time.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.attributing_proxy import AttributingProxy
from tests.support.figures import FIGURES
from tests.support.spark import (
    executors_wanted,
    numbered,
    put_numbered,
    rows,
    session_master,
    source_options,
    wait_for_executors,
)
from tests.support.streams import kinesis_client, new_stream

# the first Spark test on a worker also waits for its SparkSession (JVMs) to start: 300 s, not 120
pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture
def kinesis(kinesalite_endpoint: str) -> Any:
    return kinesis_client(kinesalite_endpoint)


@pytest.fixture
def proxy(kinesalite_endpoint: str) -> Iterator[AttributingProxy]:
    with AttributingProxy(kinesalite_endpoint) as running:
        yield running


def file_sink_query(spark: Any, options: dict[str, str], out: Path, chk: Path, timeout_s: float = 120) -> Any:
    """An AvailableNow query into the parquet file sink (its commit log says which files count)."""
    frame = spark.readStream.format("kinesis").options(**options).load()
    query = (
        frame.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(chk))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(timeout_s), "the query did not finish"
    return query


def assert_exactly(spark: Any, out: Path, count: int) -> None:
    found = (
        spark.read.parquet(str(out))
        .select("shardId", "sequenceNumber", "subSequenceNumber", "data")
        .collect()
    )
    assert len(found) == count
    assert len({(r[0], r[1], r[2]) for r in found}) == count
    assert sorted(bytes(r[3]) for r in found) == numbered(count)


def test_every_record_once_the_executors_fetch_and_the_driver_only_plans(
    spark_session: Any, kinesis: Any, proxy: AttributingProxy, dynalite_endpoint: str, tmp_path: Path
) -> None:
    stream = new_stream(kinesis, 4, prefix="cluster")
    put_numbered(kinesis, stream, 0, 40_000)
    options = source_options(stream, proxy.endpoint, dynalite_endpoint, maxRecordsPerBatch=10_000)
    started = time.perf_counter()
    query = file_sink_query(spark_session, options, tmp_path / "out", tmp_path / "chk")
    took = time.perf_counter() - started
    assert_exactly(spark_session, tmp_path / "out", 40_000)
    fetched = proxy.records()
    driver, executors = fetched.get("driver", 0), fetched.get("executor", 0)
    FIGURES["spark cluster: records fetched, driver side / executors / delivered"] = (
        f"{driver} / {executors} / 40000 in {len(query.recentProgress)} batches, {took:.1f} s "
        f"({len(set(proxy.executor_jvms.values()))} executor JVMs fetched)"
    )
    if executors_wanted(session_master()):  # on local[N] every task runs under the driver JVM
        assert driver <= 400, proxy.report()  # at most 1 % on the driver side
        assert executors >= 39_000, proxy.report()
    assert driver + executors <= 42_000, proxy.report()  # at most 1.05 fetches per record


def test_an_executor_killed_mid_batch_loses_and_duplicates_nothing(
    spark_session: Any, kinesis: Any, proxy: AttributingProxy, dynalite_endpoint: str, tmp_path: Path
) -> None:
    stream = new_stream(kinesis, 4, prefix="kill")
    put_numbered(kinesis, stream, 0, 4_000)
    # small calls and budgets, so a batch lasts seconds and the kill lands inside one
    options = source_options(
        stream, proxy.endpoint, dynalite_endpoint, maxRecordsPerBatch=2_000, getRecordsLimit=50
    )
    killed: dict[str, int] = {}

    def killer() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            if proxy.calls("executor", "GetRecords") >= 8 and proxy.executor_jvms:
                worker = max(proxy.executor_jvms, key=lambda pid: proxy.calls_by_pid[pid])
                jvm = proxy.executor_jvms[worker]
                os.kill(jvm, signal.SIGKILL)
                killed.update(jvm=jvm, calls=proxy.calls("executor", "GetRecords"))
            time.sleep(0.01)

    thread = threading.Thread(target=killer, name="executor-killer", daemon=True)
    thread.start()
    file_sink_query(spark_session, options, tmp_path / "out", tmp_path / "chk", timeout_s=180)
    thread.join()
    assert killed, "no executor was killed: the query finished before the 8th GetRecords"
    assert_exactly(spark_session, tmp_path / "out", 4_000)
    FIGURES["spark cluster: executor JVM killed"] = (
        f"after {killed['calls']} executor GetRecords; records fetched by role {proxy.records()}"
    )
    wait_for_executors(spark_session, executors_wanted(session_master()))


def test_a_replayed_batch_reads_to_its_published_end_not_to_the_new_tip(
    spark_session: Any, kinesis: Any, kinesalite_endpoint: str, dynalite_endpoint: str, tmp_path: Path
) -> None:
    stream = new_stream(kinesis, 2, prefix="replay")
    put_numbered(kinesis, stream, 0, 1_000)
    options = source_options(stream, kinesalite_endpoint, dynalite_endpoint, maxRecordsPerBatch=5_000)
    out, chk = tmp_path / "out", tmp_path / "chk"

    def run(crash_after: int | None = None) -> None:
        frame = spark_session.readStream.format("kinesis").options(**options).load()

        def write(batch: Any, batch_id: int) -> None:
            batch.write.mode("overwrite").parquet(str(out / f"batch={batch_id}"))
            if batch_id == crash_after:
                raise RuntimeError(f"crash after writing batch {batch_id}")

        query = frame.writeStream.foreachBatch(write).option("checkpointLocation", str(chk))
        assert query.trigger(availableNow=True).start().awaitTermination(120)

    with pytest.raises(Exception, match="crash after writing batch 0"):
        run(crash_after=0)
    before = sorted((r["shardId"], r["sequenceNumber"]) for r in rows(out))
    assert len(before) == 1_000  # batch 0 read both shards to their tips

    put_numbered(kinesis, stream, 1_000, 300)  # a fresh decision would now read 1300 in batch 0
    run()
    found = rows(out)
    assert sorted((r["shardId"], r["sequenceNumber"]) for r in found if r["batch"] == 0) == before
    assert sorted(r["data"] for r in found) == numbered(1_300)
