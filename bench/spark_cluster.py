"""The Spark source and sink at cluster scale: who fetches what, how fast, and what the driver costs.

kinesalite + dynalite on 127.0.0.1. The parent process puts ``--records`` distinct records of ``--size``
bytes into a ``--shards``-shard stream once, then runs one child process per ``--masters`` entry
(``local[2]``, ``local-cluster[1,1,1024]``, ``local-cluster[2,1,1024]``: one SparkSession per process).
Each child, over the same data:

* **baseline**: a raw GetRecords loop (boto3, a thread per shard, back-to-back calls with Limit 10000),
  best of two (before and after the session started);
* **whole query**: ``format("kinesis")`` under ``Trigger.AvailableNow`` into the ``noop`` sink (or
  ``--sink parquet``), timed from ``start()`` to the end, after a warm-up query on a small stream (JVM
  and Python workers started); ``maxRecordsPerBatch`` = ``--batch`` (0: unset, each shard's part of a
  batch bounded by ``maxBytesPerShardPerBatch``), plus any ``--source-option``; ``--repeat N`` times it N
  times with a raw loop between rounds (a round's raw figure: the best of the raw loops on either side
  of it; the first round's is the baseline above) and reports each round's ratio and their median;
* **driver CPU**: a second query over the same data with ``maxRecordsPerBatch`` = ``--cpu-batch`` (many
  batches): CPU seconds of its source runner (the driver-side Python process that plans) from the end
  of its first batch to the end of the query, per 10,000 records read in that time (start-up, imports
  and the first batch excluded), sampled from /proc;
* **who fetched**: every Kinesis call of the driver-CPU query (``--proxy cpu-run``, the default) or of
  the timed query (``--proxy measured``) goes through an attributing proxy
  (tests/support/attributing_proxy.py) that tells the driver side from the executors by process
  ancestry; records fetched by each side against the records delivered. The proxy is a Python HTTP
  server in this process that buffers and JSON-parses every GetRecords page, so it costs CPU on the
  cores the query and the emulator share and delays every page: by default the timed query reads the
  emulator directly, as the raw loop does;
* **sink** (``--sink-records``): ``df.write.format("kinesis")`` of that many rows in 2 partitions
  against a raw PutRecords loop (one thread, 500 entries per call) into a fresh stream.

**What both read** (``--endpoint``): kinesalite itself (the default), or ``replay``: a copy of the stream
served from memory by ``tests/support/replay_kinesis.py`` in the parent process (every other call is
forwarded to kinesalite). kinesalite is one single-threaded Node process, and on two cores every reader of
it keeps it busy all the time, so its figures compare the emulator with itself; ``emulator_busy`` in the
JSON says how much of a core kinesalite spent over each raw loop and each timed query (1.0: it could not
serve faster). The copy costs a few milliseconds per 10,000 records, so there the readers set the pace.
Beside the boto3 loop, each child times twice a loop of the project's own Kinesis client (the page parser
the executors use): ``median_query_vs_project_loop``.

``--read-mode driver`` runs the old driver-read mode for comparison; ``--compiled-pyspark-zip`` runs Spark
from a Spark home whose ``pyspark.zip`` carries bytecode (``bench/_spark_home.py``: a deployment choice
that saves each fresh Python process Spark starts, the source runner among them, compiling pyspark).
Prints a table, and one JSON object per master with ``--json``. Two cores are shared by kinesalite,
the JVMs, the executors' Python workers and the baseline: see bench/README.md for what they can and
cannot show.

    flock /tmp/kcl-heavy.lock .venv/bin/python bench/spark_cluster.py
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from kcl_daemon.aws.kinesis import AnyRawRecord, Kinesis
from kcl_daemon.aws.records_page import EncodedRawRecord
from kcl_daemon.core.shards.iterator import IteratorPosition, IteratorType
from kcl_daemon.spark import source_clients
from tests.support.attributing_proxy import AttributingProxy
from tests.support.emulators import REGION, running_emulators, use_dummy_credentials
from tests.support.replay_kinesis import ReplayKinesis, ReplayRecord
from tests.support.spark import start_session
from tests.support.streams import kinesis_client, wait_active

MASTERS = ("local[2]", "local-cluster[1,1,1024]", "local-cluster[2,1,1024]")


def make_stream(kinesis: Any, name: str, shards: int, records: int, size: int) -> dict[str, int]:
    kinesis.create_stream(StreamName=name, ShardCount=shards)
    wait_active(kinesis, name)
    per_shard: dict[str, int] = {}

    def put(offset: int) -> list[str]:
        entries = [
            {"Data": f"{n:010d}".encode().ljust(size, b"."), "PartitionKey": f"key-{n}"}
            for n in range(offset, min(records, offset + 500))
        ]
        response = kinesis.put_records(StreamName=name, Records=entries)
        assert not response.get("FailedRecordCount")
        return [result["ShardId"] for result in response["Records"]]

    with ThreadPoolExecutor(4) as pool:
        for shard_ids in pool.map(put, range(0, records, 500)):
            for shard_id in shard_ids:
                per_shard[shard_id] = per_shard.get(shard_id, 0) + 1
    return per_shard


def project_kinesis(endpoint: str) -> Kinesis:
    """The project's own Kinesis client for ``endpoint``: its page parser is the one the executors use."""
    return source_clients.kinesis_for(REGION, endpoint, source_clients.Credentials())


