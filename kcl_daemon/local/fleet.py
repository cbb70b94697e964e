"""`kcl-daemon run --local --workers N`: a small fleet on the embedded backend, watched live.

The parent starts the embedded Kinesis + DynamoDB and the sample producer once, then N real daemons
(``kcl-daemon run`` subprocesses, worker ids ``local-1`` ... ``local-N``) pointed at it, each with its
log in a file. Instead of a wall of per-record lines it shows the live view of the lease table
(:mod:`kcl_daemon.inspection.watch`): the leases spread over the workers; after ``kill_after_s``, once
every worker holds leases, it SIGKILLs one worker, and its leases expire and are taken over by the
others. Ctrl-C stops every worker gracefully (SIGTERM) and exits 0.

The workers' properties are the user's file with the endpoints, region, credentials provider, stream
and worker id replaced (a ``.properties`` file, written next to the worker logs).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from kcl_daemon.clock import SystemClock
from kcl_daemon.config.slices import LeaseSlice, ShardSlice
from kcl_daemon.errors import ConfigError, DependencyUnavailable
from kcl_daemon.inspection.plot import Frame, render_html
from kcl_daemon.inspection.watch import CLEAR, Snapshot, TableSampler, render_screen

#: Keys of the user's file the fleet replaces (endpoints and credentials are the embedded backend's).
_REPLACED = re.compile(
    r"^\s*(kinesisEndpoint|dynamoDBEndpoint|cloudWatchEndpoint|regionName|AwsCredentialsProvider\w*|"
    r"workerId|workerIdentifier|streamName|streamArn)\s*[=:]",
    re.IGNORECASE,
)


def worker_properties(original: str, *, endpoint: str, region: str, stream: str) -> str:
    """The user's properties text with the fleet's keys replaced (pure)."""
    kept = [line for line in original.splitlines() if not _REPLACED.match(line)]
    return "\n".join(
        [
            *kept,
            "",
            "# kcl-daemon run --local --workers: the embedded backend",
            f"kinesisEndpoint = {endpoint}",
            f"dynamoDBEndpoint = {endpoint}",
            f"regionName = {region}",
            f"streamName = {stream}",
            "AwsCredentialsProvider = DefaultCredentialsProvider",
            "",
        ]
    )


@dataclass
class Worker:
    worker_id: str
    log: Path
    process: subprocess.Popen[bytes]
    killed_at: float | None = None


@dataclass
class LocalFleet:
    workers: list[Worker] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    def start(self, count: int, properties: Path, cwd: Path, logs: Path, env: dict[str, str]) -> None:
        for number in range(1, count + 1):
            worker_id = f"local-{number}"
            log = logs / f"{worker_id}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(  # noqa: S603 - our own CLI, argv list, no shell
                    [sys.executable, "-m", "kcl_daemon", "run", "--properties", str(properties),
                     "--worker-id", worker_id, "--status-interval", "10"],
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd, env=env,
                )  # fmt: skip
            self.workers.append(Worker(worker_id, log, process))
            self.events.append(f"{time.strftime('%H:%M:%S')} started {worker_id} (log {log})")

    def kill_one(self) -> None:
        for worker in reversed(self.workers):
            if worker.process.poll() is None:
                worker.process.kill()
                worker.killed_at = time.monotonic()
                self.events.append(
                    f"{time.strftime('%H:%M:%S')} SIGKILLed {worker.worker_id}: its leases expire after "
                    "failoverTimeMillis and the others take them"
                )
                return

    def kill_due(self, elapsed_s: float, kill_after_s: float, holding: frozenset[str]) -> bool:
        """Whether to SIGKILL a worker now: ``kill_after_s`` has passed and every worker holds leases
        (so the takeover shows), or three times that has passed (fewer shards than workers, say)."""
        if len(self.workers) < 2 or any(w.killed_at is not None for w in self.workers):
            return False
        if elapsed_s >= 3 * kill_after_s:
            return True
        return elapsed_s >= kill_after_s and all(w.worker_id in holding for w in self.workers)

    def stop(self, timeout_s: float = 30.0) -> None:
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for worker in self.workers:
            try:
                worker.process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()

    def exited(self) -> list[Worker]:
        """Workers that stopped on their own (not killed by us)."""
        return [w for w in self.workers if w.killed_at is None and w.process.poll() is not None]


async def _show(
    fleet: LocalFleet,
    sampler: TableSampler,
    out: TextIO,
    *,
    every_s: float,
    kill_after_s: float | None,
    html: Path | None,
    refreshes: int | None,
    clear: bool,
) -> None:
    clock = SystemClock()
    started = time.monotonic()
    frames: list[Frame] = []
    holding: frozenset[str] = frozenset()  # the workers holding leases at the last screen
    drawn = 0
    while refreshes is None or drawn < refreshes:
        if drawn:
            await clock.sleep(every_s)
        if kill_after_s is not None and fleet.kill_due(time.monotonic() - started, kill_after_s, holding):
            fleet.kill_one()
        for worker in fleet.exited():
            raise ConfigError(
                [f"worker {worker.worker_id} exited ({worker.process.returncode}); see {worker.log}"]
            )
        try:
            snapshot: Snapshot = await sampler()
        except DependencyUnavailable:  # the workers have not created the lease table yet
            out.write(f"{time.strftime('%H:%M:%S')} waiting for the workers to create the lease table\n")
            out.flush()
            drawn += 1
            continue
        screen = render_screen(snapshot, at=time.strftime("%H:%M:%S"), every_s=every_s)
        out.write((CLEAR if clear else "") + "\n".join(fleet.events[-6:]) + "\n\n" + screen)
        out.flush()
        frames.append(Frame(time.time(), dict(snapshot.figures.per_worker), snapshot.figures.unclaimed))
        holding = frozenset(w for w, count in snapshot.figures.per_worker.items() if count)
        if html is not None:
            page = render_html(frames, title="local fleet: leases per worker")
            await asyncio.to_thread(html.write_text, page, encoding="utf-8")
        drawn += 1


def run_local_fleet(
    leases: LeaseSlice,
    shards: ShardSlice,
    table_name: str | None,
    properties: Path,
    workers: int,
    out: TextIO,
    *,
    every_s: float = 2.0,
    kill_after_s: float | None = 30.0,
    html: Path | None = None,
    refreshes: int | None = None,
    clear: bool = True,
    logs_dir: Path | None = None,
) -> int:
    """Run the fleet until Ctrl-C (or ``refreshes`` redraws); returns the exit code. ``table_name``: the
    lease table the fleet's workers share (the file's tableName or applicationName)."""
    if properties.suffix.lower() in (".yaml", ".yml"):
        raise ConfigError(["run --local --workers needs a .properties file"])
    from kcl_daemon.aws.kinesis import Kinesis
    from kcl_daemon.aws.lease_table import DynamoLeaseTable
    from kcl_daemon.local import local_stack
    from kcl_daemon.retry import KINESIS

    stream = shards.stream_name or "kcl-daemon-local"
    assert table_name is not None  # validate_for_run
    logs = logs_dir or Path(tempfile.mkdtemp(prefix="kcl-daemon-fleet-"))
    with local_stack(stream) as stack:
        endpoint = stack.backend.endpoint
        worker_file = logs / "worker.properties"
        worker_file.write_text(
            worker_properties(
                properties.read_text(encoding="utf-8"),
                endpoint=endpoint,
                region=stack.backend.region,
                stream=stack.stream_name,
            ),
            encoding="utf-8",
        )
        credentials = stack.backend.credentials
        env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": credentials.access_key_id,
            "AWS_SECRET_ACCESS_KEY": credentials.secret_access_key,
        }
        env.pop("AWS_SESSION_TOKEN", None)
        env.pop("AWS_PROFILE", None)
        fleet = LocalFleet()
        fleet.start(workers, worker_file, properties.resolve().parent, logs, env)
        table = DynamoLeaseTable(stack.clients.dynamodb, table_name)
        kinesis = Kinesis(stack.clients.kinesis)
        sampler = TableSampler(
            table_name,
            lambda: table.list_leases(consistent=True),
            lambda: KINESIS.call(kinesis.list_shards, stack.stream_name),
            SystemClock(),
            failover_s=leases.failover_s,
            cluster_separator=leases.cluster_separator,
        )
        try:
            asyncio.run(
                _show(fleet, sampler, out, every_s=every_s, kill_after_s=kill_after_s, html=html,
                      refreshes=refreshes, clear=clear)
            )  # fmt: skip
        except KeyboardInterrupt:
            out.write("\nstopping the workers (SIGTERM)...\n")
        finally:
            with contextlib.suppress(KeyboardInterrupt):
                fleet.stop()
        out.write(f"worker logs: {logs}\n")
    return 0
