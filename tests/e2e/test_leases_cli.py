"""`kcl-daemon leases` against a lease table Java KCL 2.x wrote (and one with a counter beyond 64 bits),
on both emulators."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.daemon import run_cli
from tests.support.emulators import Backend
from tests.support.paths import JAVA_KCL2_TABLE

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def leases_cli(
    tmp_path: Path, backend: Backend, table: str, *args: str, stream: str | None = None
) -> subprocess.CompletedProcess[str]:
    properties = tmp_path / "app.properties"
    properties.write_text(
        f"applicationName = {table}\n"
        + (f"streamName = {stream}\n" if stream else "")
        + "regionName = us-east-1\n"
        + f"kinesisEndpoint = {backend.kinesis_endpoint}\n"
        + f"dynamoDBEndpoint = {backend.dynamodb_endpoint}\n"
        + "failoverTimeMillis = 1000\n"
    )
    return run_cli("leases", *args, properties=properties)


def load_java_items(table: DynamoLeaseTable, clients: AwsClients) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(JAVA_KCL2_TABLE.read_text())["items"]
    for item in items:
        clients.dynamodb.put_item(TableName=table.table_name, Item=item)
    return items


def test_leases_json_shows_every_java_lease_with_owner_and_checkpoint(
    tmp_path: Path, backend: Backend, lease_table: DynamoLeaseTable, aws_clients: AwsClients
) -> None:
    items = load_java_items(lease_table, aws_clients)
    aws_clients.dynamodb.put_item(
        TableName=lease_table.table_name,
        Item={"leaseKey": {"S": "shardId-bad"}, "leaseCounter": {"S": "x"}, "checkpoint": {"S": "LATEST"}},
    )
    result = leases_cli(tmp_path, backend, lease_table.table_name, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    by_key = {lease["leaseKey"]: lease for lease in report["leases"]}
    assert set(by_key) == {item["leaseKey"]["S"] for item in items}
    for item in items:
        lease = by_key[item["leaseKey"]["S"]]
        assert lease["leaseOwner"] == item["leaseOwner"]["S"]
        assert lease["checkpoint"] == item["checkpoint"]["S"]
        assert lease["checkpointSubSequenceNumber"] == int(item["checkpointSubSequenceNumber"]["N"])
        assert lease["leaseCounter"] == int(item["leaseCounter"]["N"])
    assert by_key["shardId-000000000001"]["parentShardIds"] == ["shardId-000000000000"]
    assert report["leasesPerWorker"] == {"java-worker-a": 2, "java-worker-b": 2}
    assert report["leasesPerCluster"] == {"java": 4}
    assert report["finished"] == ["shardId-000000000000"] and report["unclaimed"] == []
    assert report["expired"] is None and report["shardsWithoutLease"] is None
    assert len(report["skippedItems"]) == 1 and "shardId-bad" in report["skippedItems"][0]


def test_leases_text_with_expiry_and_the_stream(
    tmp_path: Path,
    backend: Backend,
    lease_table: DynamoLeaseTable,
    aws_clients: AwsClients,
    make_stream: Any,
) -> None:
    load_java_items(lease_table, aws_clients)
    stream = make_stream(2)  # shardId-000000000000 and -001: -001 is leased, -000 too (finished)
    result = leases_cli(tmp_path, backend, lease_table.table_name, "--check-expiry", stream=stream)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "lease table" in text and "4 lease(s)" in text
    assert "java-worker-a  2" in text and "java  4" in text
    # Nobody renews the Java leases: all four are expired after one failover (1 s here).
    assert "expired: 4" in text
    assert "shards without a lease: 0" in text


def test_a_missing_table_is_a_clear_error(tmp_path: Path, backend: Backend) -> None:
    result = leases_cli(tmp_path, backend, "no-such-table")
    assert result.returncode == 1
    assert "cannot read lease table no-such-table" in result.stderr and "Traceback" not in result.stderr


def test_leases_json_names_a_counter_beyond_javas_long_as_a_skipped_item(
    tmp_path: Path, backend: Backend, lease_table: DynamoLeaseTable, aws_clients: AwsClients
) -> None:
    # Java reads leaseCounter as a long, so no worker can renew such a lease: it is a corrupt item,
    # reported with the attribute and the reason, never a traceback and never rounded.
    huge = 2**64 + 7
    aws_clients.dynamodb.put_item(
        TableName=lease_table.table_name,
        Item={
            "leaseKey": {"S": "shardId-000000000000"},
            "leaseCounter": {"N": str(huge)},
            "leaseOwner": {"S": "w-1"},
            "checkpoint": {"S": "TRIM_HORIZON"},
            "ownerSwitchesSinceCheckpoint": {"N": "0"},
        },
    )
    result = leases_cli(tmp_path, backend, lease_table.table_name, "--json")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert not [row for row in report["leases"] if row["leaseKey"] == "shardId-000000000000"]
    [skipped] = [text for text in report["skippedItems"] if "shardId-000000000000" in text]
    assert "leaseCounter" in skipped and "long range" in skipped and str(huge) in skipped
