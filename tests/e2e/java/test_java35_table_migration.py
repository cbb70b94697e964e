"""The KCL 3.5 table migration of a 3.0-3.4-layout application, driven by a kcl-daemon leader with a real
Java KCL 3.5.1 worker following (contract §9.2), kinesalite + dynalite, records coming all along.

Java's own leader would bake INIT for a fixed hour before DEPLOYED, so kcl-daemon leads (it starts
first) with its test-only short bakes (``tableMigrationInitBakeTimeSeconds``,
``tableMigrationCompleteBakeTimeSeconds``). The steps a user takes (``docs/migrating.md``):

* the application has the 3.0-3.4 layout (kcl-daemon with ``leaseTableLayout = KCL_3_0_TO_3_4`` creates
  the two side tables, as 3.0-3.4 would); a Java 3.5.1 worker on its defaults joins during the INIT bake,
  publishes the support code in the legacy worker-metrics table and gets its share (its legacy row
  holds the migration at DEPLOYED while it runs);
* the leader writes INIT, then DEPLOYED; the Java worker is redeployed with
  ``migrateAllEntitiesToLeaseTable = true`` (Java fixes its write targets at start) and from then on
  writes its worker metrics into the lease table;
* once no worker writes the legacy table, the leader moves ``Migration3.0`` and writes PENDING, then
  COMPLETE; the lock moves into the lease table and Java follows (it reads COMPLETE at its next
  leadership check and turns to the lock in the lease table, still held by kcl-daemon).

Never two leaders: the live ``Leader`` item (legacy, then lease table) only ever names the kcl-daemon
leader, and no Java worker leads. A Java follower still on the legacy lock finds it gone after COMPLETE
(the leader deleted it on its move) and takes it, but its check of the migration status in the same
call sees COMPLETE and gives it up before it acts (Java logs "is new Leader", then "Table migration
completed by another leader"), as Java followers do behind a Java leader; the test checks each such
take is given up so. None lost; every taker starts at its predecessor's checkpoint.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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

#: the INIT bake covers the Java worker's start-up: until its first legacy worker-metrics row, nothing
#: keeps the leader from moving on to PENDING without it (on 2 loaded cores Java took up to 55 s)
INIT_BAKE_S, COMPLETE_BAKE_S = 90, 5
PY_EXTRA = (
    "leaseTableLayout = KCL_3_0_TO_3_4\n"
    "migrateAllEntitiesToLeaseTable = true\n"
    f"tableMigrationInitBakeTimeSeconds = {INIT_BAKE_S}\n"
    f"tableMigrationCompleteBakeTimeSeconds = {COMPLETE_BAKE_S}\n"
)
#: what a Java worker runs with from DEPLOYED on
JAVA_MIGRATES = "migrateAllEntitiesToLeaseTable = true\n"
#: what a Java worker logs when it reads COMPLETE (at its next leadership check, every 30 s)
JAVA_FOLLOWS = re.compile(r"Changing table migration status from \S+ to TABLE_MIGRATION_STATUS_COMPLETE")
#: what a Java worker logs while it leads
JAVA_LEADS = "Worker : {} is the current Leader"
#: ... when it takes a lock, and when it gives it up at once because the migration is complete
JAVA_TOOK = "Worker : {} is new Leader"
JAVA_YIELDS = "Table migration completed by another leader"


@pytest.fixture
def mixed(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
) -> Iterator[Java35Fleet]:
    skip_unless_java(backend, JAVA_35)
    with legacy_tables(aws_clients.dynamodb, lease_table.table_name):
        fleet = Java35Fleet(tmp_path, backend, aws_clients, lease_table, make_stream(4), py_extra=PY_EXTRA)
        yield fleet
        fleet.close()


@pytest.mark.timeout(600)
def test_kcl_daemon_leads_the_table_migration_with_java_35_workers(
    mixed: Java35Fleet, aws_clients: AwsClients, lease_table: DynamoLeaseTable
) -> None:
    client, table = aws_clients.dynamodb, lease_table.table_name
    coordinator, metrics = f"{table}-CoordinatorState", f"{table}-WorkerMetricStats"
    leaders: set[str] = set()

    def status() -> str | None:
        """The TableMigration3.5 status, short; on the way, the holder of the live Leader item: the legacy
        one if the status read after it is not COMPLETE yet (after COMPLETE a Java follower may hold the
        stale legacy lock for an instant: see the docstring), and the lease table's."""
        legacy_holder = leader(client, coordinator, key="key")
        holder = leader(client, table)
        item: dict[str, Any] | None = client.get_item(
            TableName=coordinator, Key={"key": {"S": "TableMigration3.5"}}, ConsistentRead=True
        ).get("Item")
        short = None if item is None else item["tm"]["S"].removeprefix("TABLE_MIGRATION_STATUS_")
        leaders.update(h for h in (None if short == "COMPLETE" else legacy_holder, holder) if h is not None)
        return short

    mixed.more()
    started = time.monotonic()
    mixed.py.start("py-a")
    mixed.wait(lambda: mixed.owners() == {"py-a": 4}, 90, "py-a leads a 3.0-3.4-layout application")
    assert {coordinator, metrics} <= set(client.list_tables()["TableNames"])
    mixed.java("java-1")

    def java_writes_legacy_metrics() -> bool:
        row = client.get_item(TableName=metrics, Key={"wid": {"S": "java-1"}}, ConsistentRead=True).get(
            "Item"
        )
        if row is not None:
            assert row["sup"]["N"] == "1", row  # Java 3.5.1 publishes the support code
            return True
        assert status() in (None, "INIT"), (
            "past INIT before Java 3.5.1 joined: its start-up outlasted the bake"
        )
        return False

    mixed.wait(java_writes_legacy_metrics, INIT_BAKE_S, "java-1 publishes in the legacy worker-metrics table")
    mixed.wait(lambda: mixed.both_kinds_hold_leases("py-a", "java-1"), 150, "py-a gives java-1 its share")
    mixed.wait(lambda: "java-1" in mixed.workers_seen(), 60, "java-1 processes its leases")
    mixed.wait(lambda: status() == "DEPLOYED", INIT_BAKE_S, "DEPLOYED after the INIT bake")

    # the redeploy: the Java worker restarts with migrateAllEntitiesToLeaseTable = true
    mixed.stop_java("java-1", signal.SIGTERM)
    mixed.java("java-2", extra=JAVA_MIGRATES)
    mixed.wait(lambda: mixed.both_kinds_hold_leases("py-a", "java-2"), 150, "py-a gives java-2 its share")
    mixed.wait(lambda: status() in ("PENDING", "COMPLETE"), 180, "PENDING once nobody writes legacy rows")
    mixed.wait(lambda: status() == "COMPLETE", 60, "COMPLETE after the bake")
    mixed.wait(lambda: leader(client, table) is not None, 60, "the lock in the lease table")
    migrated = time.monotonic() - started
    java = mixed.javas["java-2"]
    mixed.wait(
        lambda: JAVA_FOLLOWS.search(java.log.read_text(errors="replace")) is not None, 90, "Java follows"
    )
    assert client.get_item(TableName=table, Key={"leaseKey": {"S": "java-2"}}).get("Item") is not None
    mixed.wait(lambda: mixed.both_kinds_hold_leases("py-a", "java-2"), 60, "both hold leases after COMPLETE")
    mixed.more()
    mixed.wait(mixed.all_delivered, 90, "every record, none lost")
    status()

    assert leaders == {"py-a"}, leaders  # never another leader, in either table
    for daemon in [*mixed.javas.values(), *mixed.stopped.values()]:
        text = daemon.log.read_text(errors="replace")
        assert JAVA_LEADS.format(daemon.name) not in text, daemon.name
        # a lock taken only to find the migration complete, and given up in the same call
        assert text.count(JAVA_TOOK.format(daemon.name)) == text.count(JAVA_YIELDS), daemon.name
    assert [i["key"]["S"] for i in client.scan(TableName=coordinator)["Items"]] == ["TableMigration3.5"]
    rows = read_records(mixed.py.records)
    assert checkpoint_violations(rows) == []
    FIGURES["table migration led by kcl-daemon, Java 3.5.1 following"] = (
        f"INIT to COMPLETE (bakes {INIT_BAKE_S}+{COMPLETE_BAKE_S}s, one Java redeploy) {migrated:.0f}s after "
        f"the start; one leader (py-a); {mixed.sent} records, lost 0, duplicates {duplicates(rows)}"
    )
    mixed.check_logs()
