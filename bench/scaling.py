"""One daemon from 4 to 256 shards: what a worker costs as its shard count grows, kcl-daemon against the
Java MultiLangDaemon 3.1.3 (when installed), with a no-op and a working amazon_kclpy processor.

Per shard count a fresh kinesalite stream gets ``--backlog`` records of 100 bytes per shard (``--total``
caps the sum), once. Then, per run, for each processor (``kclpy_noop_processor.py``, and
``kclpy_working_processor.py``: decodes every record, appends it to a file, checkpoints every 1,000
records), each daemon runs one session - kcl-daemon and Java alternate, and which goes first alternates
from run to run. A session is one daemon process with a fresh application whose lease table holds one
unowned lease per shard at TRIM_HORIZON (created before the daemon starts, so neither waits for an empty
table's first shard sync), and goes through four phases:

1. **start-up**: from starting the process until every shard's first batch reached its child;
2. **full drain**: every record in the stream, read as fast as the daemon can. records/s is counted from
   the start of the daemon's first GetRecords call (kinesalite logs every call) to the end of the batch
   that completed the last shard's backlog, so both daemons are timed from their first read: Java 3.x
   reads two pages per shard ahead while its consumers start, and a window opened at the first delivery
   (still printed, "from 1st delivery") left those reads out of Java's time. CPU-seconds per 10k records
   of the daemon process alone (children excluded) over the same window;
3. **idle**: no producer for ``--idle-s``: GetRecords calls per idle shard-second (counted by
   kinesalite itself, so the Java SDK's calls through the h2c proxy count alike), daemon CPU
   milliseconds per idle shard-second, and their quotient: the daemon's CPU per idle GetRecords call
   (everything the idle daemon does - renewals, timers - divided over its calls, as for Java);
4. **steady**: a producer puts ``--rate`` records/s per shard for ``--steady-s`` (after ``--warmup-s``);
   records/s delivered and CPU-seconds per 10k records over that window; at its end the daemon's RSS,
   the RSS of the daemon and all its children, threads and open file descriptors.

kcl-daemon runs twice per run and processor (unless ``--no-botocore``): as it is, its GetRecords and
GetShardIterator calls on the lean request path (``kcl-daemon``), and with them on botocore
(``kcl-daemon-botocore``, through ``_botocore_reads.py``), each beside Java in the same run.

Records a session's steady phase put are read by the next sessions' drains (after the backlog); the drain
is judged on each shard's backlog. Figures are printed per point as min/median/max over the runs, with
ratios kcl-daemon / Java paired run by run, and written to ``--out`` (``scaling.json``, ``scaling.md``,
``scaling.png``).

    .venv/bin/python bench/scaling.py [--shards 4,16,64,256] [--runs 3] [--processors noop,working]
        [--backlog 2500] [--total 400000] [--rate 20] [--no-java] [--no-botocore] [--out bench/results]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from _daemons import (
    PROCESSORS,
    BatchLog,
    DaemonProcess,
    Sample,
    cpu_seconds,
    daemon_argv,
    daemon_env,
    h2c_proxy,
    java_jars,
    properties,
    sample,
)
from _local import quiet_logs, unique
from _memory_kinesis import MemoryKinesis
from _streams import Producer, prepare_leases

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.provision import MAX_PUT_RECORDS_ENTRIES, ensure_stream
from kcl_daemon.local.producer import open_hash_ranges, partition_keys_for
from tests.support.emulators import Backend, Emulator, free_port, use_dummy_credentials

RESULTS: Final = Path(__file__).resolve().parent / "results"
BOTOCORE_READS: Final = Path(__file__).resolve().parent / "_botocore_reads.py"
#: the daemons a session can run, in the order of the table
DAEMONS: Final = ("kcl-daemon", "kcl-daemon-botocore", "java")
PAYLOAD: Final = b"x" * 100
POLL_S: Final = 0.05


# -- the stream ------------------------------------------------------------------------------------------


class Stream:
    """A stream, its partition keys (one per shard, interleaved) and the records put into each shard."""

    def __init__(self, clients: AwsClients, shards: int) -> None:
        self.clients = clients
        self.name = unique("scaling")
        ensure_stream(clients.kinesis, self.name, shards)
        listed = Kinesis(clients.kinesis).list_shards(self.name)
        self.shards = listed
        self.keys = partition_keys_for(open_hash_ranges(listed), per_range=1)
        self.per_shard: Counter[str] = Counter()
        self._next = 0
        self._lock = threading.Lock()

    def put(self, count: int) -> None:
        """``count`` records, round-robin over the shards, in PutRecords calls of up to 500."""
        while count > 0:
            n = min(MAX_PUT_RECORDS_ENTRIES, count)
            with self._lock:
                first, self._next = self._next, self._next + n
            keys = self.keys
            entries = [{"Data": PAYLOAD, "PartitionKey": keys[(first + i) % len(keys)]} for i in range(n)]
            response = self.clients.kinesis.put_records(StreamName=self.name, Records=entries)  # type: ignore[arg-type]
            if response.get("FailedRecordCount"):
                raise RuntimeError(f"PutRecords rejected {response['FailedRecordCount']} record(s)")
            with self._lock:
                self.per_shard.update(result["ShardId"] for result in response["Records"])
            count -= n

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self.per_shard)

    def fill(self, count: int) -> None:
        """The backlog: ``count`` records."""
        self.put(count)


class HeldStream(Stream):
    """A stream whose records the in-memory endpoint makes and serves (``--endpoint memory``): kinesalite
    holds the stream's shape (ListShards), the endpoint its records; nothing is put into kinesalite."""

    def __init__(self, clients: AwsClients, shards: int, memory: MemoryKinesis) -> None:
        super().__init__(clients, shards)
        self.memory = memory
        self.memory.hold(self.name, [s.shard_id for s in self.shards], 0)

    def fill(self, count: int) -> None:
        held = self.memory.hold(self.name, [s.shard_id for s in self.shards], count // len(self.shards))
        with self._lock:
            self.per_shard = held

    def put(self, count: int) -> None:
        held = self.memory.append(self.name, count)
        with self._lock:
            self.per_shard = held


def first_read(call_log: Path, offset: int, after: float) -> float:
    """The start (epoch seconds) of the first GetRecords call kinesalite logged from ``offset`` on that
    began at or after ``after``: when the daemon under test started reading (only it reads)."""
    with call_log.open("rb") as handle:
        handle.seek(offset)
        for line in handle:
            start = float(line.split()[0])
            if start >= after:
                return start
    raise RuntimeError(f"no GetRecords call in {call_log} after {after}")


def kinesis_calls(counts_endpoint: str) -> Counter[str]:
    with urllib.request.urlopen(counts_endpoint, timeout=5) as response:  # noqa: S310 - 127.0.0.1
        raw = json.loads(response.read())
    return Counter({target.rpartition(".")[2]: n for target, n in raw.items()})


def _py_spy() -> str:
    """The virtualenv's py-spy, else one on PATH (installed apart: it is not a dependency)."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy") or str(beside)


class PySpy:
    """``py-spy record`` of kcl-daemon over one phase (collapsed stacks of the thread holding the GIL, one
    root frame per thread; speedscope opens them as they are), for ``--profile DIR``; does nothing for
    Java or without a directory."""

    def __init__(self, directory: Path | None, pid: int, daemon: str) -> None:
        self._directory, self._pid, self._daemon = directory, pid, daemon
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, name: str) -> None:
        self.stop()
        if self._directory is None or self._daemon != "kcl-daemon":
            return
        self._directory.mkdir(parents=True, exist_ok=True)
        output = str(self._directory / f"{name}.txt")
        argv = [_py_spy(), "record", "--pid", str(self._pid)]
        # --nonblocking: by default py-spy stops the process for every sample, which with a hundred
        # threads at 256 shards cut the steady delivery from ~900 to 109 records/s
        argv += [
            "--rate",
            "100",
            "--gil",
            "--threads",
            "--nonblocking",
            "--format",
            "raw",
            "--output",
            output,
        ]
        self._process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=30)


# -- one session -------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Session:
    """The figures of one daemon session (see the module docstring)."""

    daemon: str
    processor: str
    shards: int
    run: int
    max_records: int = 0
    startup_s: float = float("nan")
    drain_records: int = 0
    drain_per_s: float = float("nan")
    drain_delivery_per_s: float = float("nan")  # the old window: from the first batch delivered
    drain_cpu_per_10k: float = float("nan")
    idle_calls_per_shard_s: float = float("nan")
    idle_cpu_ms_per_shard_s: float = float("nan")
    idle_cpu_ms_per_call: float = float("nan")
    steady_target_per_s: float = float("nan")
    steady_per_s: float = float("nan")
    steady_held: float = float("nan")  # delivered / produced over the steady window
    steady_cpu_per_10k: float = float("nan")
    drain_kinesis_busy: float = float("nan")  # % of one core the Kinesis endpoint used over the drain
    drain_dynamodb_busy: float = float("nan")  # the same for dynalite
    steady_dynamodb_busy: float = float("nan")
    rss_mb: float = float("nan")
    peak_rss_mb: float = float("nan")
    total_rss_mb: float = float("nan")
    children: int = 0
    threads: int = 0
    fds: int = 0
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        notes = f" [{'; '.join(self.notes)}]" if self.notes else ""
        return (
            f"run {self.run} {self.processor:<7} {self.daemon:<10} start-up {self.startup_s:5.1f}s  "
            f"drain {self.drain_per_s:8,.0f}/s (from 1st delivery {self.drain_delivery_per_s:,.0f}/s) "
            f"{self.drain_cpu_per_10k:.3f} CPU-s/10k  "
            f"steady {self.steady_per_s:7,.0f}/s (held {self.steady_held:.3f}) "
            f"{self.steady_cpu_per_10k:.3f}  "
            f"idle {self.idle_calls_per_shard_s:.2f} calls {self.idle_cpu_ms_per_shard_s:.3f} ms/shard-s "
            f"{self.idle_cpu_ms_per_call:.3f} ms/call  "
            f"RSS {self.rss_mb:.0f}/{self.total_rss_mb:,.0f} MB  threads {self.threads} fds {self.fds}{notes}"
        )


def share_of_core(timeline: Timeline | None, start: float, end: float) -> float:
    """Percent of one core a process used between two instants (epoch seconds), from its timeline."""
    if timeline is None or not timeline.points or end <= start:
        return float("nan")
    return (timeline.cpu_at(end) - timeline.cpu_at(start)) / (end - start) * 100


class Timeline:
    """(epoch seconds, daemon CPU-seconds) samples, to read the CPU at any instant in between."""

    def __init__(self) -> None:
        self.points: list[tuple[float, float]] = []

    def add(self, epoch: float, cpu: float) -> None:
        self.points.append((epoch, cpu))

    def cpu_at(self, epoch: float) -> float:
        points = self.points
        if epoch <= points[0][0]:
            return points[0][1]
        for (t0, c0), (t1, c1) in itertools.pairwise(points):
            if t0 <= epoch <= t1:
                return c0 + (c1 - c0) * ((epoch - t0) / (t1 - t0) if t1 > t0 else 0.0)
        return points[-1][1]


@dataclass(frozen=True, slots=True)
class Setup:
    backend: Backend
    clients: AwsClients
    counts: str  # kinesalite's call counts
    java_kinesis: str  # the h2c proxy in front of kinesalite ("" without Java)
    jars: Path | None
    max_records: int  # per shard count: see main
    idle_ms: int
    idle_s: float
    rate: float
    warmup_s: float
    steady_s: float
    limit_s: float
    call_log: Path  # kinesalite's line per GetRecords call: when each daemon starts reading
    profile: Path | None = None
    memory: MemoryKinesis | None = None  # --endpoint memory: GetRecords served from memory
    #: "kinesis" (the endpoint GetRecords is read from) and "dynamodb" (dynalite): how busy each was
    emulator_pids: dict[str, int] = field(default_factory=dict)

    def kinesis_for(self, daemon: str) -> str:
        """The Kinesis endpoint a daemon is given: Java's speaks h2c (the memory endpoint's second port, or
        the proxy in front of kinesalite)."""
        if self.memory is not None:
            return self.memory.h2c_endpoint if daemon == "java" else self.memory.endpoint
        return self.java_kinesis if daemon == "java" else self.backend.kinesis_endpoint

    def get_records_calls(self) -> int:
        if self.memory is not None:
            return self.memory.stats().calls["GetRecords"]
        return kinesis_calls(self.counts)["GetRecords"]

    def mark(self) -> None:
        if self.memory is not None:
            self.memory.mark()

    def first_read(self, offset: int, after: float) -> float:
        """When the daemon under test made its first GetRecords call (epoch seconds)."""
        if self.memory is not None:
            first = self.memory.stats().first_get_records_at
            if first is None:
                raise RuntimeError("no GetRecords call since the session started")
            return first
        return first_read(self.call_log, offset, after)


def run_session(setup: Setup, stream: Stream, daemon: str, processor: str, run: int, work: Path) -> Session:
    shards = len(stream.shards)
    figures = Session(daemon, processor, shards, run, setup.max_records)
    app = unique(f"scale-{daemon}")
    prepare_leases(setup.clients, app, stream.shards)
    session_dir = work / f"{daemon}-{processor}-{shards}-{run}"
    (session_dir / "out").mkdir(parents=True)
    props = session_dir / "app.properties"
    java = daemon == "java"
    props.write_text(
        properties(
            processor=PROCESSORS[processor],
            stream=stream.name,
            app=app,
            kinesis=setup.kinesis_for(daemon),
            dynamodb=setup.backend.dynamodb_endpoint,
            java=java,
            max_records=setup.max_records,
            idle_ms=setup.idle_ms,
        )
    )
    batch_log = BatchLog(session_dir / "batches.log")
    backlog = stream.snapshot()
    env = daemon_env({"BENCH_BATCH_LOG": str(batch_log.path), "BENCH_OUTPUT_DIR": str(session_dir / "out")})
    timeline = Timeline()
    busy = {name: Timeline() for name in setup.emulator_pids}
    calls_offset = setup.call_log.stat().st_size if setup.call_log.exists() else 0
    setup.mark()
    epoch0 = time.time()
    argv = daemon_argv("kcl-daemon" if daemon == "kcl-daemon-botocore" else daemon, props, setup.jars)
    if daemon == "kcl-daemon-botocore":
        argv[1:3] = [str(BOTOCORE_READS)]  # python -m kcl_daemon -> python _botocore_reads.py
    process = DaemonProcess(argv, session_dir, session_dir / "daemon.log", env)
    profile_name = f"{daemon}-{processor}-{shards}-{run}"
    spy = PySpy(setup.profile, process.pid, daemon)
    spy.start(f"{profile_name}-startup")
    delivered: Counter[str] = Counter()
    first_batch: dict[str, float] = {}
    backlog_done: dict[str, float] = {}

    def poll() -> None:
        process.check()
        now = time.time()
        timeline.add(now, sample(process.pid, with_children=False).cpu_s)
        for name, pid in setup.emulator_pids.items():
            with contextlib.suppress(OSError):
                busy[name].add(now, cpu_seconds(pid))
        for batch in batch_log.poll():
            if not batch.records:
                continue
            delivered[batch.shard] += batch.records
            first_batch.setdefault(batch.shard, batch.start)
            if batch.shard not in backlog_done and delivered[batch.shard] >= backlog[batch.shard]:
                backlog_done[batch.shard] = batch.end

    def wait_until(done: Any, what: str) -> None:
        deadline = time.monotonic() + setup.limit_s
        while not done():
            if time.monotonic() > deadline:
                tail = "\n".join(process.log.read_text(errors="replace").splitlines()[-30:])
                raise TimeoutError(
                    f"{daemon}, {shards} shards: {what} not done after {setup.limit_s}s; "
                    f"{sum(delivered.values())} records delivered; the daemon's log ends:\n{tail}"
                )
            time.sleep(POLL_S)
            poll()

    try:
        wait_until(lambda: len(first_batch) >= shards, "start-up")
        figures.startup_s = max(first_batch.values()) - epoch0
        spy.start(f"{profile_name}-drain")
        wait_until(lambda: len(backlog_done) >= shards, "drain")
        drain_end = max(backlog_done.values())
        drain_start = setup.first_read(calls_offset, epoch0)
        delivery_start = min(first_batch.values())
        drained = sum(b.records for b in batch_log.batches if b.records and b.end <= drain_end + 1e-6)
        figures.drain_records = drained
        figures.drain_per_s = drained / (drain_end - drain_start)
        figures.drain_delivery_per_s = drained / (drain_end - delivery_start)
        cpu = timeline.cpu_at(drain_end) - timeline.cpu_at(drain_start)
        figures.drain_cpu_per_10k = cpu / drained * 10000
        figures.drain_kinesis_busy = share_of_core(busy.get("kinesis"), drain_start, drain_end)
        figures.drain_dynamodb_busy = share_of_core(busy.get("dynamodb"), drain_start, drain_end)
        times = {"started": epoch0, "drain_start": delivery_start, "first_read": drain_start}
        times["drain_end"] = drain_end
        (session_dir / "times.json").write_text(json.dumps({**times, "backlog": dict(backlog)}) + "\n")

        # everything in the stream delivered, then idle
        total = sum(stream.snapshot().values())
        wait_until(lambda: sum(delivered.values()) >= total, "reading the rest")
        time.sleep(2.0)
        poll()
        spy.start(f"{profile_name}-idle")
        calls0, cpu0, t0 = (
            setup.get_records_calls(),
            sample(process.pid, with_children=False),
            time.monotonic(),
        )
        time.sleep(setup.idle_s)
        calls1, cpu1, t1 = (
            setup.get_records_calls(),
            sample(process.pid, with_children=False),
            time.monotonic(),
        )
        shard_seconds = shards * (t1 - t0)
        figures.idle_calls_per_shard_s = (calls1 - calls0) / shard_seconds
        figures.idle_cpu_ms_per_shard_s = (cpu1.cpu_s - cpu0.cpu_s) * 1000 / shard_seconds
        idle_calls = calls1 - calls0
        if idle_calls:
            figures.idle_cpu_ms_per_call = (cpu1.cpu_s - cpu0.cpu_s) * 1000 / idle_calls
        poll()

        # steady producer
        target = setup.rate * shards
        figures.steady_target_per_s = target
        with Producer(stream, target) as producer:
            time.sleep(setup.warmup_s)
            poll()
            spy.start(f"{profile_name}-steady")
            window_start = time.time()
            before = sum(delivered.values())
            produced_before = sum(stream.snapshot().values())
            cpu_start = sample(process.pid, with_children=False).cpu_s
            end_at = time.monotonic() + setup.steady_s
            while time.monotonic() < end_at:
                time.sleep(POLL_S * 4)
                poll()
            window = time.time() - window_start
            after = sum(delivered.values())
            produced = sum(stream.snapshot().values()) - produced_before
            end_sample: Sample = sample(process.pid)
            if producer.behind_s > 1.0:
                figures.notes.append(f"producer fell {producer.behind_s:.1f}s behind")
        got = after - before
        figures.steady_per_s = got / window
        figures.steady_held = got / produced if produced else float("nan")
        figures.steady_dynamodb_busy = share_of_core(
            busy.get("dynamodb"), window_start, window_start + window
        )
        figures.steady_cpu_per_10k = (end_sample.cpu_s - cpu_start) / got * 10000 if got else float("nan")
        figures.rss_mb, figures.peak_rss_mb = end_sample.rss_mb, end_sample.peak_rss_mb
        figures.total_rss_mb, figures.children = end_sample.total_rss_mb, end_sample.children
        figures.threads, figures.fds = end_sample.threads, end_sample.fds
        total = sum(stream.snapshot().values())
        with contextlib.suppress(TimeoutError):
            wait_until(lambda: sum(delivered.values()) >= total, "catching up after the steady phase")
    finally:
        spy.stop()
        process.stop(timeout_s=20.0)
    return figures


# -- reporting ---------------------------------------------------------------------------------------------

COLUMNS: Final = [
    ("startup_s", "start-up s", ".1f"),
    ("drain_per_s", "drain records/s", ",.0f"),
    ("drain_delivery_per_s", "drain from 1st delivery /s", ",.0f"),
    ("drain_cpu_per_10k", "drain CPU-s/10k", ".3f"),
    ("steady_per_s", "steady records/s", ",.0f"),
    ("steady_held", "steady delivered / produced", ".3f"),
    ("steady_cpu_per_10k", "steady CPU-s/10k", ".3f"),
    ("idle_calls_per_shard_s", "idle GetRecords/shard-s", ".2f"),
    ("idle_cpu_ms_per_shard_s", "idle CPU ms/shard-s", ".3f"),
    ("idle_cpu_ms_per_call", "daemon CPU ms per idle GetRecords call", ".3f"),
    ("rss_mb", "daemon RSS MB", ".0f"),
    ("total_rss_mb", "RSS with children MB", ",.0f"),
    ("threads", "threads", ".0f"),
    ("fds", "open fds", ".0f"),
    ("drain_kinesis_busy", "Kinesis endpoint % of a core, drain", ".0f"),
    ("drain_dynamodb_busy", "dynalite % of a core, drain", ".0f"),
    ("steady_dynamodb_busy", "dynalite % of a core, steady", ".0f"),
]


def spread(values: list[float], fmt: str) -> str:
    values = [v for v in values if v == v]
    if not values:
        return "-"
    return "/".join(format(v, fmt) for v in (min(values), statistics.median(values), max(values)))


def ratios(ours: list[Session], java: list[Session], key: str) -> list[float]:
    by_run = {s.run: getattr(s, key) for s in java}
    return [getattr(s, key) / by_run[s.run] for s in ours if by_run.get(s.run)]


def markdown(sessions: list[Session]) -> str:
    lines = []
    header = "| shards | processor | daemon | " + " | ".join(label for _, label, _ in COLUMNS) + " |"
    lines += [header, "|" + " --- |" * (3 + len(COLUMNS))]
    points = sorted({(s.shards, s.processor) for s in sessions})
    for shards, processor in points:
        group = [s for s in sessions if s.shards == shards and s.processor == processor]
        by_daemon = {name: [s for s in group if s.daemon == name] for name in DAEMONS}
        for name, rows in by_daemon.items():
            if rows:
                cells = [spread([float(getattr(s, key)) for s in rows], fmt) for key, _, fmt in COLUMNS]
                lines.append(f"| {shards} | {processor} | {name} | " + " | ".join(cells) + " |")
        java = by_daemon["java"]
        for name, label in (("kcl-daemon", "ours"), ("kcl-daemon-botocore", "ours on botocore")):
            if by_daemon[name] and java:
                cells = [spread(ratios(by_daemon[name], java, key), ".2f") for key, _, _ in COLUMNS]
                lines.append(f"| {shards} | {processor} | **{label} / Java** | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def derived(sessions: list[Session]) -> str:
    """The issue's flat-cost figures: CPU per 10k at the largest point against the smallest, RSS per shard."""
    out = []
    for daemon in DAEMONS:
        for processor in sorted({s.processor for s in sessions}):
            rows = [s for s in sessions if s.daemon == daemon and s.processor == processor]
            if not rows:
                continue
            counts = sorted({s.shards for s in rows})
            low, high = counts[0], counts[-1]

            def median(key: str, shards: int, rows: list[Session] = rows) -> float:
                return statistics.median(getattr(s, key) for s in rows if s.shards == shards)

            if high == low:
                out.append(f"{daemon}, {processor}: one shard count only")
                continue
            per_shard = [
                (s.rss_mb - median("rss_mb", low)) / (s.shards - low) for s in rows if s.shards == high
            ]
            steady = median("steady_cpu_per_10k", high) / median("steady_cpu_per_10k", low)
            drain = median("drain_cpu_per_10k", high) / median("drain_cpu_per_10k", low)
            out.append(
                f"{daemon}, {processor}: CPU-s per 10k records at {high} shards = {steady:.2f} x that at "
                f"{low} (steady), {drain:.2f} x (drain); daemon RSS per added shard "
                f"{spread(per_shard, '.2f')} MB"
            )
    return "\n".join(out) + "\n"


