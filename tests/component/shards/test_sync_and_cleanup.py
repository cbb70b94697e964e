"""ShardSyncer and LeaseCleaner over in-memory fakes and a fake clock (the logic of the shells).

The same shells run against moto_server and dynalite + kinesalite in tests/integration/leases/test_fleet.py.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

import pytest

from kcl_daemon.aws.kinesis import ShardFilter, ShardFilterType
from kcl_daemon.core.leases.lease import MAX_HASH_KEY, Lease
from kcl_daemon.core.sequence import (
    LATEST,
    SHARD_END,
    TRIM_HORIZON,
    ExtendedSequenceNumber,
    Sentinel,
)
from kcl_daemon.core.shards.cleanup import CleanupOutcome
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.errors import DependencyUnavailable, TransientNetwork
from kcl_daemon.shards.cleanup import LeaseCleaner
from kcl_daemon.shards.sync import (
    IncompleteHashRange,
    ShardListInconsistent,
    ShardSyncConfig,
    ShardSyncer,
)
from tests.support.clocks import FakeClock

HALF = (MAX_HASH_KEY + 1) // 2


@dataclass
class Scan:
    leases: list[Lease]
    skipped: list[str] = field(default_factory=list)


class FakeKinesis:
    """Ignores the ShardFilter, as moto and kinesalite do; records the filters it was given."""

    def __init__(self, *answers: list[Shard]) -> None:
        self.answers = list(answers)
        self.filters: list[ShardFilter | None] = []

    def list_shards(self, stream_name: str, shard_filter: ShardFilter | None = None) -> list[Shard]:
        self.filters.append(shard_filter)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


class FakeTable:
    def __init__(self, leases: list[Lease] = (), skipped: list[str] = ()) -> None:  # type: ignore[assignment]
        self.items = {lease.lease_key: lease for lease in leases}
        self.skipped = list(skipped)
        self.created: list[str] = []
        self.deleted: list[str] = []
        self.fail_reads = 0

    def list_leases(self) -> Scan:
        return Scan(list(self.items.values()), self.skipped)

    def create_lease(self, lease: Lease) -> bool:
        if lease.lease_key in self.items:
            return False
        self.items[lease.lease_key] = lease
        self.created.append(lease.lease_key)
        return True

    def get_lease(self, lease_key: str, *, consistent: bool = False) -> Lease | None:
        if self.fail_reads:
            self.fail_reads -= 1
            raise TransientNetwork("get_item: connection reset")
        return self.items.get(lease_key)

    def update_child_shard_ids(self, lease_key: str, child_shard_ids: object) -> bool:
        self.items[lease_key] = replace(self.items[lease_key], child_shard_ids=frozenset(child_shard_ids))  # type: ignore[arg-type]
        return True

    def delete(self, lease_key: str) -> None:
        self.items.pop(lease_key, None)
        self.deleted.append(lease_key)


def shard(
    shard_id: str, lo: int, hi: int, seq: int, parents: tuple[str, ...] = (), closed: bool = False
) -> Shard:
    return Shard(
        shard_id,
        parent_shard_id=parents[0] if parents else None,
        adjacent_parent_shard_id=parents[1] if len(parents) > 1 else None,
        starting_hash_key=lo,
        ending_hash_key=hi,
        starting_sequence_number=seq,
        ending_sequence_number=seq + 100 if closed else None,
    )


# A (whole range) was split into B (lower half) and C (upper half).
SPLIT = [
    shard("A", 0, MAX_HASH_KEY, 1, closed=True),
    shard("B", 0, HALF - 1, 200, ("A",)),
    shard("C", HALF, MAX_HASH_KEY, 200, ("A",)),
]


def syncer(
    kinesis: FakeKinesis, table: FakeTable, position: Sentinel = Sentinel.LATEST, **kw: object
) -> tuple[ShardSyncer, FakeClock]:
    clock = FakeClock()
    config = ShardSyncConfig("stream", initial_position=position, **kw)  # type: ignore[arg-type]
    return ShardSyncer(kinesis, table, config, clock), clock


@pytest.mark.parametrize(
    ("position", "filter_type", "expected"),
    [
        (Sentinel.LATEST, ShardFilterType.AT_LATEST, {"B": LATEST, "C": LATEST}),
        (Sentinel.TRIM_HORIZON, ShardFilterType.AT_TRIM_HORIZON, {"A": TRIM_HORIZON}),
    ],
)
async def test_an_empty_table_gets_the_shards_at_the_initial_position_even_if_the_filter_is_ignored(
    position: Sentinel, filter_type: ShardFilterType, expected: dict[str, ExtendedSequenceNumber]
) -> None:
    kinesis, table = FakeKinesis(SPLIT), FakeTable()
    sync, _ = syncer(kinesis, table, position)
    result = await sync.sync_once()
    assert result.empty_table and set(result.created) == set(expected)
    assert {key: lease.checkpoint for key, lease in table.items.items()} == expected
    assert kinesis.filters[0] is not None and kinesis.filters[0].type is filter_type


async def test_leases_are_created_in_starting_sequence_number_order() -> None:
    shards = [shard("s2", HALF, MAX_HASH_KEY, 50), shard("s1", 0, HALF - 1, 10)]
    table = FakeTable()
    sync, _ = syncer(FakeKinesis(shards), table, Sentinel.TRIM_HORIZON)
    await sync.sync_once()
    assert table.created == ["s1", "s2"]


async def test_an_incomplete_hash_range_is_retried_three_times_one_second_apart_then_fails() -> None:
    gap = [shard("lo", 0, HALF - 2, 1)]  # nothing covers the upper half
    kinesis, table = FakeKinesis(gap), FakeTable()
    sync, clock = syncer(kinesis, table)
    with pytest.raises(IncompleteHashRange, match="do not cover the whole hash-key range"):
        await sync.sync_once()
    assert clock.sleeps == [1.0, 1.0, 1.0] and len(kinesis.filters) == 4 and not table.items


async def test_a_range_that_completes_on_a_retry_is_synced() -> None:
    kinesis = FakeKinesis([shard("lo", 0, HALF - 1, 1)], [*SPLIT[1:]])
    table = FakeTable()
    sync, clock = syncer(kinesis, table)
    result = await sync.sync_once()
    assert set(result.created) == {"B", "C"} and clock.sleeps == [1.0]


async def test_a_non_empty_table_leases_only_new_roots_and_leaves_children_to_shard_end() -> None:
    shards = [*SPLIT, shard("G", 0, MAX_HASH_KEY, 300)]  # G: an unrelated open shard
    table = FakeTable([Lease("A", TRIM_HORIZON, lease_owner="w", lease_counter=4)])
    kinesis = FakeKinesis(shards)
    sync, _ = syncer(kinesis, table, Sentinel.TRIM_HORIZON)
    result = await sync.sync_once()
    assert not result.empty_table and result.created == ("G",)
    assert kinesis.filters == [None], "a non-empty table needs the full shard list"


async def test_a_race_with_another_worker_counts_existing_leases_without_error() -> None:
    class RacingTable(FakeTable):
        def create_lease(self, lease: Lease) -> bool:
            if lease.lease_key == "B":
                self.items["B"] = lease  # the other worker won
                return False
            return super().create_lease(lease)

    sync, _ = syncer(FakeKinesis(SPLIT), RacingTable())
    result = await sync.sync_once()
    assert result.created == ("C",) and result.already_existed == ("B",)


async def test_a_table_holding_only_corrupt_items_is_not_treated_as_empty() -> None:
    table = FakeTable(skipped=["lease item 'x': leaseCounter is not a number"])
    kinesis = FakeKinesis(SPLIT)
    sync, _ = syncer(kinesis, table)
    await sync.sync_once()
    assert kinesis.filters == [None]


async def test_children_of_open_parents_stop_the_sync_unless_ignored() -> None:
    raced = [shard("A", 0, MAX_HASH_KEY, 1), shard("B", 0, HALF - 1, 200, ("A",))]
    existing = [Lease("Z", TRIM_HORIZON, lease_owner="w")]
    sync, _ = syncer(FakeKinesis(raced), FakeTable(existing))
    with pytest.raises(ShardListInconsistent, match="raced a reshard"):
        await sync.sync_once()
    sync, _ = syncer(FakeKinesis(raced), FakeTable(existing), ignore_unexpected_child_shards=True)
    assert (await sync.sync_once()).created == ("A",)


async def test_the_loop_keeps_syncing_after_a_failure(caplog: pytest.LogCaptureFixture) -> None:
    class FlakyKinesis(FakeKinesis):
        def list_shards(self, stream_name: str, shard_filter: ShardFilter | None = None) -> list[Shard]:
            if not self.filters:
                self.filters.append(shard_filter)
                raise DependencyUnavailable("list shards of stream stream: ResourceNotFoundException")
            return super().list_shards(stream_name, shard_filter)

    table = FakeTable()
    sync, clock = syncer(FlakyKinesis(SPLIT), table, interval_s=30.0)

    def stop_at_the_third_sleep() -> None:
        if len(clock.sleeps) == 3:
            raise _Stop

    clock.on_sleep.append(stop_at_the_third_sleep)
    with caplog.at_level(logging.WARNING), pytest.raises(_Stop):
        await sync.run()
    assert clock.sleeps == [0.0, 30.0, 30.0] and set(table.items) == {"B", "C"}
    assert "shard sync of stream failed, will retry" in caplog.text


class _Stop(Exception):
    pass


# -- cleanup -------------------------------------------------------------------------------------


def parent(child_ids: tuple[str, ...] = ("B", "C"), checkpoint: ExtendedSequenceNumber = SHARD_END) -> Lease:
    return Lease("A", checkpoint, lease_owner="w", lease_counter=9, child_shard_ids=frozenset(child_ids))


def child(shard_id: str, checkpoint: ExtendedSequenceNumber) -> Lease:
    return Lease(shard_id, checkpoint, lease_owner="w", parent_shard_ids=frozenset({"A"}))


def cleaner(table: FakeTable, **kw: object) -> LeaseCleaner:
    return LeaseCleaner(table, FakeClock(), **kw)  # type: ignore[arg-type]


STARTED = ExtendedSequenceNumber("49590338271490256608559692538361571095921575989136588898")


async def test_a_finished_parent_whose_children_started_is_deleted() -> None:
    table = FakeTable([parent(), child("B", STARTED), child("C", SHARD_END)])
    clean = cleaner(table)
    clean.enqueue("A")
    decisions = await clean.clean_once()
    assert decisions["A"] is not None and decisions["A"].deletable
    assert table.deleted == ["A"] and not clean.queue


async def test_a_parent_stays_queued_while_a_child_has_not_checkpointed() -> None:
    table = FakeTable([parent(), child("B", STARTED), child("C", TRIM_HORIZON)])
    clean = cleaner(table)
    clean.enqueue("A")
    decision = (await clean.clean_once())["A"]
    assert decision is not None and decision.unstarted_child_leases == ("C",)
    assert not table.deleted and list(clean.queue) == ["A"]


async def test_a_lease_that_is_gone_leaves_the_queue() -> None:
    clean = cleaner(FakeTable())
    clean.enqueue("A")
    decision = (await clean.clean_once())["A"]
    assert decision is not None and decision.outcome is CleanupOutcome.ALREADY_GONE and not clean.queue


async def test_unknown_children_are_looked_up_and_stored_on_the_lease() -> None:
    table = FakeTable([parent(child_ids=()), child("B", STARTED), child("C", STARTED)])
    clean = cleaner(table, child_shard_lookup=lambda shard_id: ("B", "C"))
    clean.enqueue("A")
    await clean.clean_once()
    assert table.deleted == ["A"]


async def test_a_shard_the_service_no_longer_knows_is_deleted_unconditionally() -> None:
    table = FakeTable([parent(child_ids=())])
    clean = cleaner(table, child_shard_lookup=lambda shard_id: None)
    clean.enqueue("A")
    assert (await clean.clean_once()) == {"A": None}
    assert table.deleted == ["A"]


async def test_completed_parents_are_kept_when_cleanup_upon_completion_is_off() -> None:
    table = FakeTable([parent(), child("B", STARTED), child("C", STARTED)])
    clean = cleaner(table, delete_completed=False)
    clean.enqueue("A")
    await clean.clean_once()
    assert not table.deleted and list(clean.queue) == ["A"]


async def test_a_failed_read_keeps_the_entry_for_the_next_run(caplog: pytest.LogCaptureFixture) -> None:
    table = FakeTable([parent(), child("B", STARTED), child("C", STARTED)])
    table.fail_reads = 1
    clean = cleaner(table)
    clean.enqueue("A")
    with caplog.at_level(logging.WARNING):
        assert await clean.clean_once() == {}
    assert "cleaning up lease A failed, will retry" in caplog.text and list(clean.queue) == ["A"]
    await clean.clean_once()
    assert table.deleted == ["A"]


async def test_a_corrupt_item_in_cleanup_affects_that_lease_only(caplog: pytest.LogCaptureFixture) -> None:
    from kcl_daemon.core.leases.lease_codec import CorruptLeaseItem

    class CorruptA(FakeTable):
        def get_lease(self, lease_key: str, *, consistent: bool = False) -> Lease | None:
            if lease_key == "A":
                raise CorruptLeaseItem("A", "checkpoint", "'garbage' is not a sequence number")
            return super().get_lease(lease_key, consistent=consistent)

    other = replace(parent(("E",)), lease_key="D")
    table = CorruptA([parent(), child("B", STARTED), child("C", STARTED), other, child("E", STARTED)])
    clean = cleaner(table)
    clean.enqueue("A")
    clean.enqueue("D")
    with caplog.at_level(logging.WARNING):
        await clean.clean_once()  # today: CorruptLeaseItem escapes and kills the cleanup loop
    assert table.deleted == ["D"] and not clean.queue
    assert "not cleaning up lease A: corrupt lease item A: attribute checkpoint" in caplog.text
