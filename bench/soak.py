"""Soak benchmark: one daemon's resources over a long run of traffic with a fault every few minutes.

Starts kinesalite and dynalite on 127.0.0.1, a stream, and two daemons (the recording processor): the
*steady* one, whose resources are sampled and which is never killed, and a *peer*. Records flow at
``--rate``; every ``--fault-every-s`` one fault, in turn: a DynamoDB fault window on both daemons
(throttles, 500s before and after the write, dropped replies, latency; through the fault-injecting
proxy), a SIGKILL of the peer (restarted 2 s later), a SIGKILL of one of the steady daemon's children,
a shard split and a merge. Every ``--sample-s`` the steady daemon's RSS, open file descriptors and
threads are read from ``/proc``, and its asyncio tasks from its latest status line. The closing figures
are the slopes per hour of each (least squares, after ``--warmup-s``): the goal is flat.

    .venv/bin/python bench/soak.py                       # 30 minutes, a fault every 3 minutes
    .venv/bin/python bench/soak.py --duration-s 600      # a quick look
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from kcl_daemon.aws.clients import AwsClients, ClientSettings, build_clients
from tests.support.chaos.harness import _fault_rules, _merge, _split
from tests.support.daemon import Daemon
from tests.support.emulators import REGION, EmulatorUnavailable, running_emulators
from tests.support.fault_proxy import FaultProxy
from tests.support.paths import RECORDER
from tests.support.streams import wait_for_stream

TASKS = re.compile(r"; (\d+) asyncio task\(s\), (\d+) thread\(s\)")
FAULTS = ("dynamodb-window", "kill-peer", "kill-child", "split", "merge")


def proc_figures(pid: int) -> tuple[float, int, int]:
    """(RSS in MB, open file descriptors, threads) of a live process, from /proc."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kb = int(re.search(r"^VmRSS:\s+(\d+)", status, re.M)[1])  # type: ignore[index]
    threads = int(re.search(r"^Threads:\s+(\d+)", status, re.M)[1])  # type: ignore[index]
    fds = len(list(Path(f"/proc/{pid}/fd").iterdir()))
    return rss_kb / 1024, fds, threads