def project_pages(
    kinesis: Kinesis, stream: str, shard_id: str, count: int
) -> Iterator[tuple[AnyRawRecord, ...]]:
    """The first ``count`` records of a shard, page by page from its trim horizon."""
    iterator: str | None = kinesis.get_shard_iterator(
        stream, shard_id, IteratorPosition(IteratorType.TRIM_HORIZON)
    )
    seen = 0
    while seen < count:
        assert iterator is not None, f"{shard_id} ended after {seen} records, not {count}"
        page = kinesis.get_records(iterator, 10_000)
        seen += len(page.records)
        yield page.records
        iterator = page.next_iterator


def copy_for_replay(endpoint: str, stream: str, per_shard: dict[str, int]) -> dict[str, list[ReplayRecord]]:
    """Every record of ``stream``, read from ``endpoint`` once, for :class:`ReplayKinesis` to serve."""
    kinesis = project_kinesis(endpoint)
    return {
        shard_id: [
            ReplayRecord(
                r.sequence_number,
                r.approximate_arrival_timestamp,
                r.data_b64 if isinstance(r, EncodedRawRecord) else base64.b64encode(r.data).decode(),
                r.partition_key,
            )
            for page in project_pages(kinesis, stream, shard_id, count)
            for r in page
        ]
        for shard_id, count in per_shard.items()
    }


def kinesalite_pid(endpoint: str) -> int:
    """The pid of the kinesalite process listening on ``endpoint``'s port."""
    port = endpoint.rsplit(":", 1)[1]
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                line = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            except OSError:
                continue
            if b"kinesalite" in line and f"--port\x00{port}\x00".encode() in line:
                return int(entry.name)
    raise RuntimeError(f"no kinesalite process on port {port}")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class EmulatorBusy:
    """The share of a core kinesalite spent over each timed span (``busy`` in the JSON): 1.0 means the
    emulator, a single-threaded Node process, served as fast as it can, so no reader could be faster."""

    def __init__(self, endpoint: str) -> None:
        self.pid = kinesalite_pid(endpoint)
        self.shares: list[float] = []

    def timed(self, span: Callable[[], float]) -> float:
        cpu = cpu_s(self.pid)
        wall = span()
        self.shares.append(round((cpu_s(self.pid) - cpu) / wall, 2))
        return wall


def raw_loop_s(kinesis: Any, stream: str, per_shard: dict[str, int]) -> float:
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


def project_loop_s(endpoint: str, stream: str, per_shard: dict[str, int]) -> float:
    """The raw loop with the project's own Kinesis client in place of boto3's: a thread per shard in one
    process."""
    kinesis = project_kinesis(endpoint)

    def read(shard_id: str) -> int:
        return sum(len(page) for page in project_pages(kinesis, stream, shard_id, per_shard[shard_id]))

    start = time.perf_counter()
    with ThreadPoolExecutor(len(per_shard)) as pool:
        assert sum(pool.map(read, per_shard)) == sum(per_shard.values())
    return time.perf_counter() - start


