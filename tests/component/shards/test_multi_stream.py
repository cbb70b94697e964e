"""MultiStreamSyncer over in-memory fakes and a fake clock: one shard sync per configured stream, Java's
multi-stream lease keys and attributes, streams that appear later, former streams' leases deleted after
the wait, and no deletion while a stream cannot be looked up. Single-stream sync keeps plain keys."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from kcl_daemon.aws.kinesis import ShardFilter
from kcl_daemon.core.inspection.distribution import summarize
from kcl_daemon.core.leases.lease import MAX_HASH_KEY, Lease
from kcl_daemon.core.leases.lease_codec import new_lease_item
from kcl_daemon.core.sequence import Sentinel
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.shards.multi_stream import StreamSpec
from kcl_daemon.core.stream_identity import StreamIdentity
from kcl_daemon.errors import AwsError
from kcl_daemon.shards.multi_stream import MultiStreamSyncConfig, MultiStreamSyncer, shards_by_lease_key
from kcl_daemon.shards.sync import ShardSyncConfig, ShardSyncer
from tests.support.clocks import FakeClock

HALF = (MAX_HASH_KEY + 1) // 2
TWO_SHARDS = [
    Shard("shardId-000000000000", ending_hash_key=HALF - 1),
    Shard("shardId-000000000001", starting_hash_key=HALF),
]
ORDERS = StreamIdentity("123456789012", "orders", 1700000000)
CLICKS = StreamIdentity("123456789012", "clicks", 1700000001)


@dataclass
class Scan:
    leases: list[Lease]
    skipped: list[str] = field(default_factory=list)


class Streams:
    """ListShards and DescribeStreamSummary of a fake account: name -> (identity, shards)."""

    def __init__(self) -> None:
        self.streams: dict[str, tuple[StreamIdentity, list[Shard]]] = {}
        self.failing: set[str] = set()

    def list_shards(self, stream_name: str, shard_filter: ShardFilter | None = None) -> list[Shard]:
        return self.streams[stream_name][1]

    def identity_of(self, stream_name: str) -> StreamIdentity | None:
        if stream_name in self.failing:
            raise AwsError(f"describe stream {stream_name}: access denied")
        found = self.streams.get(stream_name)
        return None if found is None else found[0]


class Table:
    def __init__(self) -> None:
        self.items: dict[str, Lease] = {}
        self.deleted: list[str] = []

    def list_leases(self) -> Scan:
        return Scan(list(self.items.values()))

    def create_lease(self, lease: Lease) -> bool:
        if lease.lease_key in self.items:
            return False
        self.items[lease.lease_key] = lease
        return True

    def delete(self, lease_key: str) -> None:
        self.deleted.append(lease_key)
        self.items.pop(lease_key, None)


def syncer(
    streams: Streams, table: Table, clock: FakeClock, specs: tuple[StreamSpec, ...], wait_s: float = 60.0
) -> MultiStreamSyncer:
    base = ShardSyncConfig(stream_name="unused", initial_position=Sentinel.LATEST, incomplete_retries=0)
    return MultiStreamSyncer(
        streams, table, MultiStreamSyncConfig(specs, base, wait_s), clock, streams.identity_of
    )


async def test_each_stream_gets_java_multi_stream_leases_at_its_own_initial_position() -> None:
    streams, table, clock = Streams(), Table(), FakeClock()
    streams.streams = {"orders": (ORDERS, TWO_SHARDS), "clicks": (CLICKS, TWO_SHARDS[:1])}
    streams.streams["clicks"] = (CLICKS, [Shard("shardId-000000000000")])
    sync = syncer(streams, table, clock, (StreamSpec("orders", Sentinel.TRIM_HORIZON), StreamSpec("clicks")))
    await sync.sync_once()
    assert sorted(table.items) == [
        "123456789012:clicks:1700000001:shardId-000000000000",
        "123456789012:orders:1700000000:shardId-000000000000",
        "123456789012:orders:1700000000:shardId-000000000001",
    ]
    order_lease = table.items["123456789012:orders:1700000000:shardId-000000000001"]
    assert order_lease.checkpoint.sequence_number == "TRIM_HORIZON"
    assert (
        table.items["123456789012:clicks:1700000001:shardId-000000000000"].checkpoint.sequence_number
        == "LATEST"
    )
    item = new_lease_item(order_lease)
    assert item["streamName"] == {"S": "123456789012:orders:1700000000"}
    assert item["shardId"] == {"S": "shardId-000000000001"}
    await sync.sync_once()  # idempotent
    assert len(table.items) == 3 and table.deleted == []


async def test_a_listed_stream_created_later_is_picked_up() -> None:
    streams, table, clock = Streams(), Table(), FakeClock()
    streams.streams = {"orders": (ORDERS, TWO_SHARDS)}
    sync = syncer(streams, table, clock, (StreamSpec("orders"), StreamSpec("clicks")))
    await sync.sync_once()
    assert sync.identities == {"orders": ORDERS, "clicks": None}
    streams.streams["clicks"] = (CLICKS, TWO_SHARDS)
    await sync.sync_once()
    assert sum(lease.stream == CLICKS.serialize() for lease in table.items.values()) == 2


async def test_a_deleted_or_recreated_stream_s_leases_go_after_the_wait() -> None:
    streams, table, clock = Streams(), Table(), FakeClock()
    streams.streams = {"orders": (ORDERS, TWO_SHARDS), "clicks": (CLICKS, TWO_SHARDS)}
    sync = syncer(streams, table, clock, (StreamSpec("orders"), StreamSpec("clicks")), wait_s=60.0)
    await sync.sync_once()
    del streams.streams["clicks"]
    recreated = StreamIdentity("123456789012", "orders", 1800000000)
    streams.streams["orders"] = (recreated, TWO_SHARDS)
    await sync.sync_once()  # the new orders stream gets its own leases; the former ones wait
    assert table.deleted == []
    assert sum(lease.stream == recreated.serialize() for lease in table.items.values()) == 2
    clock.now += 60.0
    await sync.sync_once()
    assert len(table.deleted) == 4
    assert {lease.stream for lease in table.items.values()} == {recreated.serialize()}


async def test_a_failed_lookup_never_looks_like_a_deletion() -> None:
    streams, table, clock = Streams(), Table(), FakeClock()
    streams.streams = {"orders": (ORDERS, TWO_SHARDS), "clicks": (CLICKS, TWO_SHARDS)}
    sync = syncer(streams, table, clock, (StreamSpec("orders"), StreamSpec("clicks")), wait_s=0.0)
    await sync.sync_once()
    streams.failing.add("clicks")
    with pytest.raises(AwsError):
        await sync.sync_once()
    assert table.deleted == [] and len(table.items) == 4


async def test_leases_of_a_stream_no_longer_listed_are_former() -> None:
    streams, table, clock = Streams(), Table(), FakeClock()
    streams.streams = {"orders": (ORDERS, TWO_SHARDS), "clicks": (CLICKS, TWO_SHARDS)}
    await syncer(streams, table, clock, (StreamSpec("orders"), StreamSpec("clicks"))).sync_once()
    await syncer(streams, table, clock, (StreamSpec("orders"),), wait_s=0.0).sync_once()
    assert {lease.stream for lease in table.items.values()} == {ORDERS.serialize()}


async def test_single_stream_sync_keeps_plain_shard_id_keys() -> None:
    streams, table, clock = Streams(), Table(), FakeClock()
    streams.streams = {"orders": (ORDERS, TWO_SHARDS)}
    config = ShardSyncConfig(stream_name="orders", incomplete_retries=0)
    await ShardSyncer(streams, table, config, clock).sync_once()
    assert sorted(table.items) == ["shardId-000000000000", "shardId-000000000001"]
    assert all(lease.stream_identifier is None and lease.stream is None for lease in table.items.values())


async def test_the_leases_report_compares_every_stream_s_shards_with_the_lease_keys() -> None:
    streams, table, clock = Streams(), Table(), FakeClock()
    streams.streams = {"orders": (ORDERS, TWO_SHARDS), "clicks": (CLICKS, TWO_SHARDS)}
    await syncer(streams, table, clock, (StreamSpec("orders"),)).sync_once()
    specs = (StreamSpec("orders"), StreamSpec("clicks"), StreamSpec("missing"))
    listed = shards_by_lease_key(streams, streams.identity_of, specs)
    assert len(listed) == 4
    report = summarize(table.list_leases().leases, shard_ids=[shard.shard_id for shard in listed])
    assert report.shards_without_lease == (
        "123456789012:clicks:1700000001:shardId-000000000000",
        "123456789012:clicks:1700000001:shardId-000000000001",
    )


async def test_the_shard_count_metric_is_the_sum_over_the_streams() -> None:
    streams, table, clock = Streams(), Table(), FakeClock()
    streams.streams = {"orders": (ORDERS, TWO_SHARDS), "clicks": (CLICKS, TWO_SHARDS[:1] + TWO_SHARDS[1:])}
    sync = syncer(streams, table, clock, (StreamSpec("orders"), StreamSpec("clicks")))
    counts: list[int] = []

    class Observer:
        def shards_listed(self, shard_count: int) -> None:
            counts.append(shard_count)

    sync.observer = Observer()  # type: ignore[assignment]
    await sync.sync_once()
    del streams.streams["clicks"]
    await sync.sync_once()
    assert counts == [4, 2]
