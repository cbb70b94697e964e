"""A 2.x-compatible worker on both emulators, ``leaseTableLayout`` unset: it keeps Migration3.0 and its
worker metrics out of the lease table, and moves out what an earlier worker wrote there (a transaction on
DynamoDB and moto, single conditional writes on dynalite), so the lease table holds only leases."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.coordinator_state import LEASE_TABLE_KEY, CoordinatorStore
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.aws.worker_metrics_table import WorkerMetricsTable
from kcl_daemon.core.leader.client_version import ClientVersion, ClientVersionConfig
from kcl_daemon.core.leader.worker_metrics import WorkerMetricStats
from kcl_daemon.leader.mode import LeaderMode, LeaderModeConfig
from kcl_daemon.leader.tables import Tables, TablesConfig
from tests.support.clocks import FakeClock

pytestmark = pytest.mark.integration

NOW = 1_700_000_000.0


@pytest.fixture
def side_tables(aws_clients: AwsClients, lease_table: DynamoLeaseTable) -> Iterator[tuple[str, str]]:
    names = (f"{lease_table.table_name}-CoordinatorState", f"{lease_table.table_name}-WorkerMetricStats")
    yield names
    for name in names:
        with contextlib.suppress(ClientError):
            aws_clients.dynamodb.delete_table(TableName=name)


def _mode(aws_clients: AwsClients, table: str, side: tuple[str, str], worker: str) -> LeaderMode:
    client = aws_clients.dynamodb
    tables = Tables(
        CoordinatorStore(client, side[0]),
        CoordinatorStore(client, table, LEASE_TABLE_KEY),
        WorkerMetricsTable(client, side[1]),
        WorkerMetricsTable(client, table, in_lease_table=True),
        TablesConfig(worker, client_version=ClientVersionConfig.COMPATIBLE_WITH_2X),
    )
    cfg = LeaderModeConfig(worker_id=worker, client_version=ClientVersionConfig.COMPATIBLE_WITH_2X)
    return LeaderMode(cfg, None, tables, FakeClock(), wall=lambda: NOW)


def _non_leases(aws_clients: AwsClients, table: str) -> list[str]:
    items = aws_clients.dynamodb.scan(TableName=table, ConsistentRead=True)["Items"]
    return sorted(item["leaseKey"]["S"] for item in items if "leaseCounter" not in item)


async def test_a_new_application_keeps_the_lease_table_for_leases(
    aws_clients: AwsClients, lease_table: DynamoLeaseTable, side_tables: tuple[str, str]
) -> None:
    mode = _mode(aws_clients, lease_table.table_name, side_tables, "py-a")
    await mode.start_tables()
    assert await mode.resolve_version() is ClientVersion.UPGRADE_FROM_2X
    mode.tables.metrics_write_table().publish(WorkerMetricStats("py-a", NOW))
    assert _non_leases(aws_clients, lease_table.table_name) == []
    stored = CoordinatorStore(aws_clients.dynamodb, side_tables[0]).get("Migration3.0")
    assert stored is not None and stored["cv"] == ClientVersion.UPGRADE_FROM_2X.value


async def test_what_an_earlier_worker_left_in_the_lease_table_is_moved_out(
    aws_clients: AwsClients, lease_table: DynamoLeaseTable, side_tables: tuple[str, str]
) -> None:
    client, table = aws_clients.dynamodb, lease_table.table_name
    history = [{"cv": "CLIENT_VERSION_2X", "mb": "tool", "mts": 1}]
    migration = {
        "cv": ClientVersion.UPGRADE_FROM_2X.value,
        "mb": "py-old",
        "mts": 1_690_000_000_000,
        "h": history,
    }
    CoordinatorStore(client, table, LEASE_TABLE_KEY).put(
        "Migration3.0", migration, require_absent=True, entity_type="CLIENT_VERSION_MIGRATION"
    )
    WorkerMetricsTable(client, table, in_lease_table=True).publish(WorkerMetricStats("py-old", NOW - 100))
    assert _non_leases(aws_clients, table) == ["Migration3.0", "py-old"]

    mode = _mode(aws_clients, table, side_tables, "py-a")
    await mode.start_tables()
    assert await mode.resolve_version() is ClientVersion.UPGRADE_FROM_2X  # as stored, now in the side table
    assert _non_leases(aws_clients, table) == []
    moved = CoordinatorStore(client, side_tables[0]).get("Migration3.0")
    assert moved == {"key": "Migration3.0", **migration}
    # a second worker starting now finds the side tables and follows them
    other = _mode(aws_clients, table, side_tables, "py-b")
    await other.start_tables()
    assert other.tables.choice is None and await other.resolve_version() is ClientVersion.UPGRADE_FROM_2X
