"""Fleets of kcl-daemon processes sharing a stream and a lease table on the emulators.

Each daemon is ``python -m kcl_daemon run --properties FILE`` (:class:`tests.support.daemon.Daemon`) with
the endpoints in the properties file, dummy credentials in the environment and the recording processor
as its child, which writes every record of every daemon into one JSON-lines file.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.core.leases.timings import LeaseTimings
from tests.support.daemon import Daemon
from tests.support.emulators import Backend
from tests.support.paths import RECORDER
from tests.support.recorder import read_records

FAILOVER_S: Final = 2.0
#: the 2.x taker's interval at FAILOVER_S: 2 x (failover + epsilon)
TAKE_EVERY_S: Final = LeaseTimings.from_failover(FAILOVER_S).take_every_s


class Fleet:
    """Daemons of one test; every one still running at :meth:`close` is killed.

    ``extra`` is appended to every daemon's properties; subclasses may rewrite :meth:`properties`.
    """

    def __init__(
        self,
        tmp_path: Path,
        backend: Backend,
        table: str,
        stream: str,
        *,
        failover_ms: int = int(FAILOVER_S * 1000),
        extra: str = "",
    ) -> None:
        self.tmp_path = tmp_path
        self.backend = backend
        self.table = table
        self.stream = stream
        self.failover_ms = failover_ms
        self.extra = extra
        self.records = tmp_path / "records.jsonl"
        self.daemons: dict[str, Daemon] = {}

    def properties(self, worker: str, executable: str) -> Path:
        path = self.tmp_path / f"{worker}.properties"
        path.write_text(
            f"executableName = {executable}\n"
            f"applicationName = {self.table}\n"
            f"streamName = {self.stream}\n"
            "regionName = us-east-1\n"
            f"kinesisEndpoint = {self.backend.kinesis_endpoint}\n"
            f"dynamoDBEndpoint = {self.backend.dynamodb_endpoint}\n"
            f"workerId = {worker}\n"
            "initialPositionInStream = TRIM_HORIZON\n"
            "idleTimeBetweenReadsInMillis = 200\n"
            f"failoverTimeMillis = {self.failover_ms}\n"
            "parentShardPollIntervalMillis = 500\n"
            "shardSyncIntervalMillis = 5000\n"
            "shutdownGraceMillis = 15000\n"
            "childStopTimeoutMillis = 2000\n"
            # KCL 3.x mode (the default) with the count-based decider: these tests expect 2/2 spreads
            "leaseAssignmentStrategy = LEASE_COUNT_BASED\n"
            "workerMetricsReporterFreqInMillis = 1000\n" + self.extra
        )
        return path

    def start(
        self, worker: str, executable: str | None = None, *args: str, env: dict[str, str] | None = None
    ) -> Daemon:
        """Start daemon ``worker`` (the recording processor unless ``executable``); ``args`` go to ``run``,
        ``env`` to its environment (and its processor's)."""
        properties = self.properties(worker, executable or f"{sys.executable} {RECORDER}")
        daemon = Daemon(
            "run",
            *args,
            properties=properties,
            log=self.tmp_path / f"{worker}.log",
            name=worker,
            env={"KCL_TEST_RECORDS": str(self.records), "KCL_TEST_WORKER": worker, **(env or {})},
            cwd=properties.parent,
        )
        self.daemons[worker] = daemon
        return daemon

    def recorded(self, event: str = "record") -> list[dict[str, Any]]:
        return read_records(self.records, event)

    def logs(self) -> str:
        return "\n\n".join(f"--- {d.name} ---\n{d.tail()}" for d in self.daemons.values())

    def wait(self, check: Callable[[], bool], limit_s: float, what: str) -> float:
        """Seconds until ``check()``; fails when a daemon exits with an error or after ``limit_s``."""
        start = time.monotonic()
        while not check():
            if time.monotonic() - start > limit_s:
                raise AssertionError(f"{what}: not within {limit_s}s\n{self.logs()}")
            for daemon in self.daemons.values():
                if daemon.exit_status not in (None, 0, -signal.SIGKILL):
                    raise AssertionError(f"{daemon.name} exited with {daemon.exit_status}\n{self.logs()}")
            time.sleep(0.1)
        return time.monotonic() - start

    def close(self) -> None:
        for daemon in self.daemons.values():
            daemon.kill()


def owners(table: DynamoLeaseTable) -> dict[str, int]:
    """Leases per owner, from a consistent scan."""
    counts: dict[str, int] = {}
    for lease in table.list_leases(consistent=True).leases:
        if lease.lease_owner is not None:
            counts[lease.lease_owner] = counts.get(lease.lease_owner, 0) + 1
    return counts


class OwnerWatch:
    """Polls the lease table; counts every change of a lease's owner (or hand-off mark)."""

    def __init__(self, table: DynamoLeaseTable) -> None:
        self.table = table
        self.changes: list[tuple[str, object, object]] = []
        self._last: dict[str, tuple[str | None, str | None]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                for lease in self.table.list_leases(consistent=True).leases:
                    now = (lease.lease_owner, lease.checkpoint_owner)
                    before = self._last.get(lease.lease_key)
                    if before is not None and before != now:
                        self.changes.append((lease.lease_key, before, now))
                    self._last[lease.lease_key] = now
            self._stop.wait(0.2)

    def __enter__(self) -> OwnerWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
