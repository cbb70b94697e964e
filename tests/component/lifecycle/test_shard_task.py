"""ShardTask over fakes: waiting on parents, finished leases, and the child leases at shard end."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from random import Random

import pytest

from kcl_daemon.core.leases.lease import MAX_HASH_KEY, Lease
from kcl_daemon.core.sequence import SHARD_END, TRIM_HORIZON, ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import ChildShard, Shard
from kcl_daemon.errors import CheckpointRefused, LeaseConflict, Throttled, TransientNetwork
from kcl_daemon.lifecycle.checkpoint_store import LeaseCheckpointStore
from kcl_daemon.lifecycle.shard_consumer import ConsumerSettings
from kcl_daemon.lifecycle.shard_task import ShardTask, ShardTaskContext
from tests.support.clocks import FakeClock

HALF = (MAX_HASH_KEY + 1) // 2


class FakeTable:
    def __init__(self, *leases: Lease) -> None:
        self.items = {lease.lease_key: lease for lease in leases}
        self.child_ids: dict[str, list[str]] = {}

    def get_lease(self, lease_key: str, *, consistent: bool = False) -> Lease | None:
        return self.items.get(lease_key)

    def create_lease(self, lease: Lease) -> bool:
        if lease.lease_key in self.items:
            return False
        self.items[lease.lease_key] = lease
        return True

    def update_child_shard_ids(self, lease_key: str, child_shard_ids: Iterable[str]) -> bool:
        self.child_ids[lease_key] = list(child_shard_ids)
        return True


class FakeCoordinator:
    def __init__(self, *held: Lease) -> None:
        self.held = {lease.lease_key: lease for lease in held}
        self.dropped: list[str] = []

    def held_lease(self, lease_key: str) -> Lease | None:
        return self.held.get(lease_key)

    async def checkpoint(
        self, lease_key: str, target: ExtendedSequenceNumber, *, child_shard_ids: Iterable[str] | None = None
    ) -> Lease:
        self.held[lease_key] = replace(self.held[lease_key], checkpoint=target)
        return self.held[lease_key]

    def may_deliver(self, lease_key: str, expected_batch_s: float) -> bool:
        return lease_key in self.held

    def drop(self, lease_key: str, why: str) -> None:
        self.held.pop(lease_key, None)
        self.dropped.append(lease_key)


@dataclass
class EndedSource:
    child_shards: tuple[ChildShard, ...] | None

    async def start(self, after: ExtendedSequenceNumber) -> None:
        pass

    async def next_batch(self) -> None:
        return None


def context(
    table: FakeTable, coordinator: FakeCoordinator, clock: FakeClock, cleanup: list[str], **kw: object
) -> ShardTaskContext:
    async def no_child() -> object:
        raise AssertionError("no child may start")

    return ShardTaskContext(
        coordinator=coordinator,
        table=table,
        io_pool=ThreadPoolExecutor(1),
        make_source=lambda shard: EndedSource(()),
        launch_child=no_child,  # type: ignore[arg-type]
        consumer_settings=ConsumerSettings(),
        clock=clock,
        enqueue_cleanup=cleanup.append,
        parent_poll_s=10.0,
        task_backoff_s=0.5,
        **kw,  # type: ignore[arg-type]
    )


async def test_a_child_waits_until_its_parent_lease_is_at_shard_end() -> None:
    parent = Lease("p", TRIM_HORIZON, lease_owner="other")
    child = Lease("c", SHARD_END, lease_owner="me", parent_shard_ids=frozenset({"p"}))
    table, clock, cleanup = FakeTable(parent, child), FakeClock(), []
    task = ShardTask(child, context(table, FakeCoordinator(child), clock, cleanup))

    def parent_finishes_at_30s() -> None:
        if clock.now >= 30:
            table.items["p"] = replace(parent, checkpoint=SHARD_END)

    clock.on_sleep.append(parent_finishes_at_30s)
    assert await task.run() is None
    assert clock.now == 30.0, "re-checked every parentShardPollIntervalMillis"
    assert cleanup == ["c"], "a lease already at SHARD_END starts no child and goes to cleanup"


async def test_a_lease_lost_while_waiting_on_parents_ends_the_wait() -> None:
    parent = Lease("p", TRIM_HORIZON, lease_owner="other")
    child = Lease("c", TRIM_HORIZON, lease_owner="me", parent_shard_ids=frozenset({"p"}))
    table, clock, cleanup = FakeTable(parent, child), FakeClock(), []
    task = ShardTask(child, context(table, FakeCoordinator(child), clock, cleanup))
    clock.on_sleep.append(task.lease_lost)
    assert await task.run() is None and task.consumer is None and cleanup == []


def split_children() -> tuple[ChildShard, ...]:
    return (
        ChildShard("c1", ("p",), 0, HALF - 1),
        ChildShard("c2", ("p",), HALF, MAX_HASH_KEY),
    )


async def test_at_shard_end_the_child_leases_are_created_and_recorded_on_the_parent() -> None:
    parent = Lease("p", ExtendedSequenceNumber("5"), lease_owner="me", lease_counter=3)
    table, coordinator = FakeTable(parent), FakeCoordinator(parent)
    task = ShardTask(parent, context(table, coordinator, FakeClock(), []))
    task._source = EndedSource(split_children())
    assert await task.before_shard_end()
    for key, (lo, hi) in {"c1": (0, HALF - 1), "c2": (HALF, MAX_HASH_KEY)}.items():
        lease = table.items[key]
        assert (
            lease.checkpoint == TRIM_HORIZON and lease.parent_shard_ids == {"p"} and lease.lease_owner is None
        )
        assert (lease.starting_hash_key, lease.ending_hash_key) == (lo, hi)
    assert table.child_ids == {"p": ["c1", "c2"]}
    assert task._store.child_shard_ids == ("c1", "c2")


async def test_a_merge_with_one_parent_leased_backs_off_until_the_other_appears() -> None:
    left = Lease("left", ExtendedSequenceNumber("5"), lease_owner="me")
    table, coordinator, clock = FakeTable(left), FakeCoordinator(left), FakeClock()
    task = ShardTask(left, context(table, coordinator, clock, [], rng=Random(1)))
    task._source = EndedSource((ChildShard("merged", ("left", "right"), 0, MAX_HASH_KEY),))

    def right_appears() -> None:
        if clock.now >= 1.5:
            table.items["right"] = Lease("right", TRIM_HORIZON)

    clock.on_sleep.append(right_appears)
    assert await task.before_shard_end()
    assert clock.now == pytest.approx(1.5) and "merged" in table.items


async def test_a_merge_child_listing_one_parent_gives_the_lease_up() -> None:
    left = Lease("left", ExtendedSequenceNumber("5"), lease_owner="me")
    table, coordinator = FakeTable(left), FakeCoordinator(left)
    task = ShardTask(left, context(table, coordinator, FakeClock(), []))
    task._source = EndedSource((ChildShard("merged", ("left",), 0, MAX_HASH_KEY),))
    assert not await task.before_shard_end()
    assert coordinator.dropped == ["left"] and "merged" not in table.items


def test_shard_of_a_lease_without_a_hash_range_is_the_whole_range() -> None:
    from kcl_daemon.lifecycle.shard_task import shard_of

    assert shard_of(Lease("s", TRIM_HORIZON)) == Shard("s", starting_hash_key=0, ending_hash_key=MAX_HASH_KEY)


@pytest.mark.parametrize(
    ("error", "java_name"),
    [
        (LeaseConflict("counter moved"), "ShutdownException"),
        (Throttled("ProvisionedThroughputExceededException"), "ThrottlingException"),
        (TransientNetwork("connection reset"), "KinesisClientLibDependencyException"),
    ],
)
async def test_checkpoint_store_failures_reach_the_child_with_java_names(
    error: Exception, java_name: str
) -> None:
    class Failing(FakeCoordinator):
        async def checkpoint(self, lease_key: str, target: ExtendedSequenceNumber, **_: object) -> Lease:
            raise error

    lease = Lease("s", TRIM_HORIZON, lease_owner="me")
    store = LeaseCheckpointStore(Failing(lease), "s")
    assert await store.load() == TRIM_HORIZON
    with pytest.raises(CheckpointRefused) as refused:
        await store.save(ExtendedSequenceNumber("9"))
    assert refused.value.java_name == java_name


async def test_checkpoint_store_of_a_lease_no_longer_held() -> None:
    store = LeaseCheckpointStore(FakeCoordinator(), "gone")
    with pytest.raises(CheckpointRefused, match="not held"):
        await store.load()


class FlakyCoordinator(FakeCoordinator):
    """The lease table fails the first ``failures`` checkpoints (a 500, then a throttle, ...)."""

    def __init__(self, failures: list[Exception], *held: Lease) -> None:
        super().__init__(*held)
        self.failures = failures
        self.attempts = 0

    async def checkpoint(
        self, lease_key: str, target: ExtendedSequenceNumber, *, child_shard_ids: Iterable[str] | None = None
    ) -> Lease:
        self.attempts += 1
        if self.failures:
            raise self.failures.pop(0)
        return await super().checkpoint(lease_key, target, child_shard_ids=child_shard_ids)


async def test_a_failing_shard_end_checkpoint_is_retried_in_place_not_sent_to_the_child() -> None:
    lease = Lease("s", ExtendedSequenceNumber("9"), lease_owner="me")
    failures: list[Exception] = [
        TransientNetwork("InternalServerError"),
        Throttled("ProvisionedThroughputExceededException"),
        TransientNetwork("read timeout"),
    ]
    coordinator = FlakyCoordinator(failures, lease)
    clock = FakeClock()
    store = LeaseCheckpointStore(coordinator, "s", clock=clock)
    await store.save(SHARD_END)  # no CheckpointRefused: the child never hears of the table's trouble
    assert coordinator.attempts == 4 and coordinator.held["s"].checkpoint == SHARD_END
    assert len(clock.sleeps) == 3


async def test_a_shard_end_checkpoint_stops_retrying_once_the_lease_is_lost() -> None:
    lease = Lease("s", ExtendedSequenceNumber("9"), lease_owner="me")
    coordinator = FlakyCoordinator([TransientNetwork("500")] * 100, lease)
    clock = FakeClock()
    clock.on_sleep.append(lambda: coordinator.held.clear() if clock.now > 3 else None)
    store = LeaseCheckpointStore(coordinator, "s", clock=clock)
    with pytest.raises(CheckpointRefused) as refused:
        await store.save(SHARD_END)
    assert refused.value.java_name == "ShutdownException"


class FlakyTable(FakeTable):
    def __init__(self, failures: int, *leases: Lease) -> None:
        super().__init__(*leases)
        self.failures = {"get": failures, "create": failures, "update": failures}

    def _maybe_fail(self, what: str) -> None:
        if self.failures[what]:
            self.failures[what] -= 1
            raise TransientNetwork(f"{what}: InternalServerError")

    def get_lease(self, lease_key: str, *, consistent: bool = False) -> Lease | None:
        self._maybe_fail("get")
        return super().get_lease(lease_key, consistent=consistent)

    def create_lease(self, lease: Lease) -> bool:
        self._maybe_fail("create")
        return super().create_lease(lease)

    def update_child_shard_ids(self, lease_key: str, child_shard_ids: Iterable[str]) -> bool:
        self._maybe_fail("update")
        return super().update_child_shard_ids(lease_key, child_shard_ids)


async def test_lease_table_errors_while_creating_child_leases_are_retried_in_place() -> None:
    parent = Lease("p", ExtendedSequenceNumber("5"), lease_owner="me", lease_counter=3)
    table, coordinator = FlakyTable(2, parent), FakeCoordinator(parent)
    task = ShardTask(parent, context(table, coordinator, FakeClock(), []))
    task._source = EndedSource(split_children())
    assert await task.before_shard_end()  # today: the error escapes and the shard's child is restarted
    assert {"c1", "c2"} <= set(table.items) and table.child_ids == {"p": ["c1", "c2"]}
