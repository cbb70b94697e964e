"""A KCL 3.0-3.4-layout fleet of kcl-daemons migrates to a single table end to end, records flowing
(contract §9.2), on both emulators: INIT, DEPLOYED (after the INIT bake), PENDING (the legacy items moved,
the workers' metrics in the lease table), COMPLETE (after the COMPLETE bake) and the lock's move; no
record lost, never two leaders (from the workers' own leadership logs), the legacy writes stop, and both
bakes honoured (short test values)."""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend
from tests.support.figures import FIGURES
from tests.support.recorder import data_of
from tests.support.single_table import LayoutFleet, legacy_tables
from tests.support.streams import put

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

INIT_BAKE_S, COMPLETE_BAKE_S = 3, 4
EXTRA = (
    "leaseTableLayout = KCL_3_0_TO_3_4\n"
    "migrateAllEntitiesToLeaseTable = true\n"
    f"tableMigrationInitBakeTimeSeconds = {INIT_BAKE_S}\n"
    f"tableMigrationCompleteBakeTimeSeconds = {COMPLETE_BAKE_S}\n"
)
LEADERSHIP = re.compile(r"^(\S+ \S+) .*worker (\S+) (is now|is no longer) leader")


@pytest.fixture
def legacy_names(aws_clients: AwsClients, lease_table: DynamoLeaseTable) -> Iterator[tuple[str, str]]:
    """The lease table's coordinator-state and worker-metrics table names, deleted afterwards."""
    with legacy_tables(aws_clients.dynamodb, lease_table.table_name) as names:
        yield names


def leadership_intervals(logs: dict[str, str]) -> list[tuple[datetime, datetime, str]]:
    """(from, to, worker) for every stretch a worker said it led."""
    intervals = []
    for worker, text in logs.items():
        since: datetime | None = None
        for line in text.splitlines():
            match = LEADERSHIP.match(line)
            if match is None:
                continue
            at = datetime.strptime(match[1] + "+0000", "%Y-%m-%d %H:%M:%S,%f%z")
            if match[3] == "is now":
                since = at
            elif since is not None:
                intervals.append((since, at, worker))
                since = None
        if since is not None:
            intervals.append((since, datetime.max.replace(tzinfo=UTC), worker))
    return sorted(intervals)


def _count(client: Any, table: str) -> int:
    """How many items ``table`` holds (0 while it is still being created)."""
    try:
        return int(client.scan(TableName=table)["Count"])
    except client.exceptions.ResourceNotFoundException:
        return 0


