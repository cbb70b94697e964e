"""`kcl-daemon leases`: inspecting a table (fake scans, fake clock) and rendering the report."""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import SHARD_END, TRIM_HORIZON, ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.errors import DependencyUnavailable
from kcl_daemon.inspection.report import report_json, report_text
from kcl_daemon.inspection.table import inspect_lease_table
from tests.support.clocks import FakeClock


@dataclass
class Scan:
    leases: list[Lease]
    skipped: list[str] = field(default_factory=list)


SEQ = ExtendedSequenceNumber("49590338271490256608559692538361571095921575989136588898", 2)
FIRST = [
    Lease("shardId-000000000000", SHARD_END, lease_owner="zone-a-1", lease_counter=7),
    Lease(
        "shardId-000000000001",
        SEQ,
        lease_owner="zone-a-1",
        lease_counter=3,
        parent_shard_ids=frozenset({"shardId-000000000000"}),
    ),
    Lease("shardId-000000000002", TRIM_HORIZON, lease_owner="zone-b-1", lease_counter=5),
    Lease("shardId-000000000003", TRIM_HORIZON),
]


def scans(*answers: list[Lease], skipped: list[str] | None = None):  # type: ignore[no-untyped-def]
    queue = list(answers)

    def scan() -> Scan:
        return Scan(queue.pop(0) if len(queue) > 1 else queue[0], skipped or [])

    return scan


async def test_one_scan_reports_expiry_as_unknown() -> None:
    report = await inspect_lease_table(
        "app", scans(FIRST), list_shards=None, clock=FakeClock(), cluster_separator="-"
    )
    data = report_json(report)
    assert data["expired"] is None and data["shardsWithoutLease"] is None
    assert data["leasesPerWorker"] == {"zone-a-1": 2, "zone-b-1": 1}
    assert data["leasesPerCluster"] == {"zone": 3}
    assert data["unclaimed"] == ["shardId-000000000003"] and data["finished"] == ["shardId-000000000000"]
    lease = data["leases"][1]  # type: ignore[index]
    assert lease == {
        "leaseKey": "shardId-000000000001",
        "leaseOwner": "zone-a-1",
        "leaseCounter": 3,
        "checkpoint": SEQ.sequence_number,
        "checkpointSubSequenceNumber": 2,
        "parentShardIds": ["shardId-000000000000"],
        "expired": None,
    }
    orjson.dumps(data)  # serializable as is
    text = report_text(report)
    assert "expired: not checked (use --check-expiry)" in text
    assert "zone-a-1" in text and f"{SEQ.sequence_number}/2" in text


async def test_two_scans_a_failover_apart_find_the_leases_whose_counter_stood_still() -> None:
    renewed = [lease.renewed() if lease.lease_owner == "zone-b-1" else lease for lease in FIRST]
    clock = FakeClock()
    report = await inspect_lease_table(
        "app", scans(FIRST, renewed), list_shards=None, clock=clock, expiry_wait_s=10.0
    )
    assert clock.now == 10.0
    assert report.distribution.expired == ("shardId-000000000000", "shardId-000000000001")
    assert "expired: 2  (shardId-000000000000 shardId-000000000001)" in report_text(report)


async def test_shards_without_a_lease_and_a_failing_shard_list() -> None:
    shards = [Shard(f"shardId-00000000000{i}") for i in range(6)]
    report = await inspect_lease_table("app", scans(FIRST), list_shards=lambda: shards, clock=FakeClock())
    assert report.distribution.shards_without_lease == ("shardId-000000000004", "shardId-000000000005")

    def broken() -> list[Shard]:
        raise DependencyUnavailable("list shards of stream s: ResourceNotFoundException")

    report = await inspect_lease_table("app", scans(FIRST), list_shards=broken, clock=FakeClock())
    assert report.shard_list_error is not None and "ResourceNotFound" in report_text(report)


async def test_skipped_items_are_listed_and_an_empty_table_renders() -> None:
    report = await inspect_lease_table(
        "app",
        scans([], skipped=["lease item 'x': leaseCounter is not a number"]),
        list_shards=None,
        clock=FakeClock(),
    )
    text = report_text(report)
    assert "0 lease(s)" in text and "skipped item: lease item 'x'" in text and "(none)" in text