class RunnerCpu:
    """CPU seconds of the source runner process started after this object, sampled every 0.05 s.

    /proc is scanned for it only until it is found (a scan reads every process's command line: about
    5 ms of CPU on the cores the query shares); then only its stat file is read."""

    MARKER = b"python_streaming_source_runner"

    def __init__(self) -> None:
        self.before = set(self._pids())
        self.cpu: dict[int, float] = {}
        self.marks: list[float] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _pids(self) -> list[int]:
        found = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    if self.MARKER in Path(f"/proc/{entry.name}/cmdline").read_bytes():
                        found.append(int(entry.name))
                except OSError:
                    continue
        return found

    def _loop(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        found: list[int] = []
        while not self.done.wait(0.05):
            if not found:
                found = [pid for pid in self._pids() if pid not in self.before]
            for pid in found:
                try:
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                self.cpu[pid] = (int(fields[11]) + int(fields[12])) / tick

    def now(self) -> float:
        return sum(self.cpu.values())

    def stop(self) -> float:
        self.done.set()
        self.thread.join()
        return self.now()


def run_query(
    spark: Any, options: dict[str, str], out: Path, chk: Path, sink: str, *, watch: bool = True
) -> dict[str, Any]:
    """One AvailableNow query; ``watch``: poll its progress every 0.02 s for the first batch's end (the
    steady CPU figure needs it); else just wait for the end (the timed query: polling costs CPU)."""
    frame = spark.readStream.format("kinesis").options(**options).load()
    sampler = RunnerCpu()
    start = time.perf_counter()
    writer = frame.writeStream.format(sink)
    if sink == "parquet":
        writer = writer.option("path", str(out))
    query = writer.option("checkpointLocation", str(chk)).trigger(availableNow=True).start()
    first_batch_cpu: float | None = None
    first_batch_rows = 0
    while watch and query.isActive:
        progress = query.recentProgress
        if first_batch_cpu is None and progress:
            first_batch_cpu, first_batch_rows = sampler.now(), progress[0]["numInputRows"]
        time.sleep(0.02)
    query.awaitTermination()
    wall = time.perf_counter() - start
    total_cpu = sampler.stop()
    progress = [dict(p) for p in query.recentProgress]
    if os.environ.get("BENCH_VERBOSE"):
        began = time.strftime("%H:%M:%S", time.gmtime(now := time.time() - (time.perf_counter() - start)))
        began += f".{int(now * 1000) % 1000:03d}"
        print(f"query {options['streamName']}: {wall:.2f} s from start() at {began} UTC", file=sys.stderr)
        for p in progress:
            print("batch", p["batchId"], p["timestamp"], p["numInputRows"], p["durationMs"], file=sys.stderr)
    rows = sum(p["numInputRows"] for p in progress)
    steady_rows = rows - first_batch_rows
    steady_cpu = total_cpu - (first_batch_cpu or 0.0)
    return {
        "wall_s": wall,
        "rows": rows,
        "batches": len([p for p in progress if p["numInputRows"]]),
        "runner_cpu_s": total_cpu,
        "steady_runner_cpu_s_per_10k": steady_cpu / (steady_rows / 10_000) if steady_rows else None,
        "latest_offset_ms": sum(p["durationMs"].get("latestOffset", 0) for p in progress),
        "add_batch_ms": sum(p["durationMs"].get("addBatch", 0) for p in progress),
    }


def count_records(kinesis: Any, stream: str) -> int:
    total = 0
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while True:
            page = kinesis.get_records(ShardIterator=iterator, Limit=10000)
            total += len(page["Records"])
            if not page["Records"] and page.get("MillisBehindLatest", 0) == 0:
                break
            iterator = page["NextShardIterator"]
    return total


def sink_bench(spark: Any, kinesis: Any, kinesis_endpoint: str, records: int, size: int) -> dict[str, Any]:
    raw_stream, spark_stream = f"sink-raw-{os.getpid()}", f"sink-spark-{os.getpid()}"
    for name in (raw_stream, spark_stream):
        kinesis.create_stream(StreamName=name, ShardCount=4)
        wait_active(kinesis, name)
    start = time.perf_counter()
    for offset in range(0, records, 500):
        entries = [
            {"Data": f"{n:010d}".encode().ljust(size, b"."), "PartitionKey": f"key-{n}"}
            for n in range(offset, min(records, offset + 500))
        ]
        assert not kinesis.put_records(StreamName=raw_stream, Records=entries).get("FailedRecordCount")
    raw = time.perf_counter() - start
    frame = spark.range(records, numPartitions=2).selectExpr(
        "cast(id as string) as partitionKey", f"cast(rpad(cast(id as string), {size}, '.') as binary) as data"
    )
    frame.cache().count()  # the rows exist before the clock starts: the sink is measured, not range()
    start = time.perf_counter()
    (
        frame.write.format("kinesis")
        .mode("append")
        .option("streamName", spark_stream)
        .option("region", REGION)
        .option("endpointUrl", kinesis_endpoint)
        .save()
    )
    whole = time.perf_counter() - start
    written = count_records(kinesis, spark_stream)
    assert written == records, f"the sink wrote {written} records, not {records}"
    return {"records": records, "raw_put_s": raw, "sink_s": whole, "ratio": raw / whole}


def child(args: argparse.Namespace) -> dict[str, Any]:
    use_dummy_credentials()
    kinesis = kinesis_client(args.kinesis_endpoint, read_timeout_s=60)
    per_shard = json.loads(args.per_shard)
    raw_busy, query_busy = EmulatorBusy(args.kinesalite_endpoint), EmulatorBusy(args.kinesalite_endpoint)

    def raw_loop() -> float:
        return raw_busy.timed(lambda: raw_loop_s(kinesis, args.stream, per_shard))

    raw_before = raw_loop()
    with AttributingProxy(args.kinesis_endpoint) as proxy, tempfile.TemporaryDirectory() as home_dir:
        if args.compiled_pyspark_zip:
            from bench._spark_home import compiled_spark_home

            os.environ["SPARK_HOME"] = str(compiled_spark_home(Path(home_dir)))
        started = time.perf_counter()
        spark = start_session(args.master, "kcl-spark-cluster-bench")
        session_s = time.perf_counter() - started
        raw_after = raw_loop()
        raw = min(raw_before, raw_after)

        def options(stream: str, *, attributed: bool = False) -> dict[str, str]:
            return {
                "streamName": stream,
                "region": REGION,
                "endpointUrl": proxy.endpoint if attributed else args.kinesis_endpoint,
                "dynamoDbEndpointUrl": args.dynamodb_endpoint,
                "startingPosition": "TRIM_HORIZON",
                "readMode": args.read_mode,
                "shardDiscoveryIntervalMs": "10000",
            }

        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for attributed in (False, True):  # both Kinesis clients of the source runner warm
                warmup = options(args.warmup_stream, attributed=attributed)
                run_query(spark, warmup, root / f"w-out-{attributed}", root / f"w-chk-{attributed}", "noop")
            proxy.reset()
            measured = {
                **options(args.stream, attributed=args.proxy == "measured"),
                **dict(o.split("=", 1) for o in args.source_option),
            }
            if args.batch:
                measured["maxRecordsPerBatch"] = str(args.batch)
            timed: dict[str, Any] = {}

            def query(out: str, chk: str) -> float:
                timed.update(run_query(spark, measured, root / out, root / chk, args.sink, watch=False))
                return float(timed["wall_s"])

            query_busy.timed(lambda: query("out", "chk"))
            result = dict(timed)
            rounds = [{"raw_s": raw, "query_s": result["wall_s"]}]
            raws = [raw_after]
            for again in range(1, args.repeat):  # more rounds: a raw loop, then the query again
                raws.append(raw_loop())
                wall = query_busy.timed(functools.partial(query, f"out{again}", f"chk{again}"))
                rounds.append({"raw_s": raws[-1], "query_s": wall})
            if args.repeat > 1:  # each round's raw figure: the best of the raw loops on either side
                raws.append(raw_loop())
                for i, entry in enumerate(rounds[1:], start=1):
                    entry["raw_s"] = min(raws[i], raws[i + 1])
            for entry in rounds:
                entry["ratio"] = round(entry["raw_s"] / entry["query_s"], 2)
                entry["raw_s"], entry["query_s"] = round(entry["raw_s"], 2), round(entry["query_s"], 2)
            project_loops = [project_loop_s(args.kinesis_endpoint, args.stream, per_shard) for _ in range(2)]
            steady = run_query(
                spark,
                {
                    **options(args.stream, attributed=args.proxy == "cpu-run"),
                    "maxRecordsPerBatch": str(args.cpu_batch),
                },
                root / "cpu-out",
                root / "cpu-chk",
                "noop",
            )
            fetched = proxy.records()
            calls = {role: tally["calls"] for role, tally in proxy.report().items()}
        sink = (
            sink_bench(spark, kinesis, args.kinesis_endpoint, args.sink_records, args.size)
            if args.sink_records
            else None
        )
        spark.stop()
    records = sum(per_shard.values())
    assert result["rows"] == records, f"the query read {result['rows']} rows, not {records}"
    return {
        "master": args.master,
        "read_mode": args.read_mode,
        "records": records,
        "shards": len(per_shard),
        "session_start_s": round(session_s, 1),
        "raw_loop_rps": round(records / raw),
        "whole_query_rps": round(records / result["wall_s"]),
        "ratio_vs_raw": round(raw / result["wall_s"], 2),
        "whole_query_s": round(result["wall_s"], 2),
        "raw_loop_s": round(raw, 2),
        "rounds": rounds,
        "raw_loops_s": [round(raw_before, 2), *(round(r, 2) for r in raws)],
        "median_ratio": statistics.median(entry["ratio"] for entry in rounds),
        "project_client_loops_s": [round(s, 2) for s in project_loops],
        "median_query_vs_project_loop": round(
            min(project_loops) / statistics.median(entry["query_s"] for entry in rounds), 2
        ),
        "endpoint": args.endpoint,
        "emulator_busy": {"raw_loops": raw_busy.shares, "queries": query_busy.shares},
        "batches": result["batches"],
        "latest_offset_ms": result["latest_offset_ms"],
        "add_batch_ms": result["add_batch_ms"],
        "attributed_run": args.proxy,
        "fetched_by_role": fetched,
        "calls_by_role": calls,
        "driver_share": round(fetched.get("driver", 0) / records, 5),
        "fetched_over_delivered": round(sum(fetched.values()) / records, 4),
        "runner_cpu_s": round(result["runner_cpu_s"], 2),
        "cpu_run_batches": steady["batches"],
        "steady_runner_cpu_s_per_10k": None
        if steady["steady_runner_cpu_s_per_10k"] is None
        else round(steady["steady_runner_cpu_s_per_10k"], 4),
        "sink": sink,
        "compiled_pyspark_zip": args.compiled_pyspark_zip,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--masters", default=" ".join(MASTERS), help="masters separated by spaces")
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--batch", type=int, default=0, help="maxRecordsPerBatch (0: unset)")
    parser.add_argument("--cpu-batch", type=int, default=20_000, help="maxRecordsPerBatch of the CPU run")
    parser.add_argument("--sink", choices=("noop", "parquet"), default="noop")
    parser.add_argument("--read-mode", choices=("executor", "driver"), default="executor")
    parser.add_argument("--sink-records", type=int, default=100_000, help="0: no sink benchmark")
    parser.add_argument(
        "--proxy",
        choices=("cpu-run", "measured"),
        default="cpu-run",
        help="which query reads through the attributing proxy (the other reads the emulator directly)",
    )
    parser.add_argument(
        "--source-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an extra option of the timed query (repeatable), e.g. maxRecordsPerShardPerBatch=200000",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="time the query this many times, a raw loop between rounds; each round's ratio and the median",
    )
    parser.add_argument(
        "--compiled-pyspark-zip",
        action="store_true",
        help="run Spark from a Spark home whose pyspark.zip carries bytecode (bench/_spark_home.py)",
    )
    parser.add_argument(
        "--endpoint",
        choices=("kinesalite", "replay"),
        default="kinesalite",
        help="what both readers read: kinesalite, or a copy of the stream served from memory "
        "(tests/support/replay_kinesis.py), which no reader here can keep busy",
    )
    parser.add_argument("--json", action="store_true")
    # a child's arguments (set by the parent)
    parser.add_argument("--master", help=argparse.SUPPRESS)
    parser.add_argument("--kinesis-endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--kinesalite-endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--dynamodb-endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--stream", help=argparse.SUPPRESS)
    parser.add_argument("--warmup-stream", help=argparse.SUPPRESS)
    parser.add_argument("--per-shard", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.master:
        print(json.dumps(child(args)))
        return

    results = []
    with running_emulators(shard_limit=200) as emulators, ReplayKinesis(emulators.kinesis_endpoint) as replay:
        kinesis = kinesis_client(emulators.kinesis_endpoint, read_timeout_s=60)
        started = time.perf_counter()
        per_shard = make_stream(kinesis, "measured", args.shards, args.records, args.size)
        make_stream(kinesis, "warmup", 1, 100, args.size)
        print(f"put {args.records} records in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        endpoint = emulators.kinesis_endpoint
        if args.endpoint == "replay":
            replay.hold("measured", copy_for_replay(endpoint, "measured", per_shard))
            endpoint = replay.endpoint
        for master in args.masters.split():
            command = [
                sys.executable,
                __file__,
                f"--master={master}",
                f"--kinesis-endpoint={endpoint}",
                f"--kinesalite-endpoint={emulators.kinesis_endpoint}",
                f"--dynamodb-endpoint={emulators.dynamodb_endpoint}",
                "--stream=measured",
                "--warmup-stream=warmup",
                f"--per-shard={json.dumps(per_shard)}",
                f"--batch={args.batch}",
                f"--cpu-batch={args.cpu_batch}",
                f"--sink={args.sink}",
                f"--read-mode={args.read_mode}",
                f"--proxy={args.proxy}",
                *(f"--source-option={o}" for o in args.source_option),
                f"--size={args.size}",
                f"--sink-records={args.sink_records}",
                f"--repeat={args.repeat}",
                *(["--compiled-pyspark-zip"] if args.compiled_pyspark_zip else []),
            ]
            done = subprocess.run(command, check=False, capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"{master} failed:\n{done.stderr[-6000:]}")
            if os.environ.get("BENCH_VERBOSE"):
                print(done.stderr[-20000:], file=sys.stderr)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            results.append(result)
            if args.json:
                print(json.dumps(result))
    if not args.json:
        print_table(args, results)


def print_table(args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    print(
        f"{args.records} records of {args.size} bytes in {args.shards} shards, "
        f"maxRecordsPerBatch {args.batch}, {args.read_mode} reads:"
    )
    print(
        "master                   | raw loop rec/s | whole query rec/s | ratio | batches "
        "| driver / executor records fetched | fetched/delivered | runner CPU s per 10k (steady)"
    )
    print(f"(records fetched: counted in the {args.proxy} query)")
    for r in results:
        fetched = r["fetched_by_role"]
        print(
            f"{r['master']:<24} | {r['raw_loop_rps']:>14,} | {r['whole_query_rps']:>17,} "
            f"| {r['ratio_vs_raw']:>5} | {r['batches']:>7} "
            f"| {fetched.get('driver', 0):>8} / {fetched.get('executor', 0):<8} "
            f"| {r['fetched_over_delivered']:>17} | {r['steady_runner_cpu_s_per_10k']}"
        )
    for r in results:
        if len(r["rounds"]) > 1:
            each = ", ".join(f"{e['raw_s']} / {e['query_s']} s = {e['ratio']}" for e in r["rounds"])
            print(f"rounds on {r['master']} (raw / query): {each}; median ratio {r['median_ratio']}")
    for r in results:
        if r["sink"]:
            s = r["sink"]
            print(
                f"sink on {r['master']}: {s['records'] / s['sink_s']:,.0f} records/s against a raw "
                f"PutRecords loop's {s['records'] / s['raw_put_s']:,.0f} (ratio {s['ratio']:.2f})"
            )


if __name__ == "__main__":
    main()