def test_a_legacy_layout_fleet_migrates_to_a_single_table_with_records_flowing(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    legacy_names: tuple[str, str],
    make_stream: Callable[[int], str],
) -> None:
    client = aws_clients.dynamodb
    coordinator, metrics = legacy_names
    table = lease_table.table_name
    fleet = LayoutFleet(tmp_path, backend, table, make_stream(2))
    fleet.extra = EXTRA
    sent: list[int] = []
    stop = threading.Event()

    def produce() -> None:
        n = 0
        while not stop.is_set():
            put(aws_clients, fleet.stream, range(n, n + 10))
            sent.extend(range(n, n + 10))
            n += 10
            time.sleep(0.2)

    def stored() -> dict[str, Any] | None:
        try:
            item: dict[str, Any] | None = client.get_item(
                TableName=coordinator, Key={"key": {"S": "TableMigration3.5"}}, ConsistentRead=True
            ).get("Item")
        except client.exceptions.ResourceNotFoundException:
            return None
        return item

    def status() -> str | None:
        item = stored()
        return None if item is None else item["tm"]["S"].removeprefix("TABLE_MIGRATION_STATUS_")

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    started = time.monotonic()
    try:
        fleet.start("py-a")
        fleet.start("py-b")
        fleet.wait(lambda: status() == "INIT", 45, "INIT once both workers publish the support code")
        # the 3.0-3.4 layout, created by kcl-daemon: INIT may be written while the creating worker's
        # worker-metrics table is still being made (the other worker's publish retries meanwhile)
        fleet.wait(lambda: _count(client, metrics) >= 1, 30, "worker metrics in the 3.0-3.4 layout's table")
        fleet.wait(lambda: status() in ("DEPLOYED", "PENDING", "COMPLETE"), 45, "DEPLOYED after the bake")
        fleet.wait(lambda: status() in ("PENDING", "COMPLETE"), 45, "PENDING once nobody writes legacy rows")
        fleet.wait(lambda: status() == "COMPLETE", 45, "COMPLETE after the bake")
        fleet.wait(
            lambda: (
                "Item"
                in client.get_item(TableName=table, Key={"leaseKey": {"S": "Leader"}}, ConsistentRead=True)
            ),
            30,
            "the lock in the lease table",
        )
        completed = time.time()
        time.sleep(3.0)  # three reporter periods: no worker may touch a legacy table any more
        stop.set()
        producer.join()
        expected = {f"record-{n}" for n in sent}
        fleet.wait(lambda: data_of(fleet.recorded()) >= expected, 60, "every record, none lost")
        took = time.monotonic() - started
        logs = {name: daemon.text() for name, daemon in fleet.daemons.items()}
    finally:
        stop.set()
        fleet.close()

    # the bakes, from the item's own history (newest first): INIT -> DEPLOYED -> PENDING -> COMPLETE
    item = stored()
    assert item is not None
    history = [(h["M"]["tm"]["S"], int(h["M"]["mts"]["N"])) for h in item["h"]["L"]]
    chain = [(item["tm"]["S"], int(item["mts"]["N"])), *history]
    at = {status.removeprefix("TABLE_MIGRATION_STATUS_"): mts for status, mts in reversed(chain)}
    assert at["DEPLOYED"] - at["INIT"] >= INIT_BAKE_S * 1000
    assert at["COMPLETE"] - at["PENDING"] >= COMPLETE_BAKE_S * 1000
    # the items moved into the lease table, each with its kind; the legacy table keeps only the marker
    single = {
        i["leaseKey"]["S"]: i.get("entityType", {}).get("S")
        for i in client.scan(TableName=table)["Items"]
        if "entityType" in i and i["entityType"]["S"] != "LEASE"
    }
    assert single["Migration3.0"] == "CLIENT_VERSION_MIGRATION"
    assert single["TableMigration3.5"] == "TABLE_MIGRATION"
    assert {single.get("py-a"), single.get("py-b")} == {"WORKER_METRIC_STATS"}
    # a worker that took the lock in the legacy table as the migration moved it gives it back at once,
    # under the lease-write retry policy, and reconciles a failed delete by reading: nothing is left
    assert [i["key"]["S"] for i in client.scan(TableName=coordinator)["Items"]] == ["TableMigration3.5"]
    # legacy writes stopped: no legacy worker-metrics row was written after COMPLETE
    legacy_rows = client.scan(TableName=metrics)["Items"]
    assert all(int(row["lut"]["N"]) <= completed for row in legacy_rows), legacy_rows
    # never two leaders, by the workers' own account of when they led
    intervals = leadership_intervals(logs)
    assert intervals, "no worker ever led"
    for (_a_from, a_to, a), (b_from, _b_to, b) in itertools.pairwise(intervals):
        assert a_to <= b_from, f"{a} and {b} led at once: {intervals}"
    duplicates = len(fleet.recorded()) - len(data_of(fleet.recorded()))
    FIGURES[f"table migration on {backend.name}"] = (
        f"INIT to COMPLETE in {(at['COMPLETE'] - at['INIT']) / 1000:.1f}s (bakes {INIT_BAKE_S}+"
        f"{COMPLETE_BAKE_S}s), {len(sent)} records, 0 lost, {duplicates} redelivered, "
        f"{len(intervals)} leadership terms; run {took:.0f}s"
    )
