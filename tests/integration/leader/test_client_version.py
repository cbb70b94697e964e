"""clientVersionConfig against the fleet's Migration3.0 item, on both emulators (contract §5.6): whatever each
worker is configured with, one table runs one algorithm."""

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
from kcl_daemon.core.leader.table_migration import TableLayoutConfig
from kcl_daemon.leader.mode import LeaderMode, LeaderModeConfig
from kcl_daemon.leader.tables import Tables, TablesConfig
from tests.support.clocks import FakeClock

pytestmark = pytest.mark.integration


@pytest.fixture
def coordinator_table(aws_clients: AwsClients, lease_table: DynamoLeaseTable) -> Iterator[str]:
    name = f"{lease_table.table_name}-CoordinatorState"
    yield name
    with contextlib.suppress(ClientError):
        aws_clients.dynamodb.delete_table(TableName=name)


def _mode(
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    coordinator: str,
    config: ClientVersionConfig,
    worker: str = "w1",
    layout: TableLayoutConfig = TableLayoutConfig.KCL_3_0_TO_3_4,
) -> LeaderMode:
    client, table = aws_clients.dynamodb, lease_table.table_name
    tables = Tables(
        CoordinatorStore(client, coordinator),
        CoordinatorStore(client, table, LEASE_TABLE_KEY),
        WorkerMetricsTable(client, f"{table}-WorkerMetricStats"),
        WorkerMetricsTable(client, table, in_lease_table=True),
        TablesConfig(worker, layout=layout),
    )
    cfg = LeaderModeConfig(worker_id=worker, client_version=config)
    return LeaderMode(cfg, None, tables, FakeClock(), wall=lambda: 1_700_000_000.0)


async def _resolve(mode: LeaderMode) -> ClientVersion:
    await mode.start_tables()
    return await mode.resolve_version()


async def test_first_worker_writes_and_the_others_follow(
    aws_clients: AwsClients, lease_table: DynamoLeaseTable, coordinator_table: str
) -> None:
    upgrade = _mode(aws_clients, lease_table, coordinator_table, ClientVersionConfig.COMPATIBLE_WITH_2X)
    assert await _resolve(upgrade) is ClientVersion.UPGRADE_FROM_2X
    item = CoordinatorStore(aws_clients.dynamodb, coordinator_table).get("Migration3.0")
    assert item is not None
    assert (item["cv"], item["mb"], item["mts"]) == (
        "CLIENT_VERSION_UPGRADE_FROM_2X",
        "w1",
        1_700_000_000_000,
    )
    # a worker configured for 3.x joining this fleet runs the 2.x taker as stored: never both at once
    three = _mode(aws_clients, lease_table, coordinator_table, ClientVersionConfig.V3X, "w2")
    assert await _resolve(three) is ClientVersion.UPGRADE_FROM_2X


async def test_rollback_window_ends_when_a_3x_configured_worker_starts(
    aws_clients: AwsClients, lease_table: DynamoLeaseTable, coordinator_table: str
) -> None:
    store = CoordinatorStore(aws_clients.dynamodb, coordinator_table)
    store.create_table_if_missing(wait_s=10, poll_s=0.05)
    store.put(
        "Migration3.0",
        {"cv": "CLIENT_VERSION_3X_WITH_ROLLBACK", "mb": "java", "mts": 1, "h": []},
        require_absent=True,
    )
    compat = _mode(aws_clients, lease_table, coordinator_table, ClientVersionConfig.COMPATIBLE_WITH_2X)
    assert await _resolve(compat) is ClientVersion.V3X_WITH_ROLLBACK
    three = _mode(aws_clients, lease_table, coordinator_table, ClientVersionConfig.V3X)
    assert await _resolve(three) is ClientVersion.V3X
    item = store.get("Migration3.0")
    assert item is not None and item["cv"] == "CLIENT_VERSION_3X"
    assert item["h"][0]["cv"] == "CLIENT_VERSION_3X_WITH_ROLLBACK"  # history, newest first


async def test_phase1_writes_nothing(
    aws_clients: AwsClients, lease_table: DynamoLeaseTable, coordinator_table: str
) -> None:
    phase1 = _mode(aws_clients, lease_table, coordinator_table, ClientVersionConfig.COMPATIBLE_WITH_2X_PHASE1)
    assert await _resolve(phase1) is ClientVersion.INIT
    assert not CoordinatorStore(aws_clients.dynamodb, coordinator_table).exists()


async def test_a_35_fleet_keeps_its_state_in_the_lease_table(
    aws_clients: AwsClients, lease_table: DynamoLeaseTable, coordinator_table: str
) -> None:
    single = CoordinatorStore(aws_clients.dynamodb, lease_table.table_name, "leaseKey")
    single.put(
        "Migration3.0",
        {"cv": "CLIENT_VERSION_3X", "mb": "java", "mts": 1, "h": []},
        require_absent=True,
        entity_type="CLIENT_VERSION_MIGRATION",
    )
    mode = _mode(
        aws_clients,
        lease_table,
        coordinator_table,
        ClientVersionConfig.COMPATIBLE_WITH_2X,
        layout=TableLayoutConfig.SINGLE_TABLE,
    )
    assert await _resolve(mode) is ClientVersion.V3X
    assert not CoordinatorStore(aws_clients.dynamodb, coordinator_table).exists()
    assert lease_table.list_leases(consistent=True).leases == ()  # non-lease items are skipped


async def test_a_new_application_gets_the_single_table_layout(
    aws_clients: AwsClients, lease_table: DynamoLeaseTable, coordinator_table: str
) -> None:
    mode = _mode(
        aws_clients,
        lease_table,
        coordinator_table,
        ClientVersionConfig.V3X,
        layout=TableLayoutConfig.SINGLE_TABLE,
    )
    assert await _resolve(mode) is ClientVersion.V3X
    item = CoordinatorStore(aws_clients.dynamodb, lease_table.table_name, LEASE_TABLE_KEY).get("Migration3.0")
    assert item is not None and item["entityType"] == "CLIENT_VERSION_MIGRATION"
    assert not CoordinatorStore(aws_clients.dynamodb, coordinator_table).exists()


def test_the_readiness_check_sees_the_gsi(aws_clients: AwsClients, lease_table: DynamoLeaseTable) -> None:
    from kcl_daemon.aws.lease_table_3x import LeaseTable3x

    assert LeaseTable3x(aws_clients.dynamodb, lease_table.table_name).gsi_active()
