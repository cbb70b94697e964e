"""What the status page costs the worker: its CPU with nobody looking, and with one request a second.

Two daemons (``python -m kcl_daemon run``, the no-op kcl_client processor) run side by side on an
embedded moto server in this process, each over its own stream of ``--shards`` shards with the same
light traffic (``--rate`` records/s each): A without ``--metrics-port`` (the baseline), B with it. Their
CPU (utime + stime from /proc, the daemon process itself, not its children) is measured over the same
windows of ``--window-s`` seconds, alternating: "nobody looks" (B's page is not asked for; B still runs
the port, the registry and the status history sampler) and "1 request/s" (this process asks B for ``/``
once a second). The figures are percent of one core; the ratio B/A is printed for each kind of window
and the page's cost is B's extra CPU at one request a second over its extra CPU when nobody looks.

    .venv/bin/python bench/status_page.py [--shards 4] [--window-s 60] [--rounds 2] [--rate 10]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from _daemons import cpu_seconds

from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.aws.provision import ensure_stream
from kcl_daemon.core.worker.health import Check, HealthReport
from kcl_daemon.core.worker.status import FleetView, FleetWorker, ShardView, StatusSnapshot, WorkerView
from kcl_daemon.local import EmbeddedBackend
from kcl_daemon.metrics.status_page import render_html

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
NOOP_PROCESSOR = BENCH / "noop_processor.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Daemon:
    name: str
    stream: str
    table: str
    port: int | None
    process: subprocess.Popen[bytes] | None = None
    cpu: dict[str, float] = field(default_factory=lambda: {"idle": 0.0, "looked": 0.0})

    def start(self, backend: EmbeddedBackend, workdir: Path) -> None:
        properties = workdir / f"{self.name}.properties"
        properties.write_text(
            f"executableName = {sys.executable} {NOOP_PROCESSOR}\n"
            f"applicationName = {self.table}\n"
            f"streamName = {self.stream}\n"
            f"regionName = {backend.region}\n"
            f"kinesisEndpoint = {backend.kinesis_endpoint}\n"
            f"dynamoDBEndpoint = {backend.dynamodb_endpoint}\n"
            f"workerId = {self.name}\n"
            "initialPositionInStream = TRIM_HORIZON\n"
            "retrievalMode = POLLING\n"  # moto has no SubscribeToShard
        )
        args = [sys.executable, "-m", "kcl_daemon", "run", "--properties", str(properties)]
        if self.port is not None:
            args += ["--metrics-port", str(self.port)]
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench-secret",
        }
        log = (workdir / f"{self.name}.log").open("wb")
        self.process = subprocess.Popen(args, stdout=log, stderr=log, env=env, cwd=workdir)

    def cpu_s(self) -> float:
        assert self.process is not None
        return cpu_seconds(self.process.pid)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()


def put_loop(backend: EmbeddedBackend, streams: list[str], rate: int, stop: threading.Event) -> None:
    """``rate`` records/s into each stream, in one PutRecords per stream per second."""
    clients = backend.build_clients()
    n = 0
    while not stop.wait(1.0):
        for stream in streams:
            entries = [{"Data": b"x" * 100, "PartitionKey": f"key-{n + i}"} for i in range(rate)]
            clients.kinesis.put_records(StreamName=stream, Records=entries)  # type: ignore[arg-type]
        n += rate


def wait_for_leases(
    backend: EmbeddedBackend, daemons: list[Daemon], shards: int, limit_s: float = 120
) -> None:
    clients = backend.build_clients()
    deadline = time.monotonic() + limit_s
    for daemon in daemons:
        table = DynamoLeaseTable(clients.dynamodb, daemon.table)
        while True:
            try:
                owned = [x for x in table.list_leases().leases if x.lease_owner == daemon.name]
            except Exception:  # noqa: BLE001 - the table may not exist yet
                owned = []
            if len(owned) == shards:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"{daemon.name} did not hold its {shards} leases within {limit_s:.0f}s")
            time.sleep(0.5)


def window(daemons: list[Daemon], kind: str, seconds: float, url: str | None) -> list[float]:
    """One measuring window; with ``url``, ask it once a second. Returns the request times (s)."""
    before = {d.name: d.cpu_s() for d in daemons}
    times: list[float] = []
    start = time.monotonic()
    next_at = start
    while (now := time.monotonic()) - start < seconds:
        if url is not None and now >= next_at:
            asked = time.perf_counter()
            with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
                response.read()
            times.append(time.perf_counter() - asked)
            next_at += 1.0
        time.sleep(max(min(next_at - time.monotonic(), 0.2), 0.01) if url else 0.2)
    elapsed = time.monotonic() - start
    for d in daemons:
        d.cpu[kind] += (d.cpu_s() - before[d.name]) / elapsed * seconds
    return times


def render_cost(shards: int, runs: int = 20) -> tuple[float, int]:
    """CPU ms to build the HTML of a synthetic page of ``shards`` shards with full lag histories, and its
    size: what one request costs a bigger worker (the snapshot's gathering is a few reads per shard)."""
    report = HealthReport((Check("started", True, "running"),))
    history = tuple(range(0, 61_000, 1000))
    snapshot = StatusSnapshot(
        worker=WorkerView(
            "worker-1", "zone-a", "3.x leader", True, "worker-1", "running", 60.0, 1, report, report
        ),
        shards=tuple(
            ShardView(
                lease_key=f"shardId-{n:012d}",
                shard_id=f"shardId-{n:012d}",
                state="processing",
                millis_behind_latest=1200,
                records_per_s=41.5,
                records_delivered=123456,
                checkpoint="49590338271490256608559692538361571095921575989136588898",
                checkpoint_age_s=1.5,
                child_pid=4000 + n,
                lag_history=history,
            )
            for n in range(shards)
        ),
        fleet=FleetView(
            scanned_age_s=3.0,
            total_leases=shards,
            workers=(FleetWorker("worker-1", "zone-a", shards, history),),
        ),
        generated_at=time.time(),
    )
    started = time.process_time()
    for _ in range(runs):
        page = render_html(snapshot)
    return (time.process_time() - started) / runs * 1000, len(page)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--window-s", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rate", type=int, default=10, help="records/s put into each stream")
    args = parser.parse_args()

    with EmbeddedBackend() as backend, tempfile.TemporaryDirectory(prefix="status-bench-") as tmp:
        clients = backend.build_clients()
        run = uuid.uuid4().hex[:6]
        daemons = []
        for name, port in (("baseline", None), ("with-page", free_port())):
            stream = f"status-bench-{name}-{run}"
            ensure_stream(clients.kinesis, stream, args.shards)
            daemons.append(Daemon(f"{name}-{run}", stream, f"status-bench-{name}-{run}", port))
        baseline, paged = daemons
        for daemon in daemons:
            daemon.start(backend, Path(tmp))
        stop = threading.Event()
        producer = threading.Thread(
            target=put_loop, args=(backend, [d.stream for d in daemons], args.rate, stop), daemon=True
        )
        try:
            wait_for_leases(backend, daemons, args.shards)
            producer.start()
            url = f"http://127.0.0.1:{paged.port}/"
            with urllib.request.urlopen(url, timeout=5) as response:
                page_bytes = len(response.read())
            with urllib.request.urlopen(url + "status.json", timeout=5) as response:  # noqa: S310
                shown = len(json.loads(response.read())["shards"])
            time.sleep(min(args.window_s, 10.0))  # past the start-up's bursts
            request_times: list[float] = []
            for _ in range(args.rounds):
                window(daemons, "idle", args.window_s, None)
                request_times += window(daemons, "looked", args.window_s, url)
        finally:
            stop.set()
            for daemon in daemons:
                daemon.stop()

    total_s = args.window_s * args.rounds

    def pct(daemon: Daemon, kind: str) -> float:
        return 100.0 * daemon.cpu[kind] / total_s

    print(
        f"{args.shards} shard(s) per daemon, {args.rate} records/s each, "
        f"{args.rounds} x {args.window_s:.0f} s per kind of window; "
        f"the page: {page_bytes / 1024:.1f} KiB, {shown} shard(s) shown"
    )
    print(
        f"{'window':<22}{'A: no port (baseline)':>24}{'B: with the page':>20}{'ratio B/A':>12}{'B - A':>10}"
    )
    for kind, label in (("idle", "nobody looks"), ("looked", "1 request/s to /")):
        a, b = pct(baseline, kind), pct(paged, kind)
        print(f"{label:<22}{a:>23.2f}%{b:>19.2f}%{b / a if a else float('nan'):>12.2f}{b - a:>+9.2f}%")
    extra = (pct(paged, "looked") - pct(baseline, "looked")) - (pct(paged, "idle") - pct(baseline, "idle"))
    own = pct(paged, "looked") - pct(paged, "idle")
    print(
        f"the page's cost at 1 request/s: {extra:+.2f}% of one core against the baseline "
        f"(B alone, looked minus idle: {own:+.2f}%); "
        f"request time median {statistics.median(request_times) * 1000:.1f} ms, "
        f"max {max(request_times) * 1000:.1f} ms over {len(request_times)} requests"
    )
    sizes = []
    for count in (4, 64, 256):
        cpu_ms, size = render_cost(count)
        sizes.append(f"{count} shards {cpu_ms:.1f} ms ({size / 1024:.0f} KiB)")
    print("rendering a page (in this process, full lag histories), CPU per request: " + ", ".join(sizes))


if __name__ == "__main__":
    main()
