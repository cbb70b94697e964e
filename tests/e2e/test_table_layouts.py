"""kcl-daemon fleets join tables built item by item in each layout and each table-migration state
(contract §9.1, §9.2), on both emulators: two workers take the dead Java fleet's leases and process the
records, and write where that state says (worker metrics, the lock) and nowhere else.

Each table is what a Java fleet leaves behind: its leases (owned by a dead Java worker), its
``Migration3.0``, a dead leader's lock (a short ``leaseDuration`` so the test need not wait Java's two
minutes) and a stale worker-metrics row, in the places of the state.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend
from tests.support.figures import FIGURES
from tests.support.fleet import owners
from tests.support.recorder import data_of
from tests.support.single_table import LayoutFleet, legacy_tables
from tests.support.streams import put

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

STALE = int(time.time()) - 3600


@pytest.fixture
def legacy_names(aws_clients: AwsClients, lease_table: DynamoLeaseTable) -> Iterator[tuple[str, str]]:
    """The lease table's coordinator-state and worker-metrics table names, deleted afterwards."""
    with legacy_tables(aws_clients.dynamodb, lease_table.table_name) as names:
        yield names


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _tm(status: str) -> dict[str, Any]:
    return {
        "tm": _s(f"TABLE_MIGRATION_STATUS_{status}"),
        "mb": _s("java-1"),
        "mts": _n(int(time.time() * 1000)),
        "h": {"L": []},
    }


CV = {"cv": _s("CLIENT_VERSION_3X"), "mb": _s("java-1"), "mts": _n(1), "h": {"L": []}}
LOCK = {"ownerName": _s("java-dead"), "leaseDuration": _s("1000"), "recordVersionNumber": _s("dead-rvn")}
JAVA_ROW = {"lut": _n(STALE), "sts": {"M": {}}, "opr": {"M": {}}}

#: state -> (legacy coordinator items or None: no table, lease-table items, the legacy worker-metrics row or
#: None: no table, whether the lease table is a 3.5 one, extra worker keys)
STATES: dict[str, tuple[dict[str, dict[str, Any]] | None, dict[str, dict[str, Any]], Any, bool, str]] = {
    "single-table": (
        None,
        {
            "Migration3.0": {**CV, "entityType": _s("CLIENT_VERSION_MIGRATION")},
            "Leader": {**LOCK, "entityType": _s("LEADER")},
        },
        None,
        True,
        "",
    ),
    "3.0-3.4": ({"Migration3.0": CV, "Leader": LOCK}, {}, JAVA_ROW, False, ""),
    "INIT": ({"Migration3.0": CV, "Leader": LOCK, "TableMigration3.5": _tm("INIT")}, {}, JAVA_ROW, False, ""),
    "DEPLOYED": (
        {"Migration3.0": CV, "Leader": LOCK, "TableMigration3.5": _tm("DEPLOYED")},
        {},
        JAVA_ROW,
        False,
        "",
    ),
    "PENDING": (
        {"Leader": LOCK, "TableMigration3.5": _tm("PENDING")},
        {"Migration3.0": {**CV, "entityType": _s("CLIENT_VERSION_MIGRATION")}},
        None,
        True,
        "migrateAllEntitiesToLeaseTable = true\n",
    ),
    "COMPLETE": (
        {"TableMigration3.5": _tm("COMPLETE")},
        {
            "Migration3.0": {**CV, "entityType": _s("CLIENT_VERSION_MIGRATION")},
            "TableMigration3.5": {**_tm("COMPLETE"), "entityType": _s("TABLE_MIGRATION")},
            "Leader": {**LOCK, "entityType": _s("LEADER")},
        },
        JAVA_ROW,
        True,
        "",
    ),
}


def _create(client: Any, name: str, key: str) -> None:
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    deadline = time.monotonic() + 10
    while client.describe_table(TableName=name)["Table"]["TableStatus"] != "ACTIVE":  # dynalite: CREATING
        assert time.monotonic() < deadline, f"{name} not ACTIVE"
        time.sleep(0.02)


