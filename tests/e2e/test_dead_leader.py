"""A dead leader never stands the fleet's shards still (issue 28 point 6), on both emulators.

A scripted KCL 3.5 leader (``tests/support/java35.py``: Java's lock item with its 120 s duration, its
worker-metrics row, its legacy-``Expected`` *assign*) leads two kcl-daemon workers and holds two of the
four leases itself. It then dies as a SIGKILLed Java leader does: no more heartbeats nor renewals, and
its lock stays for two minutes. The kcl-daemon followers take its leases themselves once they have
stood still past failover + grace (fallback taker), fenced on the counter, without touching the lock:
its shards resume within seconds, not after the lock's two minutes, and no record is lost. An *assign*
the leader would still send from a scan made before the take fails its ``Expected`` owner.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
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

FAILOVER_S = 1.0  # LayoutFleet's


class Beat:
    """Runs ``step`` every ``every_s`` on a thread until stopped (the scripted leader's life)."""

    def __init__(self, step: Callable[[], None], every_s: float) -> None:
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


def test_a_dead_java_35_leaders_leases_move_to_kcl_daemon_followers_while_its_lock_stands(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
    beats: list[Beat],
) -> None:
    client, table = aws_clients.dynamodb, lease_table.table_name
    stream = make_stream(4)
    shards = [s["ShardId"] for s in aws_clients.kinesis.list_shards(StreamName=stream)["Shards"]]
    _create_leases(client, table, shards)
    java = ScriptedJava35(client, table, "java-leader")
    java.create_client_version()
    java.acquire_lock()
    java.publish_metrics()

    def lead() -> None:
        java.heartbeat()
        java.publish_metrics()
        for lease in java.scan_leases():
            if lease.get("leaseOwner", {}).get("S") == "java-leader":
                java.renew(lease)  # every 0.25 s: within a third of the 1 s failover
        live = {
            row["leaseKey"]["S"]
            for row in java.scan_worker_metrics()
            if int(row["lut"]["N"]) >= time.time() - 3
        }
        if {"py-a", "py-b"} <= live:
            java.assign_evenly(["java-leader", "py-a", "py-b"])

    beats.append(Beat(lead, 0.25))
    put(aws_clients, stream, range(100))
    fleet = LayoutFleet(tmp_path, backend, table, stream)
    try:
        fleet.start("py-a")
        fleet.start("py-b")
        spread = {"java-leader": 2, "py-a": 1, "py-b": 1}
        fleet.wait(
            lambda: not beats[0].errors and owners(lease_table) == spread, 60, "the Java leader assigns"
        )
        fleet.wait(
            lambda: {"py-a", "py-b"} <= {r["worker"] for r in fleet.recorded()}, 45, "py-a, py-b process"
        )

        stale = [x for x in java.scan_leases() if x.get("leaseOwner", {}).get("S") == "java-leader"]
        beats[0].stop()  # the leader dies: no heartbeat, no renewal; its 120 s lock stays
        killed = time.monotonic()
        put(aws_clients, stream, range(100, 150))
        fleet.wait(
            lambda: "java-leader" not in owners(lease_table), 30, "the followers take the dead leader's"
        )
        moved = time.monotonic() - killed
        every = {f"record-{n}" for n in range(150)}
        fleet.wait(
            lambda: data_of(fleet.recorded()) >= every, 30, "every record, the dead leader's shards too"
        )
        resumed = time.monotonic() - killed

        lock = client.get_item(TableName=table, Key={"leaseKey": {"S": "Leader"}}, ConsistentRead=True)[
            "Item"
        ]
        assert lock["ownerName"]["S"] == "java-leader"  # the lock was never touched: never two leaders
        assert lock["recordVersionNumber"]["S"] == java.rvn
        logs = "".join(d.text() for d in fleet.daemons.values())
        assert "took the leader lock" not in logs
        assert "taken (fallback)" in logs
        # a slow leader's assign from a scan before the take fails its Expected owner: the table decides
        with pytest.raises(client.exceptions.ConditionalCheckFailedException):
            java.assign(stale[0], "java-leader")
        final = owners(lease_table)
        counts = Counter(r["data"] for r in fleet.recorded())
    finally:
        fleet.close()
    assert not beats[0].errors, beats[0].errors
    assert sum(final.values()) == 4 and set(final) <= {"py-a", "py-b"}, final
    # failover + grace + one watch interval, plus the children's start: far below the lock's 120 s
    assert moved <= FAILOVER_S + 10, f"{moved:.1f}s"
    duplicates = sum(n - 1 for n in counts.values())
    FIGURES[f"dead Java 3.5 leader (scripted) on {backend.name}"] = (
        f"its leases on kcl-daemon {moved:.1f}s after it died, records resumed by {resumed:.1f}s "
        f"(failover {FAILOVER_S:g}s; lock 120s); split {final}; lost 0, {duplicates} duplicates"
    )
