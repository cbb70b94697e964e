"""The whole process tree against kcl-rs: CPU per 10k records of the daemon plus all its children, and the
tree's RSS, for kcl-rs (PyPI ``kcl-rs``, a Rust KCL with in-process Python processors), kcl-daemon with
the project's kcl_client children, kcl-daemon with amazon_kclpy children, and the Java MultiLangDaemon
3.1.3 with amazon_kclpy children (when installed); on request also kcl-daemon with children on the
project's Node and Go clients, with and without lanes (``--variants kcl-daemon-node,kcl-daemon-node-lanes,
kcl-daemon-go,kcl-daemon-go-lanes``; ``tree_processor.js``, ``tree_go/``, built with the local go).

Every variant runs the same decoding processor (``tree_processor.py``, ``tree_kclpy_processor.py``,
``tree_kclrs_worker.py``): base64-decode each record (the client does it), json-parse it, add up one
field, checkpoint at the end of each batch. Records are ~100-byte JSON objects.

Per shard count a fresh kinesalite stream gets ``--backlog`` records per shard (at least
``--min-total``), once; then per run each variant runs one session (the order rotates from run to run)
with a fresh application whose lease table holds one unowned TRIM_HORIZON lease per shard:

1. **start-up**: until every shard's first batch reached its processor;
2. **drain**: from then until every record in the stream was processed: records/s, and CPU-seconds per
   10k records of the whole tree (the daemon and every process below it; kcl-rs is one process) over
   the same window;
3. **steady**: a producer puts ``--rate`` records/s per shard for ``--warmup-s`` + ``--steady-s``; over
   the steady window, records/s and the tree's CPU-seconds per 10k records; at its end the RSS of the
   whole tree (the sum of every process's VmRSS) and how many processes it has.

Figures are printed per point as min/median/max over the runs, and ratios against kcl-rs and against
Java paired run by run (same run, same stream). kcl-rs runs in a venv of its own
(``.cache/bench-kclrs-venv``, made on demand with ``pip install kcl-rs==0.1.4``, or ``--kclrs-python``).

    .venv/bin/python bench/process_tree.py [--shards 4,16,64] [--runs 3]
        [--variants kcl-rs,kcl-daemon,kcl-daemon-kclpy,java] [--rate 20] [--out DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from _daemons import (
    BatchLog,
    DaemonProcess,
    cpu_seconds,
    daemon_argv,
    daemon_env,
    descendants,
    h2c_proxy,
    java_jars,
    properties,
)
from _local import quiet_logs, unique
from _streams import Producer, prepare_leases

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.provision import MAX_PUT_RECORDS_ENTRIES, ensure_stream
from kcl_daemon.local.producer import open_hash_ranges, partition_keys_for
from tests.support.emulators import Backend, running_emulators

BENCH: Final = Path(__file__).resolve().parent
REPO: Final = BENCH.parent
KCLRS_VERSION: Final = "0.1.4"
KCLRS_VENV: Final = REPO / ".cache" / "bench-kclrs-venv"
PROCESSORS: Final = {
    "kcl-daemon": BENCH / "tree_processor.py",
    "kcl-daemon-lanes": BENCH / "tree_processor.py",
    "kcl-daemon-kclpy": BENCH / "tree_kclpy_processor.py",
    "java": BENCH / "tree_kclpy_processor.py",
}
KCLRS_WORKER: Final = BENCH / "tree_kclrs_worker.py"
#: kcl-daemon with children on the Node and Go clients (not run unless asked for: --variants)
OTHER_CLIENTS: Final = ("kcl-daemon-node", "kcl-daemon-node-lanes", "kcl-daemon-go", "kcl-daemon-go-lanes")
DEFAULT_VARIANTS: Final = ("kcl-rs", "kcl-daemon", "kcl-daemon-lanes", "kcl-daemon-kclpy", "java")
VARIANTS: Final = (*DEFAULT_VARIANTS[:3], *OTHER_CLIENTS, *DEFAULT_VARIANTS[3:])
TREE_GO: Final = BENCH / "tree_go"
POLL_S: Final = 0.25
PAGE_MB: Final = os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


def kclrs_python(requested: Path | None) -> Path:
    """A Python with kcl-rs installed: ``requested``, else ``.cache/bench-kclrs-venv`` (made on demand)."""
    if requested is not None:
        return requested
    python = KCLRS_VENV / "bin" / "python"
    probe = [str(python), "-c", "import kcl_rs"]
    if python.exists() and subprocess.run(probe, capture_output=True, check=False).returncode == 0:
        return python
    subprocess.run([sys.executable, "-m", "venv", str(KCLRS_VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", f"kcl-rs=={KCLRS_VERSION}"], check=True)
    return python


@functools.cache
def child_command(variant: str) -> str:
    """``executableName`` for a Node or Go client variant (the Go processor is built once, offline)."""
    if variant.startswith("kcl-daemon-node"):
        return f"{shutil.which('node') or 'node'} {BENCH / 'tree_processor.js'}"
    cache = REPO / ".cache" / "go"
    binary = REPO / ".cache" / "bench-tree-go" / "tree-processor"
    env = {
        **os.environ,
        "GOCACHE": str(cache / "build"),
        "GOPATH": str(cache / "path"),
        "GOFLAGS": "-mod=mod",
        "GOPROXY": "off",
        "GOTOOLCHAIN": "local",
    }
    subprocess.run(["go", "build", "-o", str(binary), "."], cwd=TREE_GO, env=env, check=True)
    return str(binary)


# -- the process tree ----------------------------------------------------------------------------------


def tree_cpu_s(pid: int, *, below_only: bool = False) -> float:
    """utime + stime of ``pid`` and of every live process below it (``below_only``: without ``pid``)."""
    total = 0.0 if below_only else cpu_seconds(pid)
    for kid in descendants(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            total += cpu_seconds(kid)
    return total


def tree_rss_mb(pid: int) -> tuple[float, int]:
    """The summed RSS of ``pid`` and every live process below it, and how many processes that is."""
    pids = [pid, *descendants(pid)]
    total = 0.0
    for one in pids:
        with contextlib.suppress(OSError):
            total += int(Path(f"/proc/{one}/statm").read_text().split()[1]) * PAGE_MB
    return total, len(pids)


class Timeline:
    """(epoch seconds, CPU-seconds) samples, to read the CPU at any instant in between."""

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

    def between(self, start: float, end: float) -> float:
        return self.cpu_at(end) - self.cpu_at(start)


# -- the stream ------------------------------------------------------------------------------------------


def payload(i: int) -> bytes:
    """A ~100-byte JSON object, as an ordinary producer would write."""
    return json.dumps(
        {"id": i, "customer": f"c{i % 997}", "amount": (i % 1000) / 4, "pad": "x" * 40},
        separators=(",", ":"),
    ).encode()


class Stream:
    """A stream, one partition key per shard, and how many records it holds."""

    def __init__(self, clients: AwsClients, shards: int) -> None:
        self.clients = clients
        self.name = unique("tree")
        ensure_stream(clients.kinesis, self.name, shards)
        self.shards = Kinesis(clients.kinesis).list_shards(self.name)
        self.keys = partition_keys_for(open_hash_ranges(self.shards), per_range=1)
        self.total = 0
        self._lock = threading.Lock()

    def put(self, count: int) -> None:
        while count > 0:
            n = min(MAX_PUT_RECORDS_ENTRIES, count)
            with self._lock:
                first, self.total = self.total, self.total + n
            keys = self.keys
            entries = [
                {"Data": payload(first + i), "PartitionKey": keys[(first + i) % len(keys)]} for i in range(n)
            ]
            response = self.clients.kinesis.put_records(StreamName=self.name, Records=entries)  # type: ignore[arg-type]
            if response.get("FailedRecordCount"):
                raise RuntimeError(f"PutRecords rejected {response['FailedRecordCount']} record(s)")
            count -= n


# -- one session ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class Session:
    variant: str
    shards: int
    run: int
    startup_s: float = float("nan")
    drain_records: int = 0
    drain_per_s: float = float("nan")
    drain_cpu_per_10k: float = float("nan")
    drain_daemon_cpu_per_10k: float = float("nan")  # the top process alone (kcl-rs: the same)
    steady_per_s: float = float("nan")
    steady_cpu_per_10k: float = float("nan")
    steady_daemon_cpu_per_10k: float = float("nan")
    tree_rss_mb: float = float("nan")
    processes: int = 0
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        notes = f" [{'; '.join(self.notes)}]" if self.notes else ""
        return (
            f"run {self.run} {self.variant:<17} start-up {self.startup_s:5.1f}s  "
            f"drain {self.drain_per_s:8,.0f}/s {self.drain_cpu_per_10k:.3f} CPU-s/10k "
            f"(daemon {self.drain_daemon_cpu_per_10k:.3f})  "
            f"steady {self.steady_per_s:7,.0f}/s {self.steady_cpu_per_10k:.3f} CPU-s/10k "
            f"(daemon {self.steady_daemon_cpu_per_10k:.3f})  "
            f"tree RSS {self.tree_rss_mb:,.0f} MB in {self.processes} processes{notes}"
        )


@dataclass(frozen=True, slots=True)
class Setup:
    backend: Backend
    clients: AwsClients
    java_kinesis: str
    jars: Path | None
    kclrs: Path
    max_records: int
    idle_ms: int
    rate: float
    warmup_s: float
    steady_s: float
    limit_s: float
    lanes: int = 8
    profile_children: Path | None = None


def start(
    setup: Setup, variant: str, stream: Stream, app: str, directory: Path, env: dict[str, str]
) -> DaemonProcess:
    if variant == "kcl-rs":
        argv = [
            str(setup.kclrs),
            str(KCLRS_WORKER),
            stream.name,
            app,
            str(setup.max_records),
            str(setup.idle_ms),
        ]
        env = {
            **env,
            "AWS_ENDPOINT_URL_KINESIS": setup.backend.kinesis_endpoint,
            "AWS_ENDPOINT_URL_DYNAMODB": setup.backend.dynamodb_endpoint,
            "AWS_ENDPOINT_URL_CLOUDWATCH": "http://127.0.0.1:9",  # nothing listens: its publishes fail fast
            "PYTHONPATH": "",
        }
        return DaemonProcess(argv, directory, directory / "daemon.log", env)
    java = variant == "java"
    props = directory / "app.properties"
    props.write_text(
        properties(
            processor=PROCESSORS.get(variant, PROCESSORS["kcl-daemon"]),
            stream=stream.name,
            app=app,
            kinesis=setup.java_kinesis if java else setup.backend.kinesis_endpoint,
            dynamodb=setup.backend.dynamodb_endpoint,
            java=java,
            max_records=setup.max_records,
            idle_ms=setup.idle_ms,
            extra={
                **({"shardsPerChild": str(setup.lanes)} if variant.endswith("-lanes") else {}),
                **({"executableName": child_command(variant)} if variant in OTHER_CLIENTS else {}),
            },
        )
    )
    argv = daemon_argv("java" if java else "kcl-daemon", props, setup.jars)
    return DaemonProcess(argv, directory, directory / "daemon.log", env)


def run_session(setup: Setup, stream: Stream, variant: str, run: int, work: Path) -> Session:
    shards = len(stream.shards)
    figures = Session(variant, shards, run)
    app = unique(f"tree-{variant}")
    prepare_leases(setup.clients, app, stream.shards)
    directory = work / f"{variant}-{shards}-{run}"
    directory.mkdir(parents=True)
    batch_log = BatchLog(directory / "batches.log")
    env = daemon_env({"BENCH_BATCH_LOG": str(batch_log.path)})
    if setup.profile_children is not None and variant in ("kcl-daemon", "kcl-daemon-lanes"):
        setup.profile_children.mkdir(parents=True, exist_ok=True)
        env["BENCH_PROFILE_DIR"] = str(setup.profile_children)
    total = stream.total
    timeline, daemon_timeline = Timeline(), Timeline()
    epoch0 = time.time()
    process = start(setup, variant, stream, app, directory, env)
    delivered = 0
    first_batch: dict[str, float] = {}

    def poll() -> None:
        nonlocal delivered
        process.check()
        now, daemon_cpu = time.time(), cpu_seconds(process.pid)
        timeline.add(now, daemon_cpu + tree_cpu_s(process.pid, below_only=True))
        daemon_timeline.add(now, daemon_cpu)
        for batch in batch_log.poll():
            if batch.records:
                delivered += batch.records
                first_batch.setdefault(batch.shard, batch.start)

    def wait_until(done: Any, what: str) -> None:
        deadline = time.monotonic() + setup.limit_s
        while not done():
            if time.monotonic() > deadline:
                tail = "\n".join(process.log.read_text(errors="replace").splitlines()[-20:])
                raise TimeoutError(
                    f"{variant}, {shards} shards: {what} not done after {setup.limit_s}s "
                    f"({delivered} records); the log ends:\n{tail}"
                )
            time.sleep(POLL_S)
            poll()

    try:
        wait_until(lambda: len(first_batch) >= shards, "start-up")
        started = max(first_batch.values())
        figures.startup_s = started - epoch0
        wait_until(lambda: delivered >= total, "drain")
        batches = [b for b in batch_log.batches if b.records]
        drain_end = max(b.end for b in batches)
        in_window = sum(b.records for b in batches if b.start >= started)
        figures.drain_records = in_window
        if in_window < total / 4:
            figures.notes.append(f"only {in_window} of {total} records after start-up")
        if in_window and drain_end > started:
            figures.drain_per_s = in_window / (drain_end - started)
            figures.drain_cpu_per_10k = timeline.between(started, drain_end) / in_window * 1e4
            figures.drain_daemon_cpu_per_10k = daemon_timeline.between(started, drain_end) / in_window * 1e4

        with Producer(stream, setup.rate * shards) as producer:
            time.sleep(setup.warmup_s)
            poll()
            before, t0, w0 = delivered, time.monotonic(), time.time()
            end_at = t0 + setup.steady_s
            while time.monotonic() < end_at:
                time.sleep(POLL_S)
                poll()
            got, t1, w1 = delivered - before, time.monotonic(), time.time()
            figures.tree_rss_mb, figures.processes = tree_rss_mb(process.pid)
            if producer.behind_s > 1.0:
                figures.notes.append(f"producer fell {producer.behind_s:.1f}s behind")
        figures.steady_per_s = got / (t1 - t0)
        if got:
            figures.steady_cpu_per_10k = timeline.between(w0, w1) / got * 1e4
            figures.steady_daemon_cpu_per_10k = daemon_timeline.between(w0, w1) / got * 1e4
        with contextlib.suppress(TimeoutError):
            wait_until(lambda: delivered >= stream.total, "catching up after the steady phase")
    finally:
        process.stop(timeout_s=20.0)
        for kid in descendants(process.pid):  # a child the daemon left behind
            with contextlib.suppress(OSError):
                os.kill(kid, 9)
    return figures


# -- reporting -----------------------------------------------------------------------------------------

COLUMNS: Final = [
    ("startup_s", "start-up s", ".1f"),
    ("drain_per_s", "drain records/s", ",.0f"),
    ("drain_cpu_per_10k", "drain tree CPU-s/10k", ".3f"),
    ("drain_daemon_cpu_per_10k", "of which the daemon", ".3f"),
    ("steady_per_s", "steady records/s", ",.0f"),
    ("steady_cpu_per_10k", "steady tree CPU-s/10k", ".3f"),
    ("steady_daemon_cpu_per_10k", "of which the daemon", ".3f"),
    ("tree_rss_mb", "tree RSS MB", ",.0f"),
    ("processes", "processes", ".0f"),
]
RATIOS: Final = [
    ("drain_cpu_per_10k", "drain CPU"),
    ("steady_cpu_per_10k", "steady CPU"),
    ("tree_rss_mb", "RSS"),
]


def spread(values: list[float], fmt: str) -> str:
    values = sorted(v for v in values if v == v)
    if not values:
        return "-"
    low, mid, high = values[0], statistics.median(values), values[-1]
    return f"{low:{fmt}} / {mid:{fmt}} / {high:{fmt}}"


def paired(sessions: list[Session], variant: str, base: str, shards: int, key: str) -> list[float]:
    ours = {s.run: getattr(s, key) for s in sessions if s.variant == variant and s.shards == shards}
    theirs = {s.run: getattr(s, key) for s in sessions if s.variant == base and s.shards == shards}
    return [ours[r] / theirs[r] for r in ours if r in theirs and theirs[r] and theirs[r] == theirs[r]]


def markdown(sessions: list[Session]) -> str:
    rows = ["| shards | variant | " + " | ".join(title for _, title, _ in COLUMNS) + " |"]
    rows.append("|---" * (len(COLUMNS) + 2) + "|")
    variants = [v for v in VARIANTS if any(s.variant == v for s in sessions)]
    for shards in sorted({s.shards for s in sessions}):
        for variant in variants:
            mine = [s for s in sessions if s.shards == shards and s.variant == variant]
            if mine:
                cells = [spread([getattr(s, key) for s in mine], fmt) for key, _, fmt in COLUMNS]
                rows.append(f"| {shards} | {variant} | " + " | ".join(cells) + " |")
    rows += ["", "Ratios paired run by run (min / median / max):", ""]
    rows.append("| shards | variant | vs | " + " | ".join(title for _, title in RATIOS) + " |")
    rows.append("|---" * (len(RATIOS) + 3) + "|")
    for shards in sorted({s.shards for s in sessions}):
        for base in ("kcl-rs", "java"):
            for variant in variants:
                if variant == base:
                    continue
                cells = [spread(paired(sessions, variant, base, shards, key), ".2f") for key, _ in RATIOS]
                if any(cell != "-" for cell in cells):
                    rows.append(f"| {shards} | {variant} | {base} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", default="4,16,64", help="comma-separated shard counts")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS))  # kcl-daemon-lanes: shardsPerChild
    parser.add_argument("--backlog", type=int, default=1000, help="records per shard for the drain")
    parser.add_argument("--min-total", type=int, default=80000, help="at least this many backlog records")
    parser.add_argument(
        "--max-records", type=int, default=10000, help="at most; a shard's backlog takes 4 batches"
    )
    parser.add_argument(
        "--idle-ms", type=int, default=500, help="idleTimeBetweenReadsInMillis (all variants)"
    )
    parser.add_argument("--rate", type=float, default=20.0, help="records/s per shard in the steady phase")
    parser.add_argument("--warmup-s", type=float, default=5.0)
    parser.add_argument("--steady-s", type=float, default=15.0)
    parser.add_argument("--limit-s", type=float, default=300.0, help="give up on a phase after this")
    parser.add_argument("--lanes", type=int, default=8, help="shardsPerChild of kcl-daemon-lanes")
    parser.add_argument("--kclrs-python", type=Path, default=None, help="a Python with kcl-rs installed")
    parser.add_argument(
        "--profile-children",
        type=Path,
        default=None,
        help="cProfile kcl-daemon's kcl_client children into DIR",
    )
    parser.add_argument("--keep", type=Path, default=None, help="keep the logs in this directory")
    parser.add_argument("--out", type=Path, default=None, help="write process_tree.{json,md} here")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the emulators and daemons on the way out
    quiet_logs()
    variants = [v for v in args.variants.split(",") if v]
    jars = java_jars(disabled="java" not in variants)
    if "java" in variants and jars is None:
        print("Java MultiLangDaemon not found: without java")
        variants.remove("java")
    kclrs = kclrs_python(args.kclrs_python) if "kcl-rs" in variants else Path(sys.executable)
    counts = [int(n) for n in args.shards.split(",")]
    sessions: list[Session] = []
    began = time.monotonic()
    with contextlib.ExitStack() as stack:
        work = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tree-")))
        work.mkdir(parents=True, exist_ok=True)
        backend = stack.enter_context(running_emulators(work, shard_limit=sum(counts) + 10))
        clients = backend.clients(max_pool_connections=16, read_timeout_s=60.0)
        java_kinesis = stack.enter_context(h2c_proxy(backend.kinesis_endpoint)) if jars else ""
        for shards in counts:
            stream = Stream(clients, shards)
            backlog = max(args.backlog * shards, args.min_total)
            put_began = time.monotonic()
            stream.put(backlog)
            max_records = max(1, min(args.max_records, backlog // shards // 4))
            setup = Setup(
                backend,
                clients,
                java_kinesis,
                jars,
                kclrs,
                max_records,
                args.idle_ms,
                args.rate,
                args.warmup_s,
                args.steady_s,
                args.limit_s,
                args.lanes,
                args.profile_children,
            )
            print(
                f"\n{shards} shards: {backlog:,} records put in {time.monotonic() - put_began:.1f}s; "
                f"maxRecords {max_records}, steady {args.rate:g} records/s per shard",
                flush=True,
            )
            for run in range(args.runs):
                shift = run % len(variants)
                for variant in variants[shift:] + variants[:shift]:
                    session_began = time.monotonic()
                    try:
                        figures = run_session(setup, stream, variant, run, work)
                    except (TimeoutError, RuntimeError) as exc:
                        print(f"  run {run} {variant}: gave up: {exc}", flush=True)
                        continue
                    sessions.append(figures)
                    print(f"  {figures.line()} ({time.monotonic() - session_began:.0f}s)", flush=True)
    print(f"\n{len(sessions)} sessions in {time.monotonic() - began:.0f}s (min / median / max over runs)\n")
    table = markdown(sessions)
    print(table)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "process_tree.json").write_text(
            json.dumps([asdict(s) for s in sessions], indent=1) + "\n"
        )
        (args.out / "process_tree.md").write_text(table)


if __name__ == "__main__":
    main()