def children_of(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def latest_tasks(log: Path) -> int | None:
    found = TASKS.findall(log.read_text(errors="replace")) if log.exists() else []
    return int(found[-1][0]) if found else None


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, per hour."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    return 3600 * sum((t - mean_t) * (v - mean_v) for t, v in points) / var


class Producer(threading.Thread):
    def __init__(self, clients: AwsClients, stream: str, rate: float) -> None:
        super().__init__(name="soak-producer", daemon=True)
        self.clients, self.stream, self.rate = clients, stream, rate
        self.stop = threading.Event()
        self.sent = 0

    def run(self) -> None:
        batch = max(int(self.rate / 10), 1)
        while not self.stop.wait(batch / self.rate):
            entries = [
                {"Data": f"r{self.sent + i:09d}".encode(), "PartitionKey": f"pk-{random.getrandbits(32):x}"}
                for i in range(batch)
            ]
            try:
                self.clients.kinesis.put_records(StreamName=self.stream, Records=entries)  # type: ignore[arg-type]
                self.sent += batch
            except Exception:  # noqa: BLE001, S112 - a reshard in progress; the next batch goes on
                continue


def properties(
    path: Path, worker: str, app: str, stream: str, kinesis: str, dynamodb: str, args: argparse.Namespace
) -> Path:
    path.write_text(
        f"executableName = {sys.executable} {RECORDER}\n"
        f"applicationName = {app}\nstreamName = {stream}\nregionName = {REGION}\n"
        f"kinesisEndpoint = {kinesis}\ndynamoDBEndpoint = {dynamodb}\nworkerId = {worker}\n"
        "initialPositionInStream = TRIM_HORIZON\nretrievalMode = POLLING\n"
        f"failoverTimeMillis = {int(args.failover_s * 1000)}\nidleTimeBetweenReadsInMillis = 200\n"
        + (
            "clientVersionConfig = CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1\n"
            if args.mode == "taker"
            else ""
        )
    )
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration-s", type=float, default=1800.0)
    parser.add_argument("--fault-every-s", type=float, default=180.0)
    parser.add_argument("--fault-window-s", type=float, default=20.0)
    parser.add_argument("--sample-s", type=float, default=10.0)
    parser.add_argument("--warmup-s", type=float, default=60.0, help="samples before this are not fitted")
    parser.add_argument("--rate", type=float, default=100.0, help="records per second")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--failover-s", type=float, default=10.0)
    parser.add_argument("--mode", choices=["leader", "taker"], default="leader")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the logs")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="kcl-soak-"))
    samples: list[tuple[float, float, int, int, int | None]] = []
    events: list[str] = []
    try:
        with running_emulators(work) as backend:
            clients = build_clients(
                ClientSettings(REGION, backend.kinesis_endpoint, backend.dynamodb_endpoint)
            )
            app, stream = f"soak-{uuid.uuid4().hex[:8]}", f"soak-{uuid.uuid4().hex[:8]}"
            clients.kinesis.create_stream(StreamName=stream, ShardCount=args.shards)
            wait_for_stream(clients, stream, timeout_s=30.0)
            records = work / "records.jsonl"
            with FaultProxy(backend.dynamodb_endpoint, seed=args.seed) as proxy:

                def start(name: str) -> Daemon:
                    props = properties(
                        work / f"{name}.properties",
                        name,
                        app,
                        stream,
                        backend.kinesis_endpoint,
                        proxy.endpoint,
                        args,
                    )
                    env = {"KCL_TEST_RECORDS": str(records), "KCL_TEST_WORKER": name}
                    return Daemon(
                        "run", properties=props, log=work / f"{name}.log", name=name, env=env, cwd=work
                    )

                steady, peer = start("steady"), start("peer")
                producer = Producer(clients, stream, args.rate)
                producer.start()
                faults = itertools.cycle(FAULTS)
                t0 = time.monotonic()
                next_sample, next_fault = 0.0, args.fault_every_s
                window_off: float | None = None
                restart_peer_at: float | None = None
                try:
                    while (now := time.monotonic() - t0) < args.duration_s:
                        if steady.exit_status is not None:
                            raise RuntimeError(
                                f"the steady daemon exited ({steady.exit_status}); see {steady.log}"
                            )
                        if now >= next_sample:
                            rss, fds, threads = proc_figures(steady.pid)
                            samples.append((now, rss, fds, threads, latest_tasks(work / "steady.log")))
                            next_sample += args.sample_s
                        if window_off is not None and now >= window_off:
                            proxy.clear()
                            window_off = None
                        if restart_peer_at is not None and now >= restart_peer_at:
                            peer = start("peer")
                            restart_peer_at = None
                        if now >= next_fault:
                            fault = next(faults)
                            if fault == "dynamodb-window":
                                proxy.set_rules(*_fault_rules(rng))
                                window_off = now + args.fault_window_s
                            elif fault == "kill-peer":
                                peer.send(signal.SIGKILL)
                                peer.wait(10)
                                restart_peer_at = now + 2.0
                            elif fault == "kill-child":
                                kids = children_of(steady.pid)
                                if kids:
                                    os.kill(kids[0], signal.SIGKILL)
                            elif fault == "split":
                                fault = _split(clients, stream, rng)
                            else:
                                fault = _merge(clients, stream, rng)
                            events.append(f"{now:.0f}s {fault}")
                            print(f"{now:6.0f}s fault: {fault}", flush=True)
                            next_fault += args.fault_every_s
                        time.sleep(0.2)
                finally:
                    producer.stop.set()
                    proxy.clear()
                    steady.send(signal.SIGTERM)
                    peer.send(signal.SIGTERM)
                    codes = (steady.wait(60), peer.wait(60))
            tracebacks = sum(
                (work / f"{n}.log").read_text(errors="replace").count("Traceback") for n in ("steady", "peer")
            )
    except EmulatorUnavailable as exc:
        shutil.rmtree(work, ignore_errors=True)
        print(f"the emulators are needed: {exc}", file=sys.stderr)
        return 2
    fitted = [s for s in samples if s[0] >= args.warmup_s]
    print(
        f"\n{len(samples)} samples over {args.duration_s:.0f} s, {args.mode} mode; "
        f"faults: {'; '.join(events)}"
    )
    print("   t (s)  RSS (MB)  fds  threads  tasks")
    for t, rss, fds, threads, tasks in samples[:: max(len(samples) // 20, 1)]:
        print(f"  {t:6.0f}  {rss:8.1f}  {fds:3d}  {threads:7d}  {tasks if tasks is not None else '-':>5}")
    print(f"records sent {producer.sent}; exit codes {codes}; tracebacks in the logs {tracebacks}")
    tasks_points = [(t, float(k)) for t, _, _, _, k in fitted if k is not None]
    print(
        f"slopes per hour (after {args.warmup_s:.0f} s): "
        f"RSS {slope_per_hour([(t, r) for t, r, _, _, _ in fitted]):+.1f} MB/h, "
        f"fds {slope_per_hour([(t, float(f)) for t, _, f, _, _ in fitted]):+.1f}/h, "
        f"threads {slope_per_hour([(t, float(n)) for t, _, _, n, _ in fitted]):+.1f}/h, "
        f"asyncio tasks {slope_per_hour(tasks_points):+.1f}/h"
    )
    if args.keep:
        print(f"logs kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