#: issue 30's goals per point: (column, kcl-daemon / Java at most or at least, the bound)
GOALS: Final = (
    ("drain_cpu_per_10k", "<=", 0.25),
    ("steady_cpu_per_10k", "<=", 0.25),
    ("drain_per_s", ">=", 1.5),
)
HELD: Final = 0.99  # at the largest shard count: delivered / produced over the steady window, at least


def goals(sessions: list[Session]) -> str:
    """Per point, each goal's ratios against Java (min/median/max, paired run by run) and whether the
    median meets it; kcl-daemon's delivered / produced, judged at the largest shard count."""
    lines = [
        "| shards | processor | " + " | ".join(f"{k} {op} {b:g} x Java" for k, op, b in GOALS) + " | held |"
    ]
    lines.append("|" + " --- |" * (3 + len(GOALS)))
    largest = max((s.shards for s in sessions), default=0)
    for shards, processor in sorted({(s.shards, s.processor) for s in sessions}):
        group = [s for s in sessions if s.shards == shards and s.processor == processor]
        ours = [s for s in group if s.daemon == "kcl-daemon"]
        java = [s for s in group if s.daemon == "java"]
        cells = []
        for key, op, bound in GOALS:
            values = [v for v in ratios(ours, java, key) if v == v]
            if not values:
                cells.append("-")
                continue
            median = statistics.median(values)
            met = median <= bound if op == "<=" else median >= bound
            cells.append(f"{spread(values, '.2f')} {'met' if met else 'MISSED'}")
        held = [s.steady_held for s in ours if s.steady_held == s.steady_held]
        if shards == largest and held:
            median = statistics.median(held)
            cells.append(f"{spread(held, '.3f')} {'met' if median >= HELD else 'MISSED'}")
        else:
            cells.append(spread(held, ".3f"))
        lines.append(f"| {shards} | {processor} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(sessions: list[Session], path: Path) -> bool:
    """The curves as a PNG; False without matplotlib (the ``bench`` extra)."""
    try:
        import matplotlib
    except ImportError:
        return False

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [c for c in COLUMNS if c[0] != "startup_s"] + [("startup_s", "start-up s", ".1f")]
    cols = 4
    rows = (len(keys) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows))
    styles = {"kcl-daemon": "-", "kcl-daemon-botocore": ":", "java": "--"}
    colours = {"noop": "tab:blue", "working": "tab:orange"}
    for axis, (key, label, _) in zip(axes.flat, keys, strict=False):
        for daemon in DAEMONS:
            for processor in sorted({s.processor for s in sessions}):
                rows_ = [s for s in sessions if s.daemon == daemon and s.processor == processor]
                counts = sorted({s.shards for s in rows_})
                if not counts:
                    continue
                med, low, high = [], [], []
                for n in counts:
                    values = [float(getattr(s, key)) for s in rows_ if s.shards == n]
                    values = [v for v in values if v == v] or [float("nan")]
                    m = statistics.median(values)
                    med.append(m)
                    low.append(m - min(values))
                    high.append(max(values) - m)
                axis.errorbar(
                    counts,
                    med,
                    yerr=[low, high],
                    linestyle=styles[daemon],
                    marker="o",
                    color=colours.get(processor, "k"),
                    capsize=3,
                    label=f"{daemon} {processor}",
                )
        axis.set_xscale("log", base=2)
        axis.set_xticks([4, 16, 64, 256])
        axis.set_xticklabels(["4", "16", "64", "256"])
        axis.set_title(label, fontsize=10)
        axis.set_xlabel("shards")
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(keys) :]:
        axis.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower right", fontsize=9)
    fig.suptitle(
        "one daemon, 4 to 256 shards (median, min-max bars): kcl-daemon solid (reads on botocore dotted), "
        "Java 3.1.3 dashed"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


# -- main --------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def emulators(
    log_dir: Path, shard_limit: int, call_log: Path
) -> Iterator[tuple[Backend, str, dict[str, int]]]:
    """kinesalite (with its call counts and log) and dynalite; the backend, the counts' address and the
    emulators' pids (to see how busy each was)."""
    use_dummy_credentials()
    counts_port = free_port()
    kinesalite = Emulator.kinesalite(
        log_dir, shard_limit=shard_limit, counts_port=counts_port, call_log=call_log
    )
    dynalite = Emulator.dynalite(log_dir)
    with contextlib.ExitStack() as stack:
        for emulator in (kinesalite, dynalite):
            stack.callback(emulator.stop)
            emulator.start()
        pids = {
            name: e.process.pid for name, e in (("kinesis", kinesalite), ("dynamodb", dynalite)) if e.process
        }
        yield (
            Backend("kinesalite+dynalite", kinesalite.endpoint, dynalite.endpoint),
            f"http://127.0.0.1:{counts_port}/",
            pids,
        )


