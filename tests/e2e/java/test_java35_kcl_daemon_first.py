"""kcl-daemon starts a new application (single table) and leads; the real Java KCL 3.5.1 daemon joins. Both
on their defaults (:mod:`tests.support.java35_fleet`), kinesalite + dynalite, records coming all along:

* kcl-daemon's leader gives the joining Java worker its share (from the worker-metrics item Java writes
  into the lease table);
* Java is SIGKILLed: kcl-daemon takes its leases at Java's checkpoints;
* a new Java worker joins, gets its share and stops gracefully (SIGTERM): kcl-daemon takes its leases;
* a third Java worker joins and the kcl-daemon leader is SIGKILLed: Java waits out kcl-daemon's lock
  (``failoverTimeMillis``, checked at Java's 30 s lock heartbeat), leads and takes every lease.

None lost, every taker starts at its predecessor's checkpoint, the `Leader` item stays in the lease
table, no legacy table appears, neither side logs an error.
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
def test_kcl_daemon_leads_a_new_application_and_java_35_joins(
    mixed: Java35Fleet, aws_clients: AwsClients, lease_table: DynamoLeaseTable
) -> None:
    client, table = aws_clients.dynamodb, lease_table.table_name
    mixed.more()
    mixed.py.start("py-a")
    mixed.wait(lambda: mixed.owners() == {"py-a": 4}, 90, "py-a leads a new application and holds 4")
    assert leader(client, table) == "py-a"

    started = time.monotonic()
    mixed.java("java-1")
    mixed.wait(lambda: mixed.both_kinds_hold_leases("py-a", "java-1"), 150, "py-a gives java-1 its share")
    joined = time.monotonic() - started
    mixed.wait(lambda: "java-1" in mixed.workers_seen(), 60, "java-1 processes its leases")

    mixed.stop_java("java-1", signal.SIGKILL)
    py_took_killed = mixed.wait(lambda: mixed.owners() == {"py-a": 4}, 90, "py-a takes the killed java-1's")

    mixed.java("java-2")
    mixed.wait(lambda: mixed.both_kinds_hold_leases("py-a", "java-2"), 150, "py-a gives java-2 its share")
    mixed.wait(lambda: "java-2" in mixed.workers_seen(), 60, "java-2 processes its leases")
    mixed.stop_java("java-2", signal.SIGTERM)
    py_took_stopped = mixed.wait(lambda: mixed.owners() == {"py-a": 4}, 90, "py-a takes the stopped java-2's")

    mixed.java("java-3")
    mixed.wait(lambda: mixed.both_kinds_hold_leases("py-a", "java-3"), 150, "py-a gives java-3 its share")
    mixed.wait(lambda: "java-3" in mixed.workers_seen(), 60, "java-3 processes its leases")
    mixed.py.daemons["py-a"].stop(signal.SIGKILL)
    java_took_killed = mixed.wait(lambda: mixed.owners() == {"java-3": 4}, 180, "java-3 leads and takes all")
    assert leader(client, table) == "java-3"

    mixed.more()
    mixed.wait(mixed.all_delivered, 90, "every record, none lost")
    rows = read_records(mixed.py.records)
    assert checkpoint_violations(rows) == []
    tables = client.list_tables()["TableNames"]
    assert f"{table}-CoordinatorState" not in tables and f"{table}-WorkerMetricStats" not in tables
    FIGURES["kcl-daemon first (kcl-daemon leads), Java 3.5.1 joins, both on defaults"] = (
        f"Java got its share {joined:.0f}s after its start; a SIGKILLed Java worker's leases on the "
        f"kcl-daemon leader after {py_took_killed:.1f}s, a stopped one's after {py_took_stopped:.1f}s; the "
        f"SIGKILLed kcl-daemon leader's on Java after {java_took_killed:.1f}s; {mixed.sent} records, lost 0, "
        f"duplicates {duplicates(rows)}"
    )
    mixed.check_logs()
