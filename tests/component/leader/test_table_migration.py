"""The table migration's shells over in-memory places (contract §9.2): a whole migration driven by a
leader (INIT, DEPLOYED, PENDING with the legacy items moved, a rollback when a legacy writer reappears,
COMPLETE and the lock's move into the lease table), workers following the live status with their writes,
and the start-up layouts."""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor

import pytest

from kcl_daemon.core.leader.table_migration import Place, Step, TableLayoutConfig
from kcl_daemon.core.leader.table_migration import TableMigrationStatus as S
from kcl_daemon.core.leader.worker_metrics import WorkerMetricStats
from kcl_daemon.errors import ConfigError
from kcl_daemon.leader.election import LeaderElection
from kcl_daemon.leader.mode import LeaderMode, LeaderModeConfig
from kcl_daemon.leader.table_migration import MigrationConfig, TableMigrationDriver
from kcl_daemon.leader.tables import FleetMetrics, MetricsWriter, Tables
from tests.support.clocks import FakeClock
from tests.support.fake_tables import FakeCoordinatorStore, FakeMetricsTable, fake_tables

POOL = ThreadPoolExecutor(2)
START = 1_800_000_000.0


class Wall:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def _worker(
    name: str, tables: Tables, clock: FakeClock, wall: Wall, migrate_all: bool
) -> tuple[LeaderElection, TableMigrationDriver, MetricsWriter]:
    metrics = FleetMetrics(tables)
    config = MigrationConfig(
        name, migrate_all, complete_bake_s=100.0, init_bake_s=50.0, reporter_period_s=1.0
    )
    driver = TableMigrationDriver(tables, metrics, config, clock, POOL, wall=wall)
    versions = (f"{name}-{n}" for n in itertools.count())
    election = LeaderElection(
        tables.lock_store(),
        name,
        clock,
        POOL,
        duration_s=4.0,
        new_version=lambda: next(versions),
        locate=tables.lock_store,
        confirm=driver.confirm,
    )
    return election, driver, MetricsWriter(tables)


def _stats(worker: str, wall: Wall) -> WorkerMetricStats:
    return WorkerMetricStats(worker, wall.now, support_code=1, support_updated_s=wall.now)


async def test_a_leader_drives_the_whole_migration_and_the_lock_moves_without_two_leaders() -> None:
    clock, wall = FakeClock(), Wall()
    t1 = fake_tables("w1", migrate_all=True)
    t2 = fake_tables("w2", migrate_all=True, shared=t1)
    legacy, single = t1.legacy, t1.lease_table
    assert isinstance(legacy, FakeCoordinatorStore) and isinstance(single, FakeCoordinatorStore)
    legacy.items["Migration3.0"] = {"cv": "CLIENT_VERSION_3X", "mb": "w1", "mts": 1, "h": []}
    assert (t1.start().status, t2.start().status) == (S.INIT, S.INIT)  # no TableMigration3.5 item yet
    e1, d1, m1 = _worker("w1", t1, clock, wall, True)
    e2, d2, m2 = _worker("w2", t2, clock, wall, True)
    owners = frozenset({"w1", "w2"})

    async def publish_all() -> None:
        for writer, name in ((m1, "w1"), (m2, "w2")):
            await d1._call(lambda w=writer, n=name: w.publish(_stats(n, wall)))  # type: ignore[misc]
        await d1._call(d1._metrics.scan)

    assert await e1.check_once() and not await e2.check_once()
    assert "Leader" in legacy.items  # INIT: the lock lives in the legacy table
    await publish_all()
    assert set(t1.legacy_metrics.rows) == {"w1", "w2"}  # type: ignore[attr-defined]

    # INIT once every owner supports it; DEPLOYED after the INIT bake
    assert (await d1.step(owners) or Step.NONE).step is Step.CREATE_INIT  # type: ignore[union-attr]
    assert legacy.items["TableMigration3.5"]["tm"] == S.INIT.value
    wall.now += 49
    await publish_all()
    assert (await d1.step(owners)).step is Step.NONE  # type: ignore[union-attr]
    wall.now += 2
    await publish_all()
    assert (await d1.step(owners)).step is Step.DEPLOY  # type: ignore[union-attr]
    # every worker configured with migrateAllEntitiesToLeaseTable now writes to the lease table
    assert t1.status is S.PENDING
    await d2._call(t2.refresh)
    assert t2.status is S.PENDING
    await publish_all()
    assert not t1.legacy_metrics.rows  # type: ignore[attr-defined]  # each deleted the row it left
    assert set(t1.lease_table_metrics.rows) == owners  # type: ignore[attr-defined]

    # DEPLOYED -> PENDING: Migration3.0 moves into the lease table, fenced on the legacy lock
    assert (await d1.step(owners)).step is Step.MOVE_AND_PEND  # type: ignore[union-attr]
    assert legacy.items["TableMigration3.5"]["tm"] == S.PENDING.value
    assert "Migration3.0" not in legacy.items
    assert single.items["Migration3.0"]["entityType"] == "CLIENT_VERSION_MIGRATION"
    assert single.items["Migration3.0"]["cv"] == "CLIENT_VERSION_3X"
    assert "Leader" in legacy.items  # the lock stays in the legacy table while PENDING

    # a worker writing the legacy worker-metrics table again rolls the migration back
    t1.legacy_metrics.rows["w3"] = _stats("w3", wall)  # type: ignore[attr-defined]
    await d1._call(d1._metrics.scan)
    assert (await d1.step(owners)).step is Step.ROLL_BACK  # type: ignore[union-attr]
    assert legacy.items["TableMigration3.5"]["tm"] == S.DEPLOYED.value
    del t1.legacy_metrics.rows["w3"]  # type: ignore[attr-defined]
    await publish_all()
    assert (await d1.step(owners)).step is Step.MOVE_AND_PEND  # type: ignore[union-attr]

    # PENDING -> COMPLETE after the bake, in one transaction; then the lock moves
    wall.now += 99
    await publish_all()
    assert (await d1.step(owners)).step is Step.NONE  # type: ignore[union-attr]
    wall.now += 2
    await publish_all()
    assert (await d1.step(owners)).step is Step.COMPLETE  # type: ignore[union-attr]
    assert legacy.items["TableMigration3.5"]["tm"] == S.COMPLETE.value
    assert single.items["TableMigration3.5"]["entityType"] == "TABLE_MIGRATION"
    assert t1.status is S.COMPLETE
    assert not e1.is_leader()  # its lock is in the wrong table now: not leader until it moves
    # w2 still believes PENDING: it may take the legacy lock the leader releases, but never leads on it
    assert await e1.check_once()  # releases the legacy lock, takes the lease-table one
    assert "Leader" not in legacy.items
    assert single.items["Leader"]["ownerName"] == "w1"
    assert single.items["Leader"]["entityType"] == "LEADER"
    assert t2.status is S.PENDING
    assert not await e2.check_once()  # takes the free legacy lock, re-reads COMPLETE, gives it back
    assert "Leader" not in legacy.items
    assert t2.status is S.COMPLETE
    assert not await e2.check_once()  # now it watches the lease-table lock
    assert e1.is_leader() and not e2.is_leader()
    assert await d1.step(owners) is None  # COMPLETE: nothing more is read or written


