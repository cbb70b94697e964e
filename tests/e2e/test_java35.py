"""kcl-daemon beside a KCL 3.5 fleet on a single-table lease table, both emulators (contract §9.1, §5.1):

* a scripted leader writing exactly what Java 3.5 writes (its lock, ``Migration3.0``, its worker-metrics
  row, the *assign* with legacy ``Expected`` conditions) finds kcl-daemon workers by the filtered
  worker-metrics scan and assigns them leases, which they discover and process; they never contest its
  live lock and create no legacy table;
* kcl-daemon's leader balances onto a worker that only publishes a Java 3.5 worker-metrics item (and
  renews what it is given), and the kcl-daemon worker, seeing a live Java worker without CPU, reports
  none either.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend
from tests.support.figures import FIGURES
from tests.support.fleet import owners
from tests.support.java35 import ScriptedJava35
from tests.support.recorder import data_of
from tests.support.single_table import LayoutFleet
from tests.support.streams import put

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


class Beat:
    """Runs ``step`` every ``every_s`` on a thread until stopped."""

    def __init__(self, step: Callable[[], None], every_s: float = 0.5) -> None:
        self._stop = threading.Event()
        self.errors: list[BaseException] = []

        def loop() -> None:
            while not self._stop.wait(every_s):
                try:
                    step()
                except Exception as exc:  # noqa: BLE001 - reported by the test
                    self.errors.append(exc)

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def check(self) -> bool:
        """True, or the first error of a step (so a failing script fails the wait at once)."""
        if self.errors:
            raise AssertionError(f"the scripted Java worker failed: {self.errors[0]!r}") from self.errors[0]
        return True

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def beats() -> Iterator[list[Beat]]:
    running: list[Beat] = []
    yield running
    for beat in running:
        beat.stop()


def _create_leases(client: Any, table: str, shards: list[str]) -> None:
    """Leases as Java 3.5 creates them (``entityType`` = LEASE, written only by the create)."""
    for shard in shards:
        client.put_item(
            TableName=table,
            Item={
                "leaseKey": {"S": shard},
                "leaseCounter": {"N": "0"},
                "checkpoint": {"S": "TRIM_HORIZON"},
                "checkpointSubSequenceNumber": {"N": "0"},
                "ownerSwitchesSinceCheckpoint": {"N": "0"},
                "entityType": {"S": "LEASE"},
            },
            ConditionExpression="attribute_not_exists(leaseKey)",
        )


def test_a_java_35_leader_assigns_leases_to_kcl_daemon_workers(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
    beats: list[Beat],
) -> None:
    client, table = aws_clients.dynamodb, lease_table.table_name
    stream = make_stream(2)
    _create_leases(
        client, table, [s["ShardId"] for s in aws_clients.kinesis.list_shards(StreamName=stream)["Shards"]]
    )
    java = ScriptedJava35(client, table, "java-leader")
    java.create_client_version()
    java.acquire_lock()
    java.publish_metrics()

    def lead() -> None:
        java.heartbeat()
        java.publish_metrics()
        live = [
            row["leaseKey"]["S"]
            for row in java.scan_worker_metrics()
            if int(row["lut"]["N"]) >= time.time() - 3 and row["leaseKey"]["S"].startswith("py-")
        ]
        if {"py-a", "py-b"} <= set(live):  # the test's fleet is up: assign, as a count-based leader would
            java.assign_evenly(sorted(live))

    beats.append(Beat(lead))
    put(aws_clients, stream, range(100))
    fleet = LayoutFleet(tmp_path, backend, table, stream)
    started = time.monotonic()
    try:
        fleet.start("py-a")
        fleet.start("py-b")
        fleet.wait(lambda: beats[0].check() and owners(lease_table) == {"py-a": 1, "py-b": 1}, 45, "1/1")
        fleet.wait(
            lambda: data_of(fleet.recorded()) >= {f"record-{n}" for n in range(100)}, 45, "every record"
        )
        took = time.monotonic() - started
        lock = client.get_item(TableName=table, Key={"leaseKey": {"S": "Leader"}}, ConsistentRead=True)[
            "Item"
        ]
        assert lock["ownerName"]["S"] == "java-leader"  # its live lock was never contested
        rows = {row["leaseKey"]["S"]: row for row in java.scan_worker_metrics()}
        assert {"py-a", "py-b"} <= set(rows)
        assert all(rows[w]["sup"]["N"] == "1" for w in ("py-a", "py-b"))
        tables = client.list_tables()["TableNames"]
        assert f"{table}-CoordinatorState" not in tables and f"{table}-WorkerMetricStats" not in tables
        for daemon in fleet.daemons.values():
            assert "took the leader lock" not in daemon.text()
    finally:
        fleet.close()
    assert not beats[0].errors, beats[0].errors
    FIGURES[f"Java 3.5 leader assigns kcl-daemon on {backend.name}"] = (
        f"both processing {took:.1f}s after start"
    )


def test_the_kcl_daemon_leader_balances_onto_a_java_35_worker(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
    beats: list[Beat],
) -> None:
    client, table = aws_clients.dynamodb, lease_table.table_name
    stream = make_stream(2)
    put(aws_clients, stream, range(50))
    fleet = LayoutFleet(tmp_path, backend, table, stream)
    try:
        fleet.start("py-a")
        fleet.wait(lambda: owners(lease_table) == {"py-a": 2}, 45, "py-a leads and holds both leases")
        java = ScriptedJava35(client, table, "java-1")

        def work() -> None:
            java.publish_metrics()
            for lease in java.scan_leases():
                if lease.get("leaseOwner", {}).get("S") == "java-1" and "checkpointOwner" not in lease:
                    java.renew(lease)

        java.publish_metrics()
        beats.append(Beat(work, 0.3))
        joined = time.monotonic()
        fleet.wait(
            lambda: owners(lease_table) == {"java-1": 1, "py-a": 1}, 45, "py-a's leader gives java-1 one"
        )
        balanced = time.monotonic() - joined

        def py_reports_no_cpu() -> bool:
            item = client.get_item(TableName=table, Key={"leaseKey": {"S": "py-a"}}, ConsistentRead=True)[
                "Item"
            ]
            return item["sts"]["M"] == {}

        fleet.wait(py_reports_no_cpu, 20, "py-a reports no CPU beside a Java worker without CPU")
        assert "live Java worker(s) report no CPU" in fleet.daemons["py-a"].text()
    finally:
        fleet.close()
    assert not beats[0].errors, beats[0].errors
    FIGURES[f"kcl-daemon leader balances onto Java 3.5 on {backend.name}"] = (
        f"{balanced:.1f}s after it joined"
    )