QUICK_HELP: Final = "4 and 64 shards, one run, the no-op processor, short phases, no botocore variant"


def quick(args: argparse.Namespace) -> None:
    """``--quick``: a few minutes instead of most of an hour."""
    args.shards, args.runs, args.processors, args.no_botocore = "4,64", 1, "noop", True
    args.idle_s, args.warmup_s, args.steady_s = 3.0, 2.0, 6.0


def _exit_on_signal(number: int, _frame: object) -> None:
    raise SystemExit(128 + number)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", default="4,16,64,256", help="comma-separated shard counts")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--processors", default="noop,working")
    parser.add_argument("--backlog", type=int, default=1000, help="records per shard for the drain")
    parser.add_argument("--min-total", type=int, default=100000, help="at least this many backlog records")
    parser.add_argument(
        "--max-records", type=int, default=10000, help="at most; each shard's backlog takes 3 batches or more"
    )
    parser.add_argument("--idle-ms", type=int, default=1000, help="idleTimeBetweenReadsInMillis")
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=5.0, help="records/s per shard in the steady phase")
    parser.add_argument("--warmup-s", type=float, default=5.0)
    parser.add_argument("--steady-s", type=float, default=15.0)
    parser.add_argument("--limit-s", type=float, default=600.0, help="give up on a phase after this")
    parser.add_argument(
        "--endpoint",
        choices=("memory", "kinesalite"),
        default="memory",
        help="where GetRecords is served from: memory (_memory_kinesis.js, both daemons read it alike) or "
        "kinesalite itself (which caps both daemons near 35k records/s here)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a small subset: {QUICK_HELP}",
    )
    parser.add_argument("--no-java", action="store_true")
    parser.add_argument(
        "--no-botocore", action="store_true", help="skip kcl-daemon with its reads on botocore (before/after)"
    )
    parser.add_argument("--java-only", action="store_true", help="(profiling) run only the Java daemon")
    parser.add_argument("--ours-only", action="store_true", help="(profiling) run only kcl-daemon")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy kcl-daemon's phases into DIR")
    parser.add_argument("--keep", type=Path, default=None, help="keep the logs in this directory")
    parser.add_argument("--out", type=Path, default=None, help="write scaling.{json,md,png} here")
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        default=None,
        help="run nothing: join these scaling.json files (runs of other invocations) into --out",
    )
    args = parser.parse_args()
    if args.quick:
        quick(args)
    if args.merge:
        joined = [Session(**row) for path in args.merge for row in json.loads(path.read_text())]
        write(joined, args.out)
        return
    quiet_logs()
    # SIGTERM (and SIGINT, which a shell's background job ignores) end the run through the cleanups: the
    # daemon under test and its children stopped, the emulators too
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGINT, _exit_on_signal)
    jars = java_jars(disabled=args.no_java or args.ours_only)
    daemons = (
        ["kcl-daemon"] + ([] if args.no_botocore else ["kcl-daemon-botocore"]) + (["java"] if jars else [])
    )
    if args.java_only:
        daemons = ["java"]
    if jars is None:
        print("Java MultiLangDaemon not found or --no-java: kcl-daemon only")
    counts = [int(n) for n in args.shards.split(",")]
    processors = args.processors.split(",")
    sessions: list[Session] = []
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        work = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="scaling-")))
        work.mkdir(parents=True, exist_ok=True)
        backend, counts_endpoint, emulator_pids = stack.enter_context(
            emulators(work, sum(counts) + 10, work / "getrecords.log")
        )
        clients = backend.clients(max_pool_connections=16, read_timeout_s=60.0)
        memory = None
        if args.endpoint == "memory":
            memory = stack.enter_context(MemoryKinesis(backend.kinesis_endpoint, work / "memory_kinesis.log"))
            emulator_pids["kinesis"] = memory.pid
        java_kinesis = stack.enter_context(h2c_proxy(backend.kinesis_endpoint)) if jars and not memory else ""
        setup = Setup(
            backend,
            clients,
            counts_endpoint,
            java_kinesis,
            jars,
            args.max_records,
            args.idle_ms,
            args.idle_s,
            args.rate,
            args.warmup_s,
            args.steady_s,
            args.limit_s,
            work / "getrecords.log",
            args.profile,
            memory,
            emulator_pids,
        )
        for shards in counts:
            stream = HeldStream(clients, shards, memory) if memory else Stream(clients, shards)
            put_started = time.monotonic()
            backlog = max(args.backlog * shards, args.min_total)
            stream.fill(backlog)
            setup = replace(setup, max_records=max(1, min(args.max_records, backlog // shards // 3)))
            print(
                f"\n{shards} shards: {sum(stream.per_shard.values()):,} records of 100 B "
                f"({args.endpoint}) put in "
                f"{time.monotonic() - put_started:.1f}s; maxRecords {setup.max_records}, "
                f"idleTimeBetweenReadsInMillis {args.idle_ms}, steady {args.rate:g} records/s per shard",
                flush=True,
            )
            for run in range(args.runs):
                order = daemons if run % 2 == 0 else daemons[::-1]
                for processor in processors:
                    for daemon in order:
                        session_started = time.monotonic()
                        try:
                            figures = run_session(setup, stream, daemon, processor, run, work)
                        except TimeoutError as exc:  # one session too slow: keep the others' figures
                            print(f"  run {run} {processor} {daemon}: gave up: {exc}", flush=True)
                            continue
                        sessions.append(figures)
                        if args.out is not None:  # so far, in case the run is cut short
                            args.out.mkdir(parents=True, exist_ok=True)
                            partial = json.dumps([asdict(s) for s in sessions], indent=1) + "\n"
                            (args.out / "scaling.partial.json").write_text(partial)
                        print(f"  {figures.line()} ({time.monotonic() - session_started:.0f}s)", flush=True)
    print(f"\n{len(sessions)} sessions in {time.monotonic() - started:.0f}s (min/median/max over runs)")
    write(sessions, args.out)


def write(sessions: list[Session], out: Path | None) -> None:
    """Print the table and the flat-cost figures; with ``out``, also scaling.{json,md,png} there."""
    table = markdown(sessions)
    print()
    print(table)
    print(derived(sessions))
    print(goals(sessions))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "scaling.json").write_text(json.dumps([asdict(s) for s in sessions], indent=1) + "\n")
        (out / "scaling.md").write_text(table + "\n" + derived(sessions) + "\n" + goals(sessions))
        drawn = plot(sessions, out / "scaling.png")
        print(f"wrote {out}/scaling.json, scaling.md" + (", scaling.png" if drawn else " (no matplotlib)"))


if __name__ == "__main__":
    main()