def build(client: Any, table: str, legacy_names: tuple[str, str], state: str, shards: list[str]) -> None:
    """The tables of one state, item by item (contract §9.1's shapes)."""
    legacy, lease_items, legacy_row, java_35, _extra = STATES[state]
    coordinator, metrics = legacy_names
    for shard in shards:  # the dead Java fleet's leases (3.5 marks the ones it creates)
        item = {
            "leaseKey": _s(shard),
            "leaseOwner": _s("java-dead"),
            "leaseCounter": _n(7),
            "checkpoint": _s("TRIM_HORIZON"),
            "checkpointSubSequenceNumber": _n(0),
            "ownerSwitchesSinceCheckpoint": _n(0),
        }
        client.put_item(TableName=table, Item={**item, "entityType": _s("LEASE")} if java_35 else item)
    for key, attributes in lease_items.items():
        client.put_item(TableName=table, Item={"leaseKey": _s(key), **attributes})
    if java_35:
        client.put_item(
            TableName=table,
            Item={
                "leaseKey": _s("java-dead"),
                **JAVA_ROW,
                "sup": _n(1),
                "slu": _n(STALE),
                "entityType": _s("WORKER_METRIC_STATS"),
            },
        )
    if legacy is not None:
        _create(client, coordinator, "key")
        for key, attributes in legacy.items():
            client.put_item(TableName=coordinator, Item={"key": _s(key), **attributes})
    if legacy_row is not None:
        _create(client, metrics, "wid")
        client.put_item(TableName=metrics, Item={"wid": _s("java-dead"), **legacy_row})


def _table_exists(client: Any, name: str) -> bool:
    try:
        client.describe_table(TableName=name)
    except client.exceptions.ResourceNotFoundException:
        return False
    return True


def _get(client: Any, table: str, key: str, value: str) -> dict[str, Any] | None:
    item: dict[str, Any] | None = client.get_item(
        TableName=table, Key={key: _s(value)}, ConsistentRead=True
    ).get("Item")
    return item


@pytest.mark.parametrize("state", list(STATES))
def test_a_fleet_joins_each_layout_and_state_and_keeps_processing(
    state: str,
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    legacy_names: tuple[str, str],
    make_stream: Callable[[int], str],
) -> None:
    client = aws_clients.dynamodb
    stream = make_stream(2)
    shards = [s["ShardId"] for s in aws_clients.kinesis.list_shards(StreamName=stream)["Shards"]]
    table = lease_table.table_name
    build(client, table, legacy_names, state, shards)
    coordinator, metrics = legacy_names
    fleet = LayoutFleet(tmp_path, backend, table, stream)
    fleet.extra = STATES[state][4]
    put(aws_clients, stream, range(100))
    started = time.monotonic()
    try:
        fleet.start("py-a")
        fleet.start("py-b")
        fleet.wait(
            lambda: sorted(owners(lease_table)) == ["py-a", "py-b"], 45, f"{state}: both workers hold leases"
        )
        fleet.wait(
            lambda: data_of(fleet.recorded()) >= {f"record-{n}" for n in range(100)}, 45, "every record"
        )
        took = time.monotonic() - started
        in_lease_table = state in ("single-table", "PENDING", "COMPLETE")
        lock_table, lock_key = (
            (table, "leaseKey") if state in ("single-table", "COMPLETE") else (coordinator, "key")
        )
        fleet.wait(
            lambda: (
                (_get(client, lock_table, lock_key, "Leader") or {}).get("ownerName", {}).get("S")
                in ("py-a", "py-b")
            ),
            15,
            f"{state}: the lock taken where it lives",
        )
        lock = _get(client, lock_table, lock_key, "Leader")
        assert lock is not None
        assert ("entityType" in lock) == (lock_table == table)
        for worker in ("py-a", "py-b"):
            row = (
                _get(client, table, "leaseKey", worker)
                if in_lease_table
                else _get(client, metrics, "wid", worker)
            )
            assert row is not None, f"{state}: {worker}'s metrics are not where they belong"
            assert row["sup"] == _n(1)
            if in_lease_table:
                assert row["entityType"] == _s("WORKER_METRIC_STATS")
                if _table_exists(client, metrics):
                    assert _get(client, metrics, "wid", worker) is None, (
                        "a worker still writes the legacy table"
                    )
            else:
                assert _get(client, table, "leaseKey", worker) is None, (
                    "a worker metrics row in the lease table"
                )
        if state == "single-table":
            assert not _table_exists(client, coordinator) and not _table_exists(client, metrics)
        if state == "COMPLETE":
            legacy_row = _get(client, metrics, "wid", "java-dead")
            assert legacy_row is not None and legacy_row["lut"] == _n(STALE)  # untouched
            assert _get(client, coordinator, "key", "Leader") is None
        if state in ("PENDING", "DEPLOYED", "COMPLETE"):  # nobody rolled anything back or forward
            stored = _get(client, coordinator, "key", "TableMigration3.5")
            assert stored is not None and stored["tm"] == _s(f"TABLE_MIGRATION_STATUS_{state}")
    finally:
        fleet.close()
    FIGURES[f"fleet joins {state} on {backend.name}"] = f"2 workers processing {took:.1f}s after start"
