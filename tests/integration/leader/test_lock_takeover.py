"""A dead leader's lock, in the shape Java writes it, is taken over in either table within its duration
plus one check interval (contract §3.6, §9.4), on both emulators: the legacy coordinator-state table
(partition key ``key``) and a single-table lease table (``leaseKey``, ``entityType`` = LEADER)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.coordinator_state import LEASE_TABLE_KEY, CoordinatorStore
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.aws.worker_metrics_table import WorkerMetricsTable
from kcl_daemon.clock import SystemClock
from kcl_daemon.core.leader.table_migration import Place
from kcl_daemon.leader.election import LeaderElection
from kcl_daemon.leader.table_migration import MigrationConfig, TableMigrationDriver
from kcl_daemon.leader.tables import FleetMetrics, Tables, TablesConfig
from tests.support.emulators import Backend
from tests.support.figures import FIGURES
from tests.support.single_table import legacy_tables

pytestmark = pytest.mark.integration

DEAD_LOCK_MS = 2000


@pytest.fixture
def legacy_names(aws_clients: AwsClients, lease_table: DynamoLeaseTable) -> Iterator[tuple[str, str]]:
    """The lease table's coordinator-state and worker-metrics table names, deleted afterwards."""
    with legacy_tables(aws_clients.dynamodb, lease_table.table_name) as names:
        yield names


@pytest.mark.parametrize("place", [Place.LEGACY, Place.LEASE_TABLE], ids=["legacy table", "lease table"])
async def test_a_dead_java_leaders_lock_is_taken_over_within_its_duration_and_one_check(
    place: Place,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    legacy_names: tuple[str, str],
) -> None:
    client = aws_clients.dynamodb
    coordinator, metrics = legacy_names
    legacy = CoordinatorStore(client, coordinator)
    single = CoordinatorStore(client, lease_table.table_name, LEASE_TABLE_KEY)
    lock = {"ownerName": "java-dead", "leaseDuration": str(DEAD_LOCK_MS), "recordVersionNumber": "3f1c-dead"}
    if place is Place.LEGACY:
        legacy.create_table_if_missing(wait_s=10, poll_s=0.05)
        client.put_item(
            TableName=coordinator, Item={"key": {"S": "Leader"}, **{k: {"S": v} for k, v in lock.items()}}
        )
    else:
        item = {
            "leaseKey": {"S": "Leader"},
            **{k: {"S": v} for k, v in lock.items()},
            "entityType": {"S": "LEADER"},
        }
        client.put_item(TableName=lease_table.table_name, Item=item)
    tables = Tables(
        legacy,
        single,
        WorkerMetricsTable(client, metrics),
        WorkerMetricsTable(client, lease_table.table_name, in_lease_table=True),
        TablesConfig("py-a"),
    )
    tables.start()
    clock, pool = SystemClock(), ThreadPoolExecutor(2)
    driver = TableMigrationDriver(tables, FleetMetrics(tables), MigrationConfig("py-a"), clock, pool)
    election = LeaderElection(
        tables.lock_store(),
        "py-a",
        clock,
        pool,
        duration_s=4.0,
        locate=tables.lock_store,
        confirm=driver.confirm,
    )
    started = time.monotonic()
    task = asyncio.create_task(election.run())
    try:
        while not election.is_leader():
            assert time.monotonic() - started < 10, "not taken over"
            await asyncio.sleep(0.05)
    finally:
        task.cancel()
    took = time.monotonic() - started
    stored = tables.lock_store().get("Leader")
    assert stored is not None and stored["ownerName"] == "py-a"
    assert ("entityType" in stored) == (place is Place.LEASE_TABLE)
    FIGURES[f"dead lock taken over in the {place.value} on {backend.name}"] = (
        f"{took:.2f}s (its leaseDuration {DEAD_LOCK_MS / 1000:g}s, checks every {election.check_s:g}s)"
    )
    assert took <= DEAD_LOCK_MS / 1000 + election.check_s + 0.75
    await election.release("test over")
