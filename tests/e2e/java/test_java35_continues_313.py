"""An application the real Java KCL 3.1.3 daemon started (the 3.0-3.4 layout: ``<app>-CoordinatorState``
and ``<app>-WorkerMetricStats`` beside the lease table) is continued by the real Java 3.5.1 daemon and
kcl-daemon together, all on their defaults, kinesalite + dynalite, records coming all along:

* Java 3.1.3 starts the application alone and holds every lease;
* a Java 3.5.1 and a kcl-daemon worker join (each publishes its worker metrics in the legacy table), then
  3.1.3 stops gracefully (releasing its lock);
* whichever of them leads (the lock stays in the legacy table: the layout is not migrated), both hold
  leases, and neither creates a single-table layout the old one could not read.

None lost, every taker starts at its predecessor's checkpoint, no worker logs an error.
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
from tests.support.single_table import legacy_tables

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.java]

#: the Java 3.1.3 jars
JAVA_313 = 3
#: the one key the 3.1.3 worker gets beyond the fleet's (what is measured is the 3.5.1 and kcl-daemon side)
JAVA_313_START = "shardSyncIntervalMillis = 5000\n"


@pytest.fixture
def mixed(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
) -> Iterator[Java35Fleet]:
    skip_unless_java(backend, JAVA_35, JAVA_313)
    with legacy_tables(aws_clients.dynamodb, lease_table.table_name):
        fleet = Java35Fleet(tmp_path, backend, aws_clients, lease_table, make_stream(4))
        yield fleet
        fleet.close()


@pytest.mark.timeout(600)
def test_java_35_and_kcl_daemon_continue_an_application_java_313_started(
    mixed: Java35Fleet, aws_clients: AwsClients, lease_table: DynamoLeaseTable
) -> None:
    client, table = aws_clients.dynamodb, lease_table.table_name
    coordinator, metrics = f"{table}-CoordinatorState", f"{table}-WorkerMetricStats"
    mixed.more()
    # the old fleet's set-up only: 3.1.3 on its defaults sleeps a 60 s shard-sync interval on a new table
    mixed.java("java-313", JAVA_313, extra=JAVA_313_START)
    mixed.wait(lambda: mixed.owners() == {"java-313": 4}, 240, "Java 3.1.3 starts the application, holds 4")
    assert {coordinator, metrics} <= set(client.list_tables()["TableNames"])
    assert leader(client, coordinator, key="key") == "java-313"

    mixed.java("java-35")
    mixed.py.start("py-a")

    def both_publish_metrics() -> bool:
        rows = client.scan(TableName=metrics, ConsistentRead=True)["Items"]
        return {"java-35", "py-a"} <= {row["wid"]["S"] for row in rows}

    mixed.wait(both_publish_metrics, 120, "both newcomers publish worker metrics in the legacy table")
    mixed.stop_java("java-313", signal.SIGTERM)
    stopped = time.monotonic()
    mixed.wait(lambda: set(mixed.owners()) == {"java-35", "py-a"}, 180, "3.1.3's leases on the two others")
    took = time.monotonic() - stopped
    mixed.wait(lambda: {"java-35", "py-a"} <= mixed.workers_seen(), 60, "both process their leases")
    new_leader = leader(client, coordinator, key="key")
    assert new_leader in ("java-35", "py-a")
    assert leader(client, table) is None  # the lock stays in the legacy table

    mixed.more()
    mixed.wait(mixed.all_delivered, 90, "every record, none lost")
    rows = read_records(mixed.py.records)
    assert checkpoint_violations(rows) == []
    FIGURES["Java 3.1.3's application continued by Java 3.5.1 and kcl-daemon"] = (
        f"the stopped 3.1.3 leader's leases on the other two after {took:.1f}s, {new_leader} leads (in the "
        f"legacy table); spread {mixed.spread()}; {mixed.sent} records, lost 0, duplicates {duplicates(rows)}"
    )
    mixed.check_logs()
