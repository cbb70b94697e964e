"""A mixed fleet of kcl-daemon and the real Java KCL 3.5.1 MultiLangDaemon, both on their defaults: each
properties file holds only what the emulators need (the endpoints, polling, Java's credentials provider
and ``metricsLevel = NONE``, the recording processor, TRIM_HORIZON), so the timings are the ones a user
runs with (``failoverTimeMillis`` 10 s, Java's 120 s leader lock, 30 s worker metrics, ...).

Also what the scenarios of ``tests/e2e/java/test_java35_*.py`` measure from the one records file: the
duplicates (deliveries beyond the first of a record) and whether every taker started at the checkpoint
its predecessor left (:func:`checkpoint_violations`).
"""

from __future__ import annotations

import signal
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend
from tests.support.fleet import Fleet
from tests.support.java import JavaDaemon, MixedFleet

#: the Java version of these fleets
JAVA_35 = 35
#: the one key the Java daemons get beyond the emulators' needs: Java's multilang daemon waits 0 ms for a
#: graceful shutdown on SIGTERM by default (it exits at once, abandoning its leases and its leader lock),
#: so a graceful stop needs a grace, as a user who stops workers gracefully sets it
JAVA_GRACE = "shutdownGraceMillis = 30000\n"


class DefaultsFleet(Fleet):
    """kcl-daemon workers with no timing key: only the endpoints, the stream, the worker id, polling (the
    emulators have no enhanced fan-out) and where to start; ``extra`` is appended."""

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
            "retrievalMode = POLLING\n" + self.extra
        )
        return path


class Java35Fleet(MixedFleet):
    """kcl-daemon workers and Java 3.5.1 daemons, both on defaults, on one table (one records file).

    A Java daemon stopped on purpose (:meth:`stop_java`) may exit with any status; one that exits by
    itself fails the waits."""

    def __init__(
        self,
        tmp_path: Path,
        backend: Backend,
        clients: AwsClients,
        table: DynamoLeaseTable,
        stream: str,
        *,
        py_extra: str = "",
        java_extra: str = "",
        java_version: int = JAVA_35,
    ) -> None:
        super().__init__(
            tmp_path, backend, clients, table, stream, java_version=java_version, py_extra="", java_extra=""
        )
        self.py = DefaultsFleet(tmp_path, backend, table.table_name, stream, extra=py_extra)
        self._java_props = JAVA_GRACE + java_extra
        self._java_major = java_version
        self.stopped: dict[str, JavaDaemon] = {}

    def java(self, name: str, version: int | None = None, extra: str = "") -> JavaDaemon:
        """Start Java daemon ``name`` (3.5.1 unless ``version``: 3 = 3.1.3), ``extra`` after the fleet's
        own extra properties."""
        daemon = JavaDaemon(
            name,
            version or self._java_major,
            self._tmp,
            table=self.py.table,
            stream=self.py.stream,
            kinesis_endpoint=self.proxy.endpoint,
            dynamodb_endpoint=self._backend.dynamodb_endpoint,
            records=self.py.records,
            extra=self._java_props + extra,
            on_defaults=True,
        )
        self.javas[name] = daemon
        return daemon

    def stop_java(self, name: str, signum: int = signal.SIGTERM, timeout_s: float = 60.0) -> int | None:
        """Stop Java daemon ``name`` with ``signum``; its exit status (it no longer counts as running)."""
        daemon = self.javas.pop(name)
        self.stopped[name] = daemon
        return daemon.stop(signum, timeout_s)

    def logs(self) -> str:
        return super().logs() + "".join(
            f"\n--- {j.name} (stopped) ---\n{j.tail(30)}" for j in self.stopped.values()
        )

    def check_logs(self) -> None:
        for daemon in self.stopped.values():
            assert daemon.errors() == [], daemon.tail()
        super().check_logs()

    def close(self) -> None:
        self.javas.update(self.stopped)
        super().close()

    def both_kinds_hold_leases(self, py: str, java: str) -> bool:
        spread = self.owners()
        return spread.get(py, 0) > 0 and spread.get(java, 0) > 0


def duplicates(rows: list[dict[str, Any]]) -> int:
    """Deliveries beyond the first of each record (by shard and sequence number)."""
    seen = Counter((row["shard"], row["seq"], row["sub"]) for row in rows if row["event"] == "record")
    return sum(n - 1 for n in seen.values())


def checkpoint_violations(rows: list[dict[str, Any]]) -> list[str]:
    """Takers that did not start at their predecessor's checkpoint.

    The recording processor checkpoints after every batch, so when a worker initialises a shard that
    another worker processed before, everything but that worker's last batch (which a SIGKILL may have
    cut before its checkpoint) is checkpointed: the taker's starting sequence number must be at least
    the newest record of those earlier batches. Returns one line per taker that started before it."""
    batches: dict[str, list[tuple[float, str, int]]] = defaultdict(list)  # shard -> (t, worker, max seq)
    for row in rows:
        if row["event"] == "record":
            batches[row["shard"]].append((row["t"], row["worker"], int(row["seq"])))
    problems = []
    for row in rows:
        if row["event"] != "initialize":
            continue
        before = [b for b in batches[row["shard"]] if b[0] < row["t"] and b[1] != row["worker"]]
        if not before:
            continue
        last_t: dict[str, float] = {}
        for t, worker, _ in before:
            last_t[worker] = max(t, last_t.get(worker, t))
        checkpointed = [seq for t, worker, seq in before if t < last_t[worker]]
        if not checkpointed:
            continue
        start = row["seq"]
        if not str(start).isdigit() or int(start) < max(checkpointed):
            problems.append(
                f"{row['worker']} started {row['shard']} at {start}, before the checkpoint "
                f"{max(checkpointed)}"
            )
    return problems


def leader(client: Any, table: str, key: str = "leaseKey") -> str | None:
    """The owner of the ``Leader`` lock item in ``table`` (none: None); ``key``: the partition key's name
    (``key`` in a legacy coordinator-state table)."""
    item = client.get_item(TableName=table, Key={key: {"S": "Leader"}}, ConsistentRead=True)
    return item["Item"]["ownerName"]["S"] if "Item" in item else None
