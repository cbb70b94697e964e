"""clientVersionConfig against the fleet's Migration3.0 item, on both emulators (contract §5.6): whatever each
worker is configured with, one table runs one algorithm."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.coordinator_state import CoordinatorStore, locate
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.core.assignment.client_version import ClientVersion, ClientVersionConfig
from kcl_daemon.leader.mode import LeaderMode, LeaderModeConfig
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
) -> LeaderMode:
    cfg = LeaderModeConfig(worker_id=worker, client_version=config)
    store = functools.partial(locate, aws_clients.dynamodb, coordinator, lease_table.table_name)
    return LeaderMode(cfg, None, store, None, FakeClock(), wall=lambda: 1_700_000_000.0)


async def test_first_worker_writes_and_the_others_follow(
    aws_clients: AwsClients, lease_table: DynamoLeaseTable, coordinator_table: str
) -> None:
    upgrade = _mode(aws_clients, lease_table, coordinator_table, ClientVersionConfig.COMPATIBLE_WITH_2X)
    assert await upgrade.resolve_version() is ClientVersion.UPGRADE_FROM_2X
    item = CoordinatorStore(aws_clients.dynamodb, coordinator_table).get("Migration3.0")
    assert item is not None
    assert (item["cv"], item["mb"], item["mts"]) == (
        "CLIENT_VERSION_UPGRADE_FROM_2X",
        "w1",
        1_700_000_000_000,
    )
    # a worker configured for 3.x joining this fleet runs the 2.x taker as stored: never both at once
    three = _mode(aws_clients, lease_table, coordinator_table, ClientVersionConfig.V3X, "w2")
    assert await three.resolve_version() is ClientVersion.UPGRADE_FROM_2X


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
    assert await compat.resolve_version() is ClientVersion.V3X_WITH_ROLLBACK
    three = _mode(aws_clients, lease_table, coordinator_table, ClientVersionConfig.V3X)
    assert await three.resolve_version() is ClientVersion.V3X
    item = store.get("Migration3.0")
    assert item is not None and item["cv"] == "CLIENT_VERSION_3X"
    assert item["h"][0]["cv"] == "CLIENT_VERSION_3X_WITH_ROLLBACK"  # history, newest first


async def test_phase1_writes_nothing(
    aws_clients: AwsClients, lease_table: DynamoLeaseTable, coordinator_table: str
) -> None:
    phase1 = _mode(aws_clients, lease_table, coordinator_table, ClientVersionConfig.COMPATIBLE_WITH_2X_PHASE1)
    assert await phase1.resolve_version() is ClientVersion.INIT
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
    mode = _mode(aws_clients, lease_table, coordinator_table, ClientVersionConfig.COMPATIBLE_WITH_2X)
    assert await mode.resolve_version() is ClientVersion.V3X
    assert not CoordinatorStore(aws_clients.dynamodb, coordinator_table).exists()
    assert lease_table.list_leases(consistent=True).leases == ()  # non-lease items are skipped


def test_the_readiness_check_sees_the_gsi(aws_clients: AwsClients, lease_table: DynamoLeaseTable) -> None:
    from kcl_daemon.aws.lease_table_3x import LeaseTable3x

    assert LeaseTable3x(aws_clients.dynamodb, lease_table.table_name).gsi_active()
