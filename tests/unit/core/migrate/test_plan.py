"""kcl-daemon migrate's plans (contract §5.6, §9.2.4): what each mode writes, and when it refuses."""

from __future__ import annotations

import pytest

from kcl_daemon.core.leader.layout import LayoutReport, TableLayout
from kcl_daemon.core.leader.table_migration import Place
from kcl_daemon.core.leader.table_migration import TableMigrationStatus as S
from kcl_daemon.core.migrate import plan as mp

ITEM = {
    "cv": "CLIENT_VERSION_3X_WITH_ROLLBACK",
    "mb": "w1",
    "mts": 5,
    "h": [{"cv": "x", "mb": "y", "mts": 1}],
}


def test_rollback_sets_2x_then_waits_and_deletes_the_gsi() -> None:
    plan = mp.plan_rollback(ITEM, Place.LEASE_TABLE, "app", "app", gsi_present=True, now_ms=99, wait_s=7)
    assert plan.refusal is None
    kinds = [w.kind for w in plan.writes]
    assert kinds == [mp.WriteKind.SET_CLIENT_VERSION, mp.WriteKind.WAIT, mp.WriteKind.DELETE_GSI]
    first = plan.writes[0]
    assert first.attributes["cv"] == "CLIENT_VERSION_2X"
    assert first.attributes["mb"] == "KclMigrationTool-rollback"
    assert first.attributes["mts"] == 99
    assert first.attributes["h"] == [
        {"cv": ITEM["cv"], "mb": "w1", "mts": 5},
        {"cv": "x", "mb": "y", "mts": 1},
    ]
    assert first.expected_cv == ITEM["cv"]
    assert "IF cv = CLIENT_VERSION_3X_WITH_ROLLBACK" in first.describe()
    assert plan.writes[1].wait_s == 7 and "wait 7 s" in plan.writes[1].describe()
    assert "LeaseOwnerToLeaseKeyIndex" in plan.writes[2].describe()


def test_rollback_without_gsi_and_with_non_lease_items_says_so() -> None:
    upgrade = {**ITEM, "cv": "CLIENT_VERSION_UPGRADE_FROM_2X"}
    plan = mp.plan_rollback(
        upgrade, Place.LEGACY, "app-CS", "app", gsi_present=False, now_ms=1, non_lease_items=3
    )
    assert [w.kind for w in plan.writes] == [mp.WriteKind.SET_CLIENT_VERSION]
    assert plan.writes[0].place is Place.LEGACY
    assert any("no LeaseOwnerToLeaseKeyIndex" in n for n in plan.notes)
    assert any("non-lease item" in n for n in plan.notes)


@pytest.mark.parametrize(
    ("item", "refused"),
    [
        (None, "not in progress"),
        ({"cv": "CLIENT_VERSION_3X"}, "cannot be rolled back"),
        ({"cv": "CLIENT_VERSION_9X"}, "cannot be rolled back"),
    ],
)
def test_rollback_refusals(item: dict[str, object] | None, refused: str) -> None:
    place = None if item is None else Place.LEASE_TABLE
    plan = mp.plan_rollback(item, place, "app", "app", gsi_present=True, now_ms=1)
    assert plan.refusal is not None and refused in plan.refusal and not plan.writes


def test_rollback_of_a_rolled_back_fleet_is_nothing_to_do() -> None:
    plan = mp.plan_rollback(
        {"cv": "CLIENT_VERSION_2X"}, Place.LEASE_TABLE, "app", "app", gsi_present=True, now_ms=1
    )
    assert plan.refusal is None and not plan.writes and plan.notes


def test_rollforward() -> None:
    plan = mp.plan_rollforward(
        {"cv": "CLIENT_VERSION_2X", "mb": "tool", "mts": 3}, Place.LEASE_TABLE, "app", now_ms=9
    )
    assert plan.writes[0].attributes["cv"] == "CLIENT_VERSION_UPGRADE_FROM_2X"
    assert plan.writes[0].attributes["mb"] == "KclMigrationTool-rollforward"
    assert plan.writes[0].expected_cv == "CLIENT_VERSION_2X"
    for item in (None, {"cv": "CLIENT_VERSION_3X"}, {"cv": "CLIENT_VERSION_UPGRADE_FROM_2X"}):
        refused = mp.plan_rollforward(item, None if item is None else Place.LEGACY, "app", now_ms=1)
        assert refused.refusal is not None and not refused.writes


def _layout(status: S | None, tables: tuple[str, ...], warnings: tuple[str, ...] = ()) -> LayoutReport:
    layout = TableLayout.SINGLE_TABLE if status is S.COMPLETE else TableLayout.MIGRATING
    return LayoutReport(
        layout,
        status,
        "",
        None,
        None,
        (),
        Place.LEASE_TABLE,
        tables,
        status is S.COMPLETE and bool(tables),
        warnings,
    )


def test_remove_legacy_tables_only_once_complete() -> None:
    plan = mp.plan_remove_legacy_tables(
        _layout(S.COMPLETE, ("app-CoordinatorState", "app-WorkerMetricStats"))
    )
    assert [w.describe() for w in plan.writes] == [
        "DeleteTable app-CoordinatorState",
        "DeleteTable app-WorkerMetricStats",
    ]
    refused = mp.plan_remove_legacy_tables(_layout(S.PENDING, ("app-CoordinatorState",)))
    assert refused.refusal is not None and "PENDING" in refused.refusal and not refused.writes
    assert not mp.plan_remove_legacy_tables(_layout(S.COMPLETE, ())).writes
    warned = mp.plan_remove_legacy_tables(_layout(S.COMPLETE, ("app-CoordinatorState",), ("x",)))
    assert warned.notes
