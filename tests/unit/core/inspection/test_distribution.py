"""The lease distribution report."""

from __future__ import annotations

import pytest

from kcl_daemon.core.inspection.distribution import cluster_of, summarize
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import SHARD_END, TRIM_HORIZON, ExtendedSequenceNumber


def lease(n: int, owner: str | None, checkpoint: ExtendedSequenceNumber = TRIM_HORIZON) -> Lease:
    return Lease(lease_key=f"shardId-{n:012d}", lease_counter=n, checkpoint=checkpoint, lease_owner=owner)


@pytest.mark.parametrize(
    ("worker", "cluster"),
    [("zoneA-host1", "zoneA"), ("zoneA-host-2", "zoneA"), ("solo", "solo"), ("-x", "-x"), ("a-", "a")],
)
def test_cluster_is_the_worker_id_before_its_first_dash(worker: str, cluster: str) -> None:
    assert cluster_of(worker) == cluster


def test_summary() -> None:
    leases = [
        lease(0, "east-1"),
        lease(1, "east-1"),
        lease(2, "east-2"),
        lease(3, "west-1"),
        lease(4, None),
        lease(5, "west-1", SHARD_END),
    ]
    report = summarize(
        leases,
        expired_keys=frozenset({"shardId-000000000003"}),
        shard_ids=[f"shardId-{n:012d}" for n in range(8)],
    )
    assert report.per_worker == (("east-1", 2), ("west-1", 2), ("east-2", 1))
    assert report.per_cluster == (("east", 3), ("west", 2))
    assert report.unclaimed == ("shardId-000000000004",)
    assert report.expired == ("shardId-000000000003",)
    assert report.finished == ("shardId-000000000005",)
    assert report.shards_without_lease == ("shardId-000000000006", "shardId-000000000007")
    assert [row.owner for row in report.rows][:2] == ["east-1", "east-1"]


def test_without_a_shard_list() -> None:
    assert summarize([lease(0, None)]).shards_without_lease is None


def test_expiry_is_unknown_unless_it_was_checked() -> None:
    report = summarize([lease(1, "a"), lease(2, None)])
    assert report.expired is None and all(row.expired is None for row in report.rows)
