"""The real Java KCL 3.5.1 daemon starts a new application (single table) and leads; kcl-daemon joins.
Both on their defaults (:mod:`tests.support.java35_fleet`), kinesalite + dynalite, records coming all
along:

* two kcl-daemon workers join; Java's leader gives them their share from the worker-metrics items they
  write into the lease table (with the 3.5 support code); they never contest its live lock;
* one, once it holds leases, is SIGKILLed: the Java leader reassigns its leases once they expire (and its
  metrics go stale), and the takers resume at its checkpoints; the other, once it holds leases, stops
  gracefully: Java takes its leases back;
* a third joins, gets its share, and the Java leader stops gracefully (it deletes its lock):
  kcl-daemon leads and takes every lease.

None lost, every taker starts at its predecessor's checkpoint, neither logs an error. (A SIGKILLed Java
leader is another test's: kcl-daemon then waits out Java's 120 s lock.)
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend
from tests.support.figures import FIGURES
from tests.support.java import skip_unless_java
from tests.support.java35_fleet import JAVA_35, Java35Fleet, checkpoint_violations, duplicates, leader
from tests.support.recorder import read_records

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.java]


@pytest.fixture
def mixed(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
) -> Iterator[Java35Fleet]:
    skip_unless_java(backend, JAVA_35)
    fleet = Java35Fleet(tmp_path, backend, aws_clients, lease_table, make_stream(4))
    yield fleet
    fleet.close()


@pytest.mark.timeout(600)
def test_java_35_leads_a_new_application_and_kcl_daemon_joins(
    mixed: Java35Fleet, aws_clients: AwsClients, lease_table: DynamoLeaseTable
) -> None:
    client, table = aws_clients.dynamodb, lease_table.table_name
    mixed.more()
    started = time.monotonic()
    mixed.java("java-1")
    mixed.wait(lambda: mixed.owners() == {"java-1": 4}, 240, "Java leads a new application and holds 4")
    cold = time.monotonic() - started
    assert leader(client, table) == "java-1"
    # Java's leader assigns before its worker has initialised (up to a minute later on a loaded machine):
    # until then nobody renews those leases, and a kcl-daemon follower would take them as a dead owner's
    # (issue 28 point 6). The fleet kcl-daemon joins is a running one: Java processes its leases first.
    mixed.wait(lambda: "java-1" in mixed.workers_seen(), 120, "Java processes its leases")

    # two kcl-daemon workers join at once; Java's leader gives them their share over its rounds
    mixed.py.start("py-a")
    mixed.py.start("py-b")
    joined = mixed.wait(lambda: mixed.both_kinds_hold_leases("py-a", "java-1"), 150, "Java assigns to py-a")
    mixed.wait(lambda: "py-a" in mixed.workers_seen(), 60, "py-a processes its leases")
    assert leader(client, table) == "java-1"  # they never contest its live lock
    for worker in ("py-a", "py-b"):
        row = client.get_item(TableName=table, Key={"leaseKey": {"S": worker}}, ConsistentRead=True)["Item"]
        assert row["entityType"]["S"] == "WORKER_METRIC_STATS" and row["sup"]["N"] == "1", row

    mixed.py.daemons["py-a"].stop(signal.SIGKILL)
    java_took_killed = mixed.wait(
        lambda: "py-a" not in mixed.owners(),
        150,
        "the killed py-a's leases move (Java's leader or py-b's fallback)",
    )
    mixed.wait(lambda: mixed.both_kinds_hold_leases("py-b", "java-1"), 150, "Java assigns to py-b")
    mixed.wait(lambda: "py-b" in mixed.workers_seen(), 60, "py-b processes its leases")
    assert mixed.py.daemons["py-b"].stop(signal.SIGTERM) == 0
    java_took_stopped = mixed.wait(lambda: mixed.owners() == {"java-1": 4}, 150, "Java takes py-b's")

    mixed.py.start("py-c")
    mixed.wait(lambda: mixed.both_kinds_hold_leases("py-c", "java-1"), 150, "Java assigns to py-c")
    mixed.wait(lambda: "py-c" in mixed.workers_seen(), 60, "py-c processes its leases")
    # the JVM ends with 143 (SIGTERM) once its shutdown hook is done; a timeout would SIGKILL it
    assert mixed.stop_java("java-1", signal.SIGTERM) == 128 + signal.SIGTERM
    py_took_stopped = mixed.wait(lambda: mixed.owners() == {"py-c": 4}, 150, "py-c leads and takes all")
    assert leader(client, table) == "py-c"

    mixed.more()
    mixed.wait(mixed.all_delivered, 90, "every record, none lost")
    rows = read_records(mixed.py.records)
    assert checkpoint_violations(rows) == []
    tables = client.list_tables()["TableNames"]
    assert f"{table}-CoordinatorState" not in tables and f"{table}-WorkerMetricStats" not in tables
    for name in ("py-a", "py-b"):
        assert "took the leader lock" not in mixed.py.daemons[name].text()
    FIGURES["Java 3.5.1 first (Java leads), kcl-daemon joins, both on defaults"] = (
        f"Java held all 4 {cold:.0f}s after its start and assigned kcl-daemon its share {joined:.0f}s after "
        f"it started; a SIGKILLed kcl-daemon's leases moved (Java's leader or kcl-daemon's fallback) "
        f"after {java_took_killed:.1f}s, a stopped one's after {java_took_stopped:.1f}s; the stopped Java "
        f"leader's on kcl-daemon after {py_took_stopped:.1f}s; {mixed.sent} records, lost 0, duplicates "
        f"{duplicates(rows)}"
    )
    mixed.check_logs()
