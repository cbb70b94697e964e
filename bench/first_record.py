"""Time to the first record: from the daemon's start until a child has its first record.

Three figures, each the median over a few runs:

* baseline: what any reader must do at least, done back to back from this process: start a bare
  no-op child (bench/noop_processor.py) and get its reply to ``initialize``, plus GetShardIterator
  (TRIM_HORIZON) and one GetRecords (Limit 10000) on a shard that holds records, over an open client;
* the daemon in-process on an embedded moto backend (127.0.0.1): build_scheduler + Scheduler.start with
  a fresh lease table over a stream that already holds ``--records`` records, until the first record
  is handed to a child;
* ``kcl-daemon run --local`` as a subprocess, as users see it with ``make run`` (from samples/python
  with the sample's app.properties): from spawning the process until the sample processor's first
  ``record key=`` line appears in its output. This includes the interpreter start, the imports, the
  embedded backend, the stream creation and the sample producer's first put (the stream starts empty).

    .venv/bin/python bench/first_record.py [--records 1000] [--shards 4] [--runs 5] [--cli-runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import IO, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from _local import (
    NOOP_PROCESSOR,
    DaemonTimings,
    create_stream,
    put_records,
    quiet_logs,
    run_daemon,
    worker_clients,
    worker_plan,
)

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.local import EmbeddedBackend
from kcl_protocol import Initialize, encode_daemon_message
from tests.support.daemon import PROGRAM, Daemon, run_cli
from tests.support.paths import REPO

SAMPLE_DIR: Final = REPO / "samples" / "python"
FIRST_RECORD_MARK: Final = "record key="
CLI_LIMIT_S: Final = 60.0


def child_first_reply() -> float:
    """Seconds from spawning the no-op child until its reply to ``initialize``."""
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, str(NOOP_PROCESSOR)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdin is not None
    assert child.stdout is not None
    child.stdin.write(encode_daemon_message(Initialize("shardId-000000000000", "TRIM_HORIZON", 0)))
    child.stdin.flush()
    while not child.stdout.readline().strip():  # kcl_client writes "\n" + JSON + "\n"
        pass
    elapsed = time.perf_counter() - start
    child.stdin.close()
    child.wait(timeout=10)
    return elapsed


def raw_first_record(clients: AwsClients, stream: str, shard_id: str) -> float:
    """Seconds for GetShardIterator (TRIM_HORIZON) + GetRecords (Limit 10000) over an open client."""
    start = time.perf_counter()
    iterator = clients.kinesis.get_shard_iterator(
        StreamName=stream, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = clients.kinesis.get_records(ShardIterator=iterator, Limit=10000)["Records"]
    elapsed = time.perf_counter() - start
    assert records, "the shard holds records"
    return elapsed


@dataclass(frozen=True, slots=True)
class CliRun:
    backend_up: float  # the embedded backend's "listening on" line
    worker_starting: float  # the "worker ... starting" line
    first_record: float  # the sample processor's first "record key=" line


def _pump(stream: IO[str], lines: queue.Queue[tuple[float, str] | None]) -> None:
    for line in stream:
        lines.put((time.perf_counter(), line))
    lines.put(None)


def cli_command() -> list[str]:
    script = Path(sys.executable).with_name("kcl-daemon")
    if script.exists():
        return [str(script)]
    found = shutil.which("kcl-daemon")
    return [found] if found else list(PROGRAM)


def cli_first_record() -> CliRun:
    """``kcl-daemon run --local`` from samples/python until the first ``record key=`` line, then SIGTERM."""
    env = dict(os.environ)
    # The sample's executableName is "python3 sample_processor.py": the python3 that has kcl_client.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    start = time.perf_counter()
    daemon = Daemon(
        "run",
        "--local",
        properties="app.properties",
        log=None,
        env=env,
        cwd=SAMPLE_DIR,
        program=cli_command(),
    )
    assert daemon.process.stdout is not None
    lines: queue.Queue[tuple[float, str] | None] = queue.Queue()
    threading.Thread(target=_pump, args=(daemon.process.stdout, lines), daemon=True).start()
    marks: dict[str, float] = {}
    output: list[str] = []
    try:
        while FIRST_RECORD_MARK not in marks:
            item = lines.get(timeout=max(0.0, start + CLI_LIMIT_S - time.perf_counter()))
            if item is None:
                raise RuntimeError("kcl-daemon exited before a record:\n" + "".join(output[-20:]))
            at, line = item
            output.append(line)
            for mark in ("listening on", "starting: stream", FIRST_RECORD_MARK):
                if mark in line:
                    marks.setdefault(mark, at - start)
    except queue.Empty:
        raise RuntimeError(f"no record within {CLI_LIMIT_S}s:\n" + "".join(output[-20:])) from None
    finally:
        daemon.send(signal.SIGTERM)
        daemon.wait(20)  # killed after 20 s
    return CliRun(
        marks.get("listening on", float("nan")),
        marks.get("starting: stream", float("nan")),
        marks[FIRST_RECORD_MARK],
    )


def cli_import_s() -> float:
    """Seconds for ``kcl-daemon --version``: the interpreter plus the CLI's imports, nothing else."""
    start = time.perf_counter()
    done = run_cli("--version", program=cli_command())
    if done.returncode != 0:
        raise RuntimeError(f"kcl-daemon --version exited with {done.returncode}: {done.stderr}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1000, help="records already in the stream")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--size", type=int, default=100, help="payload bytes per record")
    parser.add_argument("--runs", type=int, default=5, help="in-process runs (and baseline runs)")
    parser.add_argument("--cli-runs", type=int, default=3, help="kcl-daemon run --local runs (0: skip)")
    args = parser.parse_args()
    quiet_logs()
    children: list[float] = []
    reads: list[float] = []
    daemons: list[DaemonTimings] = []
    with EmbeddedBackend() as backend:
        clients = backend.build_clients()
        stream = create_stream(clients, args.shards)
        per_shard = put_records(clients, stream, args.records, args.size)
        shard_id = min(per_shard)
        for _ in range(args.runs):
            children.append(child_first_reply())
            reads.append(raw_first_record(clients, stream, shard_id))
            plan = worker_plan(stream)
            daemons.append(asyncio.run(run_daemon(plan, worker_clients(backend, plan), 1)))
    clis = [cli_first_record() for _ in range(args.cli_runs)]

    child_s, read_s = median(children), median(reads)
    base = child_s + read_s
    daemon_s = median(d.first_record for d in daemons)
    print(
        f"time to first record, median of {args.runs} ({args.records} records already in {args.shards} "
        f"shard(s); {per_shard[shard_id]} in the shard the baseline reads)"
    )
    print(f"  baseline (child's first reply + raw read): {base * 1000:8.1f} ms")
    print(f"    bare child start to its initialize reply: {child_s * 1000:7.1f} ms")
    print(f"    GetShardIterator + GetRecords (raw boto3): {read_s * 1000:6.1f} ms")
    print(f"  kcl-daemon in-process (Scheduler.start):    {daemon_s * 1000:7.1f} ms")
    print(
        f"    medians: Scheduler.start returned {median(d.started for d in daemons) * 1000:.1f} ms, "
        f"first lease held {median(d.first_lease for d in daemons) * 1000:.1f} ms"
    )
    print(f"  ratio daemon/baseline (time):               {daemon_s / base:7.2f}")
    if clis:
        cli_s = median(c.first_record for c in clis)
        print(f"  kcl-daemon run --local (subprocess, median of {len(clis)}): {cli_s * 1000:7.1f} ms")
        print(
            f"    medians: --version alone {cli_import_s() * 1000:.1f} ms, backend listening "
            f"{median(c.backend_up for c in clis) * 1000:.1f} ms, worker starting "
            f"{median(c.worker_starting for c in clis) * 1000:.1f} ms (the stream starts empty: the first "
            "record also waits for the sample producer)"
        )
        print(f"  ratio run --local/baseline (time):           {cli_s / base:7.2f}")


if __name__ == "__main__":
    main()
