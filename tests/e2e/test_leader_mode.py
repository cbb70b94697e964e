"""KCL 3.x leader mode end to end: daemons (real processes) with the recording processor, both emulators.

* election + assignment: two daemons, one ``Leader`` lock item (in the lease table: a new application
  gets KCL 3.5's single-table layout), leases 2/2, every worker publishes its WorkerMetricStats item;
  the leader is SIGKILLed and the survivor takes the lock and all leases within failover + check + one
  assignment interval;
* planned move: one daemon holds all four shards while records flow; a second joins; the leader moves
  two leases by graceful hand-off (``shutdownRequested`` -> checkpoint -> transfer) and no record is
  processed twice;
* crash failover of a non-leader worker.

LEASE_COUNT_BASED keeps the expected spread deterministic (2/2).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError  # noqa: TID251 - the table may not exist yet

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend
from tests.support.figures import FIGURES
from tests.support.fleet import Fleet, owners
from tests.support.recorder import data_of
from tests.support.streams import put

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

FAILOVER_S = 2.0
ASSIGN_EVERY_S = 2 * FAILOVER_S
LEADER_EXTRA = (
    "clientVersionConfig = CLIENT_VERSION_CONFIG_3X\n"
    "leaseAssignmentStrategy = LEASE_COUNT_BASED\n"
    "workerMetricsReporterFreqInMillis = 1000\n"
    "gracefulLeaseHandoffTimeoutMillis = 10000\n"
)


class LeaderFleet(Fleet):
    def properties(self, worker: str, executable: str) -> Path:
        path = super().properties(worker, executable)
        path.write_text(path.read_text() + LEADER_EXTRA)
        return path


@pytest.fixture
def fleet(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
) -> Iterator[LeaderFleet]:
    fleet = LeaderFleet(tmp_path, backend, lease_table.table_name, make_stream(4))
    yield fleet
    fleet.close()
    for suffix in ("-CoordinatorState", "-WorkerMetricStats"):
        with contextlib.suppress(ClientError):
            aws_clients.dynamodb.delete_table(TableName=lease_table.table_name + suffix)


def leader_of(clients: AwsClients, table: str) -> str | None:
    item = clients.dynamodb.get_item(
        TableName=table, Key={"leaseKey": {"S": "Leader"}}, ConsistentRead=True
    ).get("Item")
    return None if item is None else item["ownerName"]["S"]


def worker_metrics(clients: AwsClients, table: str) -> list[dict[str, Any]]:
    """The WorkerMetricStats items of a single-table lease table."""
    items: list[dict[str, Any]] = clients.dynamodb.scan(
        TableName=table,
        FilterExpression="entityType = :kind",
        ExpressionAttributeValues={":kind": {"S": "WORKER_METRIC_STATS"}},
    )["Items"]
    return items


def test_leader_assigns_and_a_killed_leader_is_replaced(
    fleet: LeaderFleet, aws_clients: AwsClients, lease_table: DynamoLeaseTable, backend: Backend
) -> None:
    put(aws_clients, fleet.stream, range(400))
    fleet.start("daemon-a")
    fleet.start("daemon-b")
    fleet.wait(lambda: sorted(owners(lease_table).values()) == [2, 2], 60, "2/2 assignment")
    fleet.wait(lambda: data_of(fleet.recorded()) >= {f"record-{n}" for n in range(400)}, 60, "400 records")
    metrics = worker_metrics(aws_clients, fleet.table)
    assert {item["leaseKey"]["S"] for item in metrics} == {"daemon-a", "daemon-b"}
    assert all("C" in item["sts"]["M"] for item in metrics)
    leader = leader_of(aws_clients, fleet.table)
    assert leader in ("daemon-a", "daemon-b")
    survivor = "daemon-b" if leader == "daemon-a" else "daemon-a"

    fleet.daemons[leader].stop(signal.SIGKILL)
    killed_at = time.monotonic()
    fleet.wait(lambda: leader_of(aws_clients, fleet.table) == survivor, 30, "new leader")
    elected = time.monotonic() - killed_at
    fleet.wait(lambda: owners(lease_table) == {survivor: 4}, 60, "survivor holds all 4")
    took = time.monotonic() - killed_at
    put(aws_clients, fleet.stream, range(400, 800))
    fleet.wait(lambda: data_of(fleet.recorded()) >= {f"record-{n}" for n in range(800)}, 60, "800 records")
    FIGURES[f"leader SIGKILL on {backend.name}"] = (
        f"new leader {elected:.1f}s, its leases reassigned {took:.1f}s after the kill "
        f"(failover {FAILOVER_S}s)"
    )
    # lock stolen after failover (+ one 0.5 s check); leases expire one failover after the new leader's
    # first scan; one assignment interval of slack, plus CI slack.
    assert elected <= FAILOVER_S + 1.0 + 5.0
    assert took <= 2 * FAILOVER_S + ASSIGN_EVERY_S + 8.0
    assert fleet.daemons[survivor].stop(signal.SIGTERM) == 0
    assert "worker metrics of" in fleet.daemons[survivor].log.read_text()
    left = {item["leaseKey"]["S"] for item in worker_metrics(aws_clients, fleet.table)}
    assert survivor not in left  # the stopped one deleted its own; the killed one's stays until stale
    tables = aws_clients.dynamodb.list_tables()["TableNames"]
    assert (
        f"{fleet.table}-CoordinatorState" not in tables and f"{fleet.table}-WorkerMetricStats" not in tables
    )


def test_planned_move_is_a_hand_off_without_duplicates_and_crash_failover(
    fleet: LeaderFleet, aws_clients: AwsClients, lease_table: DynamoLeaseTable, backend: Backend
) -> None:
    put(aws_clients, fleet.stream, range(200))
    fleet.start("daemon-a")
    fleet.wait(lambda: owners(lease_table) == {"daemon-a": 4}, 60, "daemon-a holds all 4")
    fleet.wait(lambda: data_of(fleet.recorded()) >= {f"record-{n}" for n in range(200)}, 60, "200 records")
    stop = threading.Event()
    sent: list[int] = []

    def produce() -> None:
        n = 200
        while not stop.is_set():
            put(aws_clients, fleet.stream, range(n, n + 20))
            sent.extend(range(n, n + 20))
            n += 20
            time.sleep(0.1)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        fleet.start("daemon-b")
        fleet.wait(lambda: sorted(owners(lease_table).values()) == [2, 2], 60, "hand-off to 2/2")
        time.sleep(1.0)
    finally:
        stop.set()
        producer.join()
    expected = {f"record-{n}" for n in range(200)} | {f"record-{n}" for n in sent}
    fleet.wait(lambda: data_of(fleet.recorded()) >= expected, 60, "every record")
    counts = Counter(row["data"] for row in fleet.recorded())
    duplicates = sum(c - 1 for c in counts.values() if c > 1)
    shutdowns = [row for row in fleet.recorded("shutdown") if row["worker"] == "daemon-a"]
    assert len(shutdowns) == 2, "each moved lease's processor heard shutdownRequested"
    FIGURES[f"planned move on {backend.name}"] = f"{duplicates} duplicates of {len(counts)} records"
    assert duplicates == 0, [d for d, c in counts.items() if c > 1][:10]

    # crash failover of a worker (whichever is not the leader)
    leader = leader_of(aws_clients, fleet.table)
    victim = "daemon-b" if leader == "daemon-a" else "daemon-a"
    fleet.daemons[victim].stop(signal.SIGKILL)
    killed_at = time.monotonic()
    survivor = "daemon-a" if victim == "daemon-b" else "daemon-b"
    fleet.wait(lambda: owners(lease_table) == {survivor: 4}, 60, "survivor holds all 4")
    took = time.monotonic() - killed_at
    FIGURES[f"worker SIGKILL on {backend.name}"] = f"leases reassigned {took:.1f}s after the kill"
    assert took <= FAILOVER_S + ASSIGN_EVERY_S + 6.0


def test_a_stop_right_after_start_leaves_no_lease_naming_the_worker(
    fleet: LeaderFleet, lease_table: DynamoLeaseTable
) -> None:
    """Issue 17: SIGTERM as soon as the leader (itself) has assigned it leases, before it has adopted or
    started them; the table must not name it afterwards (the others would wait a failover for them)."""
    fleet.start("daemon-a")
    fleet.wait(lambda: owners(lease_table).get("daemon-a", 0) > 0, 60, "leases assigned to daemon-a")
    assert fleet.daemons["daemon-a"].stop(signal.SIGTERM) == 0
    assert owners(lease_table).get("daemon-a", 0) == 0, owners(lease_table)
