"""The Spark lease bridge over an in-memory lease table: join (refuse, wait, take), checkpoints, release."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kcl_daemon.aws.lease_table import ScanResult
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import SHARD_END, TRIM_HORIZON, ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.spark.offsets import AT_SHARD_END, SourceOffset, after
from kcl_daemon.errors import LeaseConflict
from kcl_daemon.spark.lease_bridge import LeaseBridge, LeasesHeld, release_owned, write_checkpoints


class FakeClock:
    """Synchronous fake time: ``advance`` is the bridge's sleep."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeTable:
    """Counter-fenced writes like DynamoLeaseTable; ``renewer`` bumps a foreign owner's counters."""

    table_name = "app"

    def __init__(self, *leases: Lease) -> None:
        self.items = {lease.lease_key: lease for lease in leases}
        self.renewing: set[str] = set()  # owners that renew whenever the table is scanned
        #: owners renewing per worker (leaseRenewal = PER_WORKER): their heartbeat advances at each read
        self.beating: dict[str, int] = {}

    def heartbeat_items(self) -> list[dict[str, dict[str, str]]]:
        self.beating = {worker: beat + 1 for worker, beat in self.beating.items()}
        return [
            {"wid": {"S": w}, "kdhb": {"N": str(n)}, "kdrm": {"S": "PER_WORKER"}, "lut": {"N": "0"}}
            for w, n in self.beating.items()
        ]

    def list_leases(self, *, consistent: bool = False) -> ScanResult:
        for key, lease in list(self.items.items()):
            if lease.lease_owner in self.renewing:
                self.items[key] = lease.renewed()
        return ScanResult(tuple(self.items.values()), ())

    def get_lease(self, key: str, *, consistent: bool = False) -> Lease | None:
        return self.items.get(key)

    def _fenced(self, lease: Lease) -> None:
        if self.items[lease.lease_key].lease_counter != lease.lease_counter:
            raise LeaseConflict(f"{lease.lease_key} moved")

    def take(self, lease: Lease, owner: str) -> Lease:
        self._fenced(lease)
        self.items[lease.lease_key] = lease.taken_by(owner)
        return self.items[lease.lease_key]

    def renew(self, lease: Lease) -> Lease:
        self._fenced(lease)
        self.items[lease.lease_key] = lease.renewed()
        return self.items[lease.lease_key]

    def release(self, lease: Lease) -> Lease:
        self._fenced(lease)
        self.items[lease.lease_key] = replace(lease, lease_owner=None, lease_counter=lease.lease_counter + 1)
        return self.items[lease.lease_key]

    def checkpoint(
        self, lease: Lease, checkpoint: ExtendedSequenceNumber, *, child_shard_ids: object = None
    ) -> Lease:
        self._fenced(lease)
        self.items[lease.lease_key] = replace(
            lease, checkpoint=checkpoint, lease_counter=lease.lease_counter + 1
        )
        return self.items[lease.lease_key]

    def create_lease(self, lease: Lease) -> bool:
        if lease.lease_key in self.items:
            return False
        self.items[lease.lease_key] = lease
        return True


def bridge(table: FakeTable, clock: FakeClock, wait_s: float = 0.0) -> LeaseBridge:
    return LeaseBridge(
        table,  # type: ignore[arg-type]
        "spark:app",
        failover_s=10.0,
        wait_timeout_s=wait_s,
        sleep=clock.advance,
        monotonic=clock.monotonic,
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_a_worker_that_keeps_renewing_makes_the_query_refuse(clock: FakeClock) -> None:
    table = FakeTable(Lease("s0", TRIM_HORIZON, lease_owner="daemon-1", lease_counter=4))
    table.renewing.add("daemon-1")
    with pytest.raises(LeasesHeld, match="daemon-1"):
        bridge(table, clock).join()
    assert table.items["s0"].lease_owner == "daemon-1"


def test_a_worker_keeping_its_leases_by_heartbeat_makes_the_query_refuse(clock: FakeClock) -> None:
    """leaseRenewal = PER_WORKER: the counter stands still, the owner's heartbeat moves: not free."""
    table = FakeTable(Lease("s0", TRIM_HORIZON, lease_owner="daemon-1", lease_counter=4))
    table.beating["daemon-1"] = 1
    with pytest.raises(LeasesHeld, match="daemon-1"):
        bridge(table, clock).join()
    assert table.items["s0"].lease_owner == "daemon-1"
    table.beating.clear()  # it stops (its item goes): its leases are free one failover on
    joining = bridge(table, clock)
    joining.join()
    assert table.items["s0"].lease_owner == "spark:app"
    joining.release()


def test_the_query_waits_for_a_worker_to_go_then_takes_every_lease(clock: FakeClock) -> None:
    table = FakeTable(
        Lease("s0", ExtendedSequenceNumber("10", 2), lease_owner="daemon-1", lease_counter=4),
        Lease("s1", TRIM_HORIZON),
    )
    table.renewing.add("daemon-1")
    joining = bridge(table, clock, wait_s=60.0)
    original_sleep = clock.advance

    def daemon_stops_after_20_s(seconds: float) -> None:
        original_sleep(seconds)
        if clock.monotonic() >= 20:
            table.renewing.clear()

    joining._sleep = daemon_stops_after_20_s
    try:
        positions = joining.join()
    finally:
        joining.release()
    assert positions == {"s0": after("10", 2), "s1": positions["s1"]}
    assert clock.monotonic() >= 20
    assert all(lease.lease_owner is None for lease in table.items.values())  # released at the end


def test_an_expired_owner_is_taken_over_without_waiting_for_the_timeout(clock: FakeClock) -> None:
    table = FakeTable(Lease("s0", TRIM_HORIZON, lease_owner="crashed", lease_counter=9))
    joining = bridge(table, clock)
    joining.join()
    assert table.items["s0"].lease_owner == "spark:app"
    joining.release()


def test_checkpoints_move_forward_only_and_create_children_at_shard_end() -> None:
    table = FakeTable(
        Lease("s0", ExtendedSequenceNumber("50"), lease_owner="spark:app", lease_counter=1),
        Lease("s1", ExtendedSequenceNumber("70"), lease_counter=1),
    )
    shards = [
        Shard("s0", ending_sequence_number=99),
        Shard("s1"),
        Shard("s2", parent_shard_id="s0"),
        Shard("s3", parent_shard_id="s0"),
    ]
    offset = SourceOffset("st", {"s0": AT_SHARD_END, "s1": after("60")})
    report = write_checkpoints(table, offset, shards, "spark:app")  # type: ignore[arg-type]
    assert report.written == {"s0": "SHARD_END"}
    assert sorted(report.children_created) == ["s2", "s3"]
    assert table.items["s0"].checkpoint == SHARD_END
    assert table.items["s1"].checkpoint == ExtendedSequenceNumber("70")  # never backwards
    assert table.items["s2"].checkpoint == TRIM_HORIZON and table.items["s2"].parent_shard_ids == {"s0"}


def test_a_lease_another_worker_holds_is_not_written() -> None:
    table = FakeTable(Lease("s0", ExtendedSequenceNumber("5"), lease_owner="daemon-1", lease_counter=1))
    offset = SourceOffset("st", {"s0": after("9")})
    report = write_checkpoints(table, offset, [Shard("s0")], "spark:app")  # type: ignore[arg-type]
    assert report.refused == {"s0": "held by daemon-1"}
    assert release_owned(table, "spark:app") == []  # type: ignore[arg-type]