async def test_a_dead_leaders_lock_is_taken_over_in_either_table() -> None:
    for place in (Place.LEGACY, Place.LEASE_TABLE):
        clock, wall = FakeClock(), Wall()
        tables = fake_tables("w1", legacy=place is Place.LEGACY)
        tables.start()
        store = tables.lock_store()
        # the lock item exactly as Java writes it in that table (the lock client's attributes)
        item = {"ownerName": "java-dead", "leaseDuration": "120000", "recordVersionNumber": "j-1"}
        if place is Place.LEASE_TABLE:
            item["entityType"] = "LEADER"
        store.items["Leader"] = item
        election, _driver, _writer = _worker("w1", tables, clock, wall, False)
        assert not await election.check_once()
        clock.now += 120.0
        assert not await election.check_once()
        clock.now += election.check_s
        assert await election.check_once(), place
        assert store.items["Leader"]["ownerName"] == "w1"


async def test_start_up_layouts() -> None:
    # a new application: single table, nothing else created
    tables = fake_tables("w1", legacy=False)
    assert tables.start().status is S.COMPLETE
    assert tables.write_store() is tables.lease_table
    assert tables.metrics_write_table() is tables.lease_table_metrics
    assert not tables.legacy.exists()
    # the 3.0-3.4 layout: the legacy tables are created on the first write that needs them
    old = fake_tables("w1", legacy=False, layout=TableLayoutConfig.KCL_3_0_TO_3_4)
    assert old.start().status is S.INIT
    assert not old.legacy.exists()
    assert old.write_store() is old.legacy and old.legacy.exists()
    assert old.legacy_metrics.exists()
    # ... but never beside a single-table fleet: that would elect a second leader
    clash = fake_tables("w1", legacy=False, layout=TableLayoutConfig.KCL_3_0_TO_3_4)
    clash.lease_table.items["Leader"] = {"ownerName": "java", "entityType": "LEADER"}  # type: ignore[attr-defined]
    mode = LeaderMode(LeaderModeConfig("w1"), object(), clash, FakeClock())
    with pytest.raises(ConfigError, match="second leader"):
        await mode.start_tables()


async def test_reads_try_the_legacy_table_first_and_listings_are_the_union() -> None:
    wall = Wall()
    tables = fake_tables("w1")
    tables.start()
    tables.legacy.items["Migration3.0"] = {"cv": "A"}  # type: ignore[attr-defined]
    tables.lease_table.items["Migration3.0"] = {"cv": "B", "entityType": "CLIENT_VERSION_MIGRATION"}  # type: ignore[attr-defined]
    assert (tables.read("Migration3.0") or {})["cv"] == "A"
    legacy_rows: FakeMetricsTable = tables.legacy_metrics  # type: ignore[assignment]
    lease_rows: FakeMetricsTable = tables.lease_table_metrics  # type: ignore[assignment]
    legacy_rows.rows["w1"] = WorkerMetricStats("w1", wall.now - 10)
    lease_rows.rows["w1"] = WorkerMetricStats("w1", wall.now)
    lease_rows.rows["w2"] = WorkerMetricStats("w2", wall.now)
    fleet = FleetMetrics(tables)
    entries, _ = fleet.scan()
    assert {(e.worker_id, e.last_update_s) for e in entries} == {("w1", wall.now), ("w2", wall.now)}
    assert sorted((r.worker_id, r.place.name) for r in fleet.rows) == [
        ("w1", "LEASE_TABLE"),
        ("w1", "LEGACY"),
        ("w2", "LEASE_TABLE"),
    ]
    tables.force(S.COMPLETE)
    assert (tables.read("Migration3.0") or {})["cv"] == "B"
    assert [t.place for t in tables.metrics_read_tables()] == [Place.LEASE_TABLE]
