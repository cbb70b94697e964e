"""`kcl-daemon migrate` end to end on both emulators (contract §5.6, §9.2.4): every mode, each with
``--dry-run`` first (which prints every write and makes none); plus the layout as `leases` and
`check-config --table-state` print it."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend
from tests.support.java35 import ScriptedJava35

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def cli(tmp_path: Path, backend: Backend, table: str, *args: str) -> subprocess.CompletedProcess[str]:
    properties = tmp_path / "app.properties"
    properties.write_text(
        f"applicationName = {table}\n"
        "regionName = us-east-1\n"
        f"kinesisEndpoint = {backend.kinesis_endpoint}\n"
        f"dynamoDBEndpoint = {backend.dynamodb_endpoint}\n"
    )
    command, *rest = args
    return subprocess.run(
        [sys.executable, "-m", "kcl_daemon", command, *rest, "--properties", str(properties)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def legacy(aws_clients: AwsClients, lease_table: DynamoLeaseTable) -> Iterator[tuple[str, str]]:
    names = (f"{lease_table.table_name}-CoordinatorState", f"{lease_table.table_name}-WorkerMetricStats")
    yield names
    for name in names:
        with contextlib.suppress(Exception):  # already deleted by the test
            aws_clients.dynamodb.delete_table(TableName=name)


def _cv(client: Any, table: str) -> dict[str, Any]:
    item: dict[str, Any] = client.get_item(
        TableName=table, Key={"leaseKey": {"S": "Migration3.0"}}, ConsistentRead=True
    )["Item"]
    return item


def _has_gsi(client: Any, table: str) -> bool:
    """The index exists and is not being deleted."""
    indexes = client.describe_table(TableName=table)["Table"].get("GlobalSecondaryIndexes", [])
    return any(
        i["IndexName"] == "LeaseOwnerToLeaseKeyIndex" and i.get("IndexStatus") != "DELETING" for i in indexes
    )


def test_rollback_and_rollforward_with_their_dry_runs(
    tmp_path: Path, backend: Backend, aws_clients: AwsClients, lease_table: DynamoLeaseTable
) -> None:
    client, table = aws_clients.dynamodb, lease_table.table_name
    java = ScriptedJava35(client, table, "java-1")
    java.create_client_version("CLIENT_VERSION_3X_WITH_ROLLBACK")
    before = _cv(client, table)

    dry = cli(tmp_path, backend, table, "migrate", "rollback", "--dry-run", "--gsi-wait-seconds", "0")
    assert dry.returncode == 0, dry.stderr
    assert "would UpdateItem" in dry.stdout and "IF cv = CLIENT_VERSION_3X_WITH_ROLLBACK" in dry.stdout
    assert "would UpdateTable" in dry.stdout and "LeaseOwnerToLeaseKeyIndex" in dry.stdout
    assert "dry run: 3 step(s) not performed" in dry.stdout
    assert _cv(client, table) == before and _has_gsi(client, table)

    done = cli(tmp_path, backend, table, "migrate", "rollback", "--gsi-wait-seconds", "0")
    assert done.returncode == 0, done.stdout + done.stderr
    after = _cv(client, table)
    assert (after["cv"]["S"], after["mb"]["S"]) == ("CLIENT_VERSION_2X", "KclMigrationTool-rollback")
    assert after["h"]["L"][0]["M"]["cv"]["S"] == "CLIENT_VERSION_3X_WITH_ROLLBACK"
    assert after["entityType"]["S"] == "CLIENT_VERSION_MIGRATION"  # the update keeps the item's kind
    assert "UpdateTable" in done.stdout and "LeaseOwnerToLeaseKeyIndex" in done.stdout
    if backend.name == "moto":  # dynalite accepts the index deletion and ignores it
        deadline = time.monotonic() + 10
        while _has_gsi(client, table):
            assert time.monotonic() < deadline, "the GSI is still there"
            time.sleep(0.1)
    again = cli(tmp_path, backend, table, "migrate", "rollback", "--gsi-wait-seconds", "0")
    assert again.returncode == 0 and "already CLIENT_VERSION_2X" in again.stdout

    dry = cli(tmp_path, backend, table, "migrate", "rollforward", "--dry-run")
    assert dry.returncode == 0 and "would UpdateItem" in dry.stdout
    assert _cv(client, table)["cv"]["S"] == "CLIENT_VERSION_2X"
    forward = cli(tmp_path, backend, table, "migrate", "rollforward")
    assert forward.returncode == 0, forward.stdout + forward.stderr
    assert _cv(client, table)["mb"]["S"] == "KclMigrationTool-rollforward"
    assert _cv(client, table)["cv"]["S"] == "CLIENT_VERSION_UPGRADE_FROM_2X"
    refused = cli(tmp_path, backend, table, "migrate", "rollforward")
    assert refused.returncode == 1 and "refused: " in refused.stdout


def test_status_and_remove_legacy_tables_only_once_complete(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    legacy: tuple[str, str],
) -> None:
    client, table = aws_clients.dynamodb, lease_table.table_name
    coordinator, metrics = legacy
    for name, key in ((coordinator, "key"), (metrics, "wid")):
        client.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        while client.describe_table(TableName=name)["Table"]["TableStatus"] != "ACTIVE":
            time.sleep(0.02)

    def stored(status: str) -> None:
        client.put_item(
            TableName=coordinator,
            Item={"key": {"S": "TableMigration3.5"}, "tm": {"S": f"TABLE_MIGRATION_STATUS_{status}"}},
        )

    stored("PENDING")
    status = cli(tmp_path, backend, table, "migrate", "status")
    assert status.returncode == 0, status.stderr
    assert "layout: migrating" in status.stdout and "table migration: PENDING" in status.stdout
    refused = cli(tmp_path, backend, table, "migrate", "remove-legacy-tables")
    assert refused.returncode == 1 and "not COMPLETE" in refused.stdout
    assert set(client.list_tables()["TableNames"]) >= {coordinator, metrics}

    stored("COMPLETE")
    leases = cli(tmp_path, backend, table, "leases", "--json")
    assert leases.returncode == 0, leases.stderr
    layout = json.loads(leases.stdout)["layout"]
    assert (layout["layout"], layout["legacyTablesRemovable"]) == ("SINGLE_TABLE", True)
    checked = cli(tmp_path, backend, table, "check-config", "--for", "leases", "--table-state")
    assert checked.returncode == 0, checked.stderr
    assert f"table state of {table}:" in checked.stdout and "removable" in checked.stdout
    dry = cli(tmp_path, backend, table, "migrate", "remove-legacy-tables", "--dry-run")
    assert dry.returncode == 0 and f"would DeleteTable {coordinator}" in dry.stdout
    assert set(client.list_tables()["TableNames"]) >= {coordinator, metrics}
    done = cli(tmp_path, backend, table, "migrate", "remove-legacy-tables")
    assert done.returncode == 0, done.stdout + done.stderr
    deadline = time.monotonic() + 10
    while set(client.list_tables()["TableNames"]) & {coordinator, metrics}:
        assert time.monotonic() < deadline, "the legacy tables are still there"
        time.sleep(0.1)
    nothing = cli(tmp_path, backend, table, "migrate", "remove-legacy-tables")
    assert nothing.returncode == 0 and "nothing to remove" in nothing.stdout
