"""The single-table item kinds on both emulators (contract §9.1, §9.3): worker metrics in the lease table
with their ``entityType`` (and never on a lease), the filtered scan, the move of legacy items in one
fenced transaction, kind-aware reads of the lease table, parallel scan, and the layout read back."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.coordinator_state import COORDINATOR_KEY, LEASE_TABLE_KEY, CoordinatorStore
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.aws.table_facts import read_table_facts
from kcl_daemon.aws.worker_metrics_table import WorkerMetricsTable
from kcl_daemon.core.leader.layout import TableLayout, describe_layout
from kcl_daemon.core.leader.worker_metrics import WorkerMetricStats
from kcl_daemon.core.leases.heartbeat import RenewalMode, worker_item_from
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import TRIM_HORIZON
from kcl_daemon.errors import LeaseConflict
from tests.support.java35 import ScriptedJava35

pytestmark = pytest.mark.integration


def _lease(key: str) -> Lease:
    return Lease(key, lease_counter=0, checkpoint=TRIM_HORIZON)


@pytest.fixture
def legacy(aws_clients: AwsClients, lease_table: DynamoLeaseTable) -> Iterator[CoordinatorStore]:
    store = CoordinatorStore(aws_clients.dynamodb, f"{lease_table.table_name}-CoordinatorState")
    yield store
    with contextlib.suppress(ClientError):
        aws_clients.dynamodb.delete_table(TableName=store.table_name)


def test_worker_metrics_live_in_the_lease_table_and_never_land_on_a_lease(
    aws_clients: AwsClients, lease_table: DynamoLeaseTable
) -> None:
    lease_table.create_lease(_lease("shardId-000000000000"))
    rows = WorkerMetricsTable(aws_clients.dynamodb, lease_table.table_name, in_lease_table=True)
    now = time.time()
    rows.publish(WorkerMetricStats("py-1", now, support_code=1, support_updated_s=now))
    java = ScriptedJava35(aws_clients.dynamodb, lease_table.table_name, "java-1")
    java.publish_metrics()
    raw = aws_clients.dynamodb.get_item(TableName=lease_table.table_name, Key={"leaseKey": {"S": "py-1"}})[
        "Item"
    ]
    assert raw["entityType"] == {"S": "WORKER_METRIC_STATS"}
    assert (raw["sup"], raw["slu"]) == ({"N": "1"}, {"N": str(int(now))})
    entries, problems = rows.scan()
    assert sorted(e.worker_id for e in entries) == ["java-1", "py-1"] and problems == []
    assert {item["leaseKey"]["S"] for item in java.scan_worker_metrics()} == {"java-1", "py-1"}
    # a worker named like a shard: the kind condition refuses to write over (or delete) the lease
    with pytest.raises(LeaseConflict):
        rows.publish(WorkerMetricStats("shardId-000000000000", now))
    with pytest.raises(LeaseConflict):
        rows.delete("shardId-000000000000")
    assert lease_table.get_lease("shardId-000000000000", consistent=True) is not None
    # lease reads skip every other kind
    assert [lease.lease_key for lease in lease_table.list_leases(consistent=True).leases] == [
        "shardId-000000000000"
    ]
    rows.delete_stale("py-1", now)
    assert [e.worker_id for e in rows.scan()[0]] == ["java-1"]


def test_legacy_items_move_in_one_transaction_fenced_on_the_legacy_lock(
    aws_clients: AwsClients, lease_table: DynamoLeaseTable, legacy: CoordinatorStore
) -> None:
    legacy.create_table_if_missing(wait_s=10, poll_s=0.05)
    legacy.put(
        "Leader",
        {"ownerName": "w1", "leaseDuration": "3000", "recordVersionNumber": "r"},
        require_absent=True,
    )
    legacy.put(
        "Migration3.0", {"cv": "CLIENT_VERSION_3X", "mb": "w1", "mts": 1, "h": []}, require_absent=True
    )
    single = CoordinatorStore(aws_clients.dynamodb, lease_table.table_name, LEASE_TABLE_KEY)

    def move(owner: str) -> None:
        raw = legacy.raw_item("Migration3.0")
        assert raw is not None
        item = single.adopt("Migration3.0", raw, COORDINATOR_KEY, "CLIENT_VERSION_MIGRATION")
        legacy.transact(
            [
                legacy.condition_check("Leader", {"ownerName": owner}),
                single.put_entry(item, require_absent=True),
                legacy.delete_entry("Migration3.0"),
            ],
            "move",
        )

    with pytest.raises(LeaseConflict):
        move("w2")  # not the legacy lock's owner: nothing moves
    assert legacy.get("Migration3.0") is not None and single.get("Migration3.0") is None
    move("w1")
    assert legacy.get("Migration3.0") is None
    moved = single.get("Migration3.0")
    assert (
        moved is not None
        and moved["entityType"] == "CLIENT_VERSION_MIGRATION"
        and moved["cv"] == "CLIENT_VERSION_3X"
    )
    assert "key" not in moved


def test_parallel_scan_reads_every_lease_once(aws_clients: AwsClients, lease_table: DynamoLeaseTable) -> None:
    for n in range(30):
        lease_table.create_lease(_lease(f"shardId-{n:012d}"))
    ScriptedJava35(aws_clients.dynamodb, lease_table.table_name, "java-1").publish_metrics()
    parallel = DynamoLeaseTable(aws_clients.dynamodb, lease_table.table_name, scan_segments=4)
    assert parallel.scan_segments() == 4
    keys = [lease.lease_key for lease in parallel.list_leases(consistent=True).leases]
    assert sorted(keys) == [f"shardId-{n:012d}" for n in range(30)]
    assert DynamoLeaseTable(aws_clients.dynamodb, lease_table.table_name).scan_segments() == 1  # automatic


def test_the_layout_is_read_back_from_the_tables(
    aws_clients: AwsClients, lease_table: DynamoLeaseTable, legacy: CoordinatorStore
) -> None:
    java = ScriptedJava35(aws_clients.dynamodb, lease_table.table_name, "java-1")
    java.create_client_version()
    java.acquire_lock()
    java.publish_metrics()
    lease_table.create_lease(_lease("shardId-000000000000"))

    def facts() -> object:
        return read_table_facts(
            aws_clients.dynamodb,
            lease_table.table_name,
            legacy.table_name,
            f"{lease_table.table_name}-WorkerMetricStats",
            now_s=time.time(),
        )

    report = describe_layout(facts())  # type: ignore[arg-type]
    assert report.layout is TableLayout.SINGLE_TABLE and report.warnings == ()
    assert report.kinds == {"LEASE": 1, "CLIENT_VERSION_MIGRATION": 1, "LEADER": 1, "WORKER_METRIC_STATS": 1}
    assert [(lock.owner, lock.place.name) for lock in report.locks] == [("java-1", "LEASE_TABLE")]
    # a 3.0-3.4 worker re-creating the legacy table beside it is called out
    legacy.create_table_if_missing(wait_s=10, poll_s=0.05)
    again = describe_layout(facts())  # type: ignore[arg-type]
    assert again.layout is TableLayout.LEGACY


def test_the_per_worker_heartbeat_lives_on_the_workers_item_in_the_worker_metrics_table(
    aws_clients: AwsClients, lease_table: DynamoLeaseTable
) -> None:
    """leaseRenewal = PER_WORKER: the heartbeat is an attribute of the worker's own item in
    ``<app>-WorkerMetricStats`` (created by the first heartbeat), never an item of the lease table."""
    lease_table.create_lease(_lease("shardId-000000000000"))
    rows = WorkerMetricsTable(aws_clients.dynamodb, lease_table.heartbeats.table_name)
    try:
        assert lease_table.heartbeat_items() == ()  # no table yet: no heartbeats
        first = lease_table.heartbeat("py-1", RenewalMode.PER_WORKER)
        second = lease_table.heartbeat("py-1", RenewalMode.PER_WORKER)
        assert (first.beat, second.beat, second.mode) == (1, 2, RenewalMode.PER_WORKER)
        assert not second.metrics  # lut 0: to Java a dead "default metric" worker, never assigned
        now = time.time()
        rows.publish(WorkerMetricStats("py-1", now))  # a metrics report on the same item keeps the heartbeat
        assert lease_table.heartbeat("py-1", RenewalMode.PER_WORKER).beat == 3
        entries, problems = rows.scan()
        assert [(e.worker_id, e.last_update_s) for e in entries] == [("py-1", float(int(now)))]
        assert not problems
        scan = lease_table.list_leases(consistent=True)
        assert [lease.lease_key for lease in scan.leases] == ["shardId-000000000000"] and scan.workers == ()
        assert [worker_item_from(item).beat for item in lease_table.heartbeat_items()] == [3]
        # withdrawn after a fall-back: only the heartbeat goes where a report shares the item
        lease_table.heartbeat("py-2", RenewalMode.PER_WORKER)
        assert lease_table.withdraw_heartbeat("py-1") and lease_table.withdraw_heartbeat("py-2")
        items = {item["wid"]["S"]: item for item in lease_table.heartbeat_items()}
        assert set(items) == {"py-1"} and "kdhb" not in items["py-1"] and "lut" in items["py-1"]
        assert not lease_table.withdraw_heartbeat("py-2")  # nothing left to withdraw
    finally:
        with contextlib.suppress(ClientError):
            aws_clients.dynamodb.delete_table(TableName=rows.table_name)
