"""Start-up of a worker on an application without a coordinator-state table, ``leaseTableLayout`` unset:
while KCL 2.x workers may read the lease table the worker keeps its items in the side tables, and moves
out what an earlier worker left in the lease table (leader.tables, leader.move_out)."""

from __future__ import annotations

import pytest

from kcl_daemon.core.leader.client_version import ClientVersionConfig
from kcl_daemon.core.leader.table_migration import LayoutConflict, Place, TableMigrationStatus
from kcl_daemon.core.leader.worker_metrics import WorkerMetricStats
from kcl_daemon.leader.tables import FleetMetrics, Tables
from tests.support.fake_tables import FakeCoordinatorStore, FakeMetricsTable, fake_tables

COMPAT = ClientVersionConfig.COMPATIBLE_WITH_2X
UPGRADE = "CLIENT_VERSION_UPGRADE_FROM_2X"


def _tables(client_version: ClientVersionConfig = COMPAT) -> Tables:
    return fake_tables("py-a", legacy=False, layout=None, client_version=client_version)


def _stores(tables: Tables) -> tuple[FakeCoordinatorStore, FakeCoordinatorStore, FakeMetricsTable]:
    return tables.legacy, tables.lease_table, tables.lease_table_metrics


def test_a_new_2x_compatible_application_gets_the_side_tables() -> None:
    tables = _tables()
    started = tables.start()
    assert started.status is TableMigrationStatus.INIT and started.create_legacy_tables
    assert tables.write_store() is tables.legacy and tables.legacy.present
    assert tables.metrics_write_table() is tables.legacy_metrics


def test_a_new_3x_application_gets_the_single_table() -> None:
    tables = _tables(ClientVersionConfig.V3X)
    tables.lease_owners = lambda: ["py-a", None]  # only this worker's own leases: no 2.x worker
    assert tables.start().status is TableMigrationStatus.COMPLETE
    assert not tables.legacy.present


def test_leases_of_workers_without_3x_state_mean_2x_workers() -> None:
    tables = _tables(ClientVersionConfig.V3X)
    tables.lease_owners = lambda: ["java-2", "py-a"]
    assert tables.start().status is TableMigrationStatus.INIT
    assert tables.choice is not None and "java-2" in tables.choice.reason


def test_items_an_earlier_worker_left_in_the_lease_table_are_moved_out() -> None:
    tables = _tables()
    legacy, lease_table, lease_metrics = _stores(tables)
    migration = {"cv": UPGRADE, "mb": "py-old", "mts": 1_700_000_000_000, "h": []}
    lease_table.put("Migration3.0", migration, entity_type="CLIENT_VERSION_MIGRATION", require_absent=True)
    lease_metrics.publish(WorkerMetricStats("py-old", 1_700_000_000.0))
    lease_metrics.publish(WorkerMetricStats("py-a", 1_700_000_000.0))

    started = tables.start()
    assert started.status is TableMigrationStatus.INIT
    assert lease_table.items == {} and lease_metrics.rows == {}
    assert legacy.items["Migration3.0"] == migration  # as it was, without the lease table's entityType
    assert tables.legacy_metrics.present
    assert tables.read("Migration3.0") == {"key": "Migration3.0", **migration}


def test_a_worker_that_finds_the_side_tables_follows_them() -> None:
    tables = _tables()
    legacy, lease_table, _ = _stores(tables)
    legacy.present = True
    tables.legacy_metrics.present = True
    lease_table.put(
        "Migration3.0", {"cv": UPGRADE, "mts": 1}, entity_type="CLIENT_VERSION_MIGRATION", require_absent=True
    )
    assert tables.start().status is TableMigrationStatus.INIT  # legacy exists: followed, nothing moved
    assert tables.choice is None and "Migration3.0" in lease_table.items


def test_a_lock_in_the_lease_table_is_refused_with_the_fix() -> None:
    tables = _tables()
    _, lease_table, _ = _stores(tables)
    lease_table.put(
        "Migration3.0", {"cv": UPGRADE, "mts": 1}, entity_type="CLIENT_VERSION_MIGRATION", require_absent=True
    )
    lease_table.put("Leader", {"ownerName": "py-old"}, entity_type="LEADER", require_absent=True)
    with pytest.raises(LayoutConflict, match="leaseTableLayout = SINGLE_TABLE"):
        tables.start()
    assert "Migration3.0" in lease_table.items and not tables.legacy.present


def test_a_move_that_races_a_flip_reads_again() -> None:
    tables = _tables()
    legacy, lease_table, _ = _stores(tables)
    lease_table.put(
        "Migration3.0", {"cv": UPGRADE, "mts": 1}, entity_type="CLIENT_VERSION_MIGRATION", require_absent=True
    )
    real_transact = lease_table.transact
    flips = []

    def flip_first(entries: list[dict[str, object]], what: str) -> None:
        if not flips:  # another (older) worker flips the fleet between our read and our move
            flips.append(1)
            lease_table.items["Migration3.0"].update(cv="CLIENT_VERSION_3X_WITH_ROLLBACK", mts=2)
        real_transact(entries, what)

    lease_table.transact = flip_first  # type: ignore[method-assign]
    tables.start()
    assert legacy.items["Migration3.0"]["cv"] == "CLIENT_VERSION_3X_WITH_ROLLBACK"
    assert "Migration3.0" not in lease_table.items
    assert tables.routing.reads[0] is Place.LEGACY


def test_a_phase1_worker_sees_the_side_tables_another_worker_creates() -> None:
    phase1 = _tables(ClientVersionConfig.COMPATIBLE_WITH_2X_PHASE1)
    assert phase1.start().status is TableMigrationStatus.INIT
    assert phase1.read("Migration3.0") is None and not phase1.legacy.present  # it writes nothing
    upgrade = fake_tables("py-b", legacy=False, layout=None, client_version=COMPAT, shared=phase1)
    upgrade.start()
    upgrade.write_store().put("Migration3.0", {"cv": UPGRADE}, require_absent=True)
    upgrade.metrics_write_table().publish(WorkerMetricStats("py-b", 1_700_000_000.0))
    # the phase-1 worker reads the flip where the fleet writes it, and counts py-b's metrics
    assert phase1.read("Migration3.0") == {"key": "Migration3.0", "cv": UPGRADE}
    assert [e.worker_id for e in FleetMetrics(phase1).scan()[0]] == ["py-b"]


def test_a_3x_worker_starting_alongside_is_not_taken_for_a_2x_worker() -> None:
    tables = _tables(ClientVersionConfig.V3X)

    def owners_of_a_3x_neighbour() -> list[str | None]:
        # py-b started a moment earlier: it wrote Migration3.0 (after this worker looked) and then leads
        tables.lease_table.put("Migration3.0", {"cv": "CLIENT_VERSION_3X"}, require_absent=True)
        return ["py-b"]

    tables.lease_owners = owners_of_a_3x_neighbour
    assert tables.start().status is TableMigrationStatus.COMPLETE
    assert not tables.legacy.present
