"""The DynamoDB lease table and ListShards against moto_server and against kinesalite + dynalite."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest

from kcl_daemon.aws.clients import AwsClients, ClientSettings, build_clients
from kcl_daemon.aws.kinesis import Kinesis, ShardFilter, ShardFilterType
from kcl_daemon.aws.lease_table import LEASE_OWNER_INDEX, DynamoLeaseTable
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.restart_grace import RESTART_ATTRIBUTE, grace_until
from kcl_daemon.core.sequence import SHARD_END, TRIM_HORIZON, ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import hash_range_is_complete
from kcl_daemon.errors import DependencyUnavailable, LeaseConflict, TransientNetwork
from tests.support.emulators import Backend
from tests.support.streams import wait_for_stream

pytestmark = pytest.mark.integration

KEY = "shardId-000000000000"

#: moto_server serves requests on threads and checks a condition, then writes, with no lock between: on a
#: loaded machine two conditional writes racing on one item both pass (seen with 3 test workers on 2
#: cores). DynamoDB and dynalite (one event loop) apply each write atomically; the race tests run there.
MOTO_NOT_ATOMIC = "moto_server's conditional writes are not atomic under concurrent requests"


def raw_item(table: DynamoLeaseTable, clients: AwsClients, key: str = KEY) -> dict[str, Any]:
    response = clients.dynamodb.get_item(
        TableName=table.table_name, Key={"leaseKey": {"S": key}}, ConsistentRead=True
    )
    return dict(response["Item"])


def new_lease(key: str = KEY) -> Lease:
    return Lease(key, TRIM_HORIZON, starting_hash_key=0, ending_hash_key=2**128 - 1)


def created(table: DynamoLeaseTable, key: str = KEY) -> Lease:
    assert table.create_lease(new_lease(key))
    lease = table.get_lease(key, consistent=True)
    assert lease is not None
    return lease


def assert_unchanged(table: DynamoLeaseTable, clients: AwsClients, action: Callable[[], object]) -> None:
    """``action`` raises LeaseConflict and leaves the stored item exactly as it was."""
    before = raw_item(table, clients)
    with pytest.raises(LeaseConflict):
        action()
    assert raw_item(table, clients) == before


def test_table_is_created_with_the_owner_index(
    lease_table: DynamoLeaseTable, aws_clients: AwsClients
) -> None:
    table = aws_clients.dynamodb.describe_table(TableName=lease_table.table_name)["Table"]
    assert table["KeySchema"] == [{"AttributeName": "leaseKey", "KeyType": "HASH"}]
    assert table["TableStatus"] == "ACTIVE"
    (index,) = table["GlobalSecondaryIndexes"]
    assert index["IndexName"] == LEASE_OWNER_INDEX
    assert index["KeySchema"] == [
        {"AttributeName": "leaseOwner", "KeyType": "HASH"},
        {"AttributeName": "leaseKey", "KeyType": "RANGE"},
    ]
    assert index["Projection"]["ProjectionType"] == "KEYS_ONLY"
    assert not lease_table.create_table_if_missing(wait_s=5)  # already there: nothing to do


def test_create_is_idempotent_and_never_overwrites(lease_table: DynamoLeaseTable) -> None:
    lease = created(lease_table)
    assert lease == replace(new_lease(), entity_type="LEASE")
    taken = lease_table.take(lease, "worker-a")
    assert not lease_table.create_lease(new_lease())
    assert lease_table.get_lease(KEY, consistent=True) == taken
    assert lease_table.get_lease("shardId-none") is None


def test_owner_index_finds_the_leases_of_a_worker(
    lease_table: DynamoLeaseTable, aws_clients: AwsClients
) -> None:
    lease_table.take(created(lease_table, "shardId-1"), "worker-a")
    created(lease_table, "shardId-2")
    response = aws_clients.dynamodb.query(
        TableName=lease_table.table_name,
        IndexName=LEASE_OWNER_INDEX,
        KeyConditionExpression="leaseOwner = :o",
        ExpressionAttributeValues={":o": {"S": "worker-a"}},
    )
    assert [item["leaseKey"]["S"] for item in response["Items"]] == ["shardId-1"]


def test_take_then_steal_counts_owner_switches(lease_table: DynamoLeaseTable) -> None:
    lease = created(lease_table)
    mine = lease_table.take(lease, "worker-a")
    assert (mine.lease_owner, mine.lease_counter, mine.owner_switches_since_checkpoint) == ("worker-a", 1, 0)
    stolen = lease_table.take(mine, "worker-b")
    assert (stolen.lease_owner, stolen.lease_counter, stolen.owner_switches_since_checkpoint) == (
        "worker-b",
        2,
        1,
    )
    again = lease_table.take(stolen, "worker-b")  # re-taking one's own lease is not a switch
    assert (again.lease_counter, again.owner_switches_since_checkpoint) == (3, 1)


def test_renew_is_fenced_on_the_counter(lease_table: DynamoLeaseTable, aws_clients: AwsClients) -> None:
    mine = lease_table.take(created(lease_table), "worker-a")
    renewed = lease_table.renew(mine)
    assert renewed == mine.renewed()
    # A retried renew whose first attempt succeeded: the re-read shows me at counter + 1.
    assert lease_table.renew(mine) == renewed
    lease_table.take(renewed, "worker-b")
    assert_unchanged(lease_table, aws_clients, lambda: lease_table.renew(renewed))


def test_take_is_fenced_on_the_counter(lease_table: DynamoLeaseTable, aws_clients: AwsClients) -> None:
    lease = created(lease_table)
    lease_table.take(lease, "worker-a")
    assert_unchanged(lease_table, aws_clients, lambda: lease_table.take(lease, "worker-b"))


def test_checkpoint_writes_and_is_fenced(lease_table: DynamoLeaseTable, aws_clients: AwsClients) -> None:
    stolen = lease_table.take(lease_table.take(created(lease_table), "worker-a"), "worker-b")
    assert stolen.owner_switches_since_checkpoint == 1
    pending = ExtendedSequenceNumber("900", 2)
    prepared = lease_table.checkpoint(
        stolen, ExtendedSequenceNumber("12345678901234567890", 3), pending=pending
    )
    assert prepared.checkpoint == ExtendedSequenceNumber("12345678901234567890", 3)
    assert (prepared.pending_checkpoint, prepared.owner_switches_since_checkpoint) == (pending, 0)
    assert prepared.lease_counter == stolen.lease_counter + 1
    done = lease_table.checkpoint(prepared, SHARD_END, child_shard_ids=["shardId-2", "shardId-1"])
    assert done.is_shard_end and done.pending_checkpoint is None
    assert done.child_shard_ids == {"shardId-1", "shardId-2"}
    assert "pendingCheckpointSubSequenceNumber" not in raw_item(lease_table, aws_clients)
    assert_unchanged(lease_table, aws_clients, lambda: lease_table.checkpoint(prepared, TRIM_HORIZON))


def test_meta_updates_need_the_lease_and_keep_the_counter(lease_table: DynamoLeaseTable) -> None:
    lease = lease_table.take(created(lease_table), "worker-a")
    assert lease_table.update_child_shard_ids(KEY, ["shardId-7"])
    assert lease_table.update_hash_range(KEY, 5, 10)
    after = lease_table.get_lease(KEY, consistent=True)
    assert after is not None
    assert after.lease_counter == lease.lease_counter
    assert after.child_shard_ids == {"shardId-7"}
    assert (after.starting_hash_key, after.ending_hash_key) == (5, 10)
    assert not lease_table.update_child_shard_ids("shardId-none", ["shardId-7"])
    assert not lease_table.update_hash_range("shardId-none", 0, 1)
    assert lease_table.get_lease("shardId-none", consistent=True) is None


def test_evict_release_and_delete(lease_table: DynamoLeaseTable, aws_clients: AwsClients) -> None:
    mine = lease_table.take(created(lease_table), "worker-a")
    released = lease_table.release(mine)
    assert (released.lease_owner, released.lease_counter) == (None, mine.lease_counter + 1)
    assert_unchanged(lease_table, aws_clients, lambda: lease_table.release(mine))
    theirs = lease_table.take(released, "worker-b")
    assert_unchanged(lease_table, aws_clients, lambda: lease_table.evict(mine))  # owner is no longer a
    evicted = lease_table.evict(theirs)
    assert (evicted.lease_owner, evicted.lease_counter) == (None, theirs.lease_counter + 1)
    lease_table.delete(KEY)
    assert lease_table.get_lease(KEY, consistent=True) is None


def test_a_restart_mark_is_a_fenced_last_write_that_any_later_write_voids(
    lease_table: DynamoLeaseTable, aws_clients: AwsClients
) -> None:
    held = lease_table.take(created(lease_table), "w1")
    assert_unchanged(
        lease_table, aws_clients, lambda: lease_table.mark_restart(replace(held, lease_counter=0), 2e9)
    )
    marked = lease_table.mark_restart(held, 2e9)
    assert marked.lease_counter == held.lease_counter + 1 and marked.lease_owner == "w1"
    assert raw_item(lease_table, aws_clients)[RESTART_ATTRIBUTE]["M"]["owner"] == {"S": "w1"}
    read = lease_table.get_lease(KEY, consistent=True)
    assert read is not None and grace_until(read, 1e9) == 2e9
    back = lease_table.renew(read)  # the worker back: its first renewal voids the mark
    assert grace_until(back, 1e9) is None


def test_concurrent_takes_have_exactly_one_winner(lease_table: DynamoLeaseTable, backend: Backend) -> None:
    if backend.name == "moto":
        pytest.skip(MOTO_NOT_ATOMIC)  # two winners of eight seen in a fresh-clone CI on a loaded machine
    lease = created(lease_table)
    barrier = threading.Barrier(8)

    def take(worker: int) -> str | None:
        barrier.wait()
        try:
            return lease_table.take(lease, f"worker-{worker}").lease_owner
        except LeaseConflict:
            return None

    with ThreadPoolExecutor(8) as pool:
        winners = [owner for owner in pool.map(take, range(8)) if owner is not None]
    assert len(winners) == 1
    stored = lease_table.get_lease(KEY, consistent=True)
    assert stored is not None
    assert (stored.lease_owner, stored.lease_counter) == (winners[0], 1)


def test_checkpoint_racing_a_steal_has_one_winner(lease_table: DynamoLeaseTable, backend: Backend) -> None:
    if backend.name == "moto":
        pytest.skip(MOTO_NOT_ATOMIC)
    mine = lease_table.take(created(lease_table), "worker-a")
    for round_ in range(5):
        barrier = threading.Barrier(2)

        def checkpoint(
            lease: Lease = mine, seq: str = str(100 + round_), barrier: threading.Barrier = barrier
        ) -> Lease:
            barrier.wait()
            return lease_table.checkpoint(lease, ExtendedSequenceNumber(seq))

        def steal(lease: Lease = mine, barrier: threading.Barrier = barrier) -> Lease:
            barrier.wait()
            return lease_table.take(lease, "worker-b")

        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(checkpoint), pool.submit(steal)]
            errors = [future.exception() for future in futures]
        assert sum(error is None for error in errors) == 1
        assert all(error is None or isinstance(error, LeaseConflict) for error in errors)
        stored = lease_table.get_lease(KEY, consistent=True)
        assert stored is not None and stored.lease_counter == mine.lease_counter + 1
        mine = lease_table.take(stored, "worker-a")


def test_list_skips_foreign_and_corrupt_items(lease_table: DynamoLeaseTable, aws_clients: AwsClients) -> None:
    for index in range(25):
        created(lease_table, f"shardId-{index:012d}")
    foreign = [
        {"leaseKey": {"S": "Leader"}, "entityType": {"S": "LEADER"}, "ownerName": {"S": "worker-a"}},
        {
            "leaseKey": {"S": "worker-a"},
            "entityType": {"S": "WORKER_METRIC_STATS"},
            "lastUpdateTime": {"N": "1"},
        },
    ]
    corrupt = [
        {"leaseKey": {"S": "shardId-abc"}, "leaseCounter": {"S": "abc"}, "checkpoint": {"S": "LATEST"}},
        {"leaseKey": {"S": "shardId-nocheckpoint"}, "leaseCounter": {"N": "3"}},
    ]
    for item in foreign + corrupt:
        aws_clients.dynamodb.put_item(TableName=lease_table.table_name, Item=item)

    result = lease_table.list_leases(consistent=True, page_size=7)  # several Scan pages
    assert sorted(lease.lease_key for lease in result.leases) == [f"shardId-{i:012d}" for i in range(25)]
    assert len(result.skipped) == 2
    assert any("shardId-abc" in message and "leaseCounter" in message for message in result.skipped)
    assert any("shardId-nocheckpoint" in message and "checkpoint" in message for message in result.skipped)
    assert lease_table.get_lease("Leader") is None


def test_unknown_attributes_survive_every_write(
    lease_table: DynamoLeaseTable, aws_clients: AwsClients
) -> None:
    future = {
        "someFutureAttr": {"M": {"nested": {"L": [{"S": "x"}, {"N": "1"}]}, "flag": {"BOOL": True}}},
        "throughputKBps": {"N": "1.0E-4"},
        "anotherSet": {"NS": ["1", "2"]},
    }
    java_item = {
        "leaseKey": {"S": KEY},
        "leaseOwner": {"S": "java-worker"},
        "leaseCounter": {"N": "41"},
        "checkpoint": {"S": "49590338271490256608559692538361571095921575989136588802"},
        "checkpointSubSequenceNumber": {"N": "0"},
        "ownerSwitchesSinceCheckpoint": {"N": "2"},
        "parentShardId": {"SS": ["shardId-parent"]},
        "startingHashKey": {"S": "0"},
        "endingHashKey": {"S": str(2**128 - 1)},
        **future,
    }
    aws_clients.dynamodb.put_item(TableName=lease_table.table_name, Item=java_item)  # type: ignore[arg-type]
    lease = lease_table.get_lease(KEY, consistent=True)
    assert lease is not None and lease.throughput_kbps == pytest.approx(1e-4)

    lease = lease_table.take(lease, "worker-a")
    lease = lease_table.renew(lease)
    lease = lease_table.checkpoint(
        lease, ExtendedSequenceNumber("49590338271490256608559692538361571095921575989136588900")
    )
    stored = raw_item(lease_table, aws_clients)
    assert stored["someFutureAttr"] == future["someFutureAttr"]
    assert sorted(stored["anotherSet"]["NS"]) == ["1", "2"]
    assert float(stored["throughputKBps"]["N"]) == pytest.approx(1e-4)
    assert stored["parentShardId"] == {"SS": ["shardId-parent"]}
    assert "checkpointOwner" not in stored and "entityType" not in stored
    assert (stored["leaseCounter"], stored["ownerSwitchesSinceCheckpoint"]) == ({"N": "44"}, {"N": "0"})


def test_a_missing_table_is_a_dependency_error(aws_clients: AwsClients) -> None:
    table = DynamoLeaseTable(aws_clients.dynamodb, "no-such-table")
    with pytest.raises(DependencyUnavailable) as caught:
        table.get_lease(KEY)
    assert caught.value.__cause__ is not None


def test_an_unreachable_endpoint_is_transient() -> None:
    dead = "http://127.0.0.1:9"  # discard port: nothing listens
    clients = build_clients(
        ClientSettings("us-east-1", dead, dead, connect_timeout_s=0.5, read_timeout_s=0.5)
    )
    with pytest.raises(TransientNetwork) as caught:
        DynamoLeaseTable(clients.dynamodb, "t").get_lease(KEY)
    assert caught.value.retriable


def test_list_shards_covers_the_hash_space(kinesis: Kinesis, aws_clients: AwsClients) -> None:
    name = f"stream-{uuid.uuid4().hex[:8]}"
    aws_clients.kinesis.create_stream(StreamName=name, ShardCount=4)
    try:
        wait_for_stream(aws_clients, name)
        shards = kinesis.list_shards(name)
        assert len(shards) == 4 and hash_range_is_complete(shards)
        assert all(shard.is_open and shard.parent_shard_id is None for shard in shards)
        # Both emulators ignore ShardFilter; on AWS every shard of a fresh stream is open at TRIM_HORIZON too.
        filtered = kinesis.list_shards(name, ShardFilter(ShardFilterType.AT_TRIM_HORIZON))
        assert sorted(s.shard_id for s in filtered) == sorted(s.shard_id for s in shards)
    finally:
        aws_clients.kinesis.delete_stream(StreamName=name)


def test_list_shards_of_a_missing_stream(kinesis: Kinesis) -> None:
    with pytest.raises(DependencyUnavailable):
        kinesis.list_shards("no-such-stream")


def test_a_multi_stream_checkpoint_writes_stream_name_and_shard_id(
    lease_table: DynamoLeaseTable, aws_clients: AwsClients
) -> None:
    """Java's multi-stream serializer sets both attributes on every update, also for leases an older
    writer created without them."""
    key = "123456789012:orders:1700000000:shardId-000000000004"
    taken = lease_table.take(created(lease_table, key), "worker-a")  # created without the two
    lease_table.checkpoint(taken, ExtendedSequenceNumber("42"))
    item = raw_item(lease_table, aws_clients, key)
    assert item["streamName"] == {"S": "123456789012:orders:1700000000"}
    assert item["shardId"] == {"S": "shardId-000000000004"}
