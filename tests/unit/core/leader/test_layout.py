"""describe_layout: the layout and migration state of a table from what was read (contract §9), one
case per layout and migration state, plus the warnings where the fleet's versions cannot share it."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from kcl_daemon.core.leader.layout import (
    TableFacts,
    TableLayout,
    configuration_warnings,
    describe_layout,
    layout_summary,
)
from kcl_daemon.core.leader.table_migration import MetricsRow, Place, TableLayoutConfig
from kcl_daemon.core.leader.table_migration import TableMigrationStatus as S

NOW = 1_800_000_000.0
LOCK = {"ownerName": "w1", "leaseDuration": "120000", "recordVersionNumber": "r1"}
CV = {"cv": "CLIENT_VERSION_3X", "mb": "w1", "mts": 1, "h": []}


def _tm(status: S) -> dict[str, object]:
    return {"tm": status.value, "mb": "w1", "mts": 1, "h": []}


def _row(worker: str, place: Place, sup: int | None = 1, age: float = 5.0) -> MetricsRow:
    return MetricsRow(worker, place, NOW - age, sup, None if sup is None else NOW - age)


def _facts(
    *,
    legacy: Mapping[str, Mapping[str, object]] | None = None,
    lease_items: Mapping[str, Mapping[str, object]] | None = None,
    legacy_rows: tuple[MetricsRow, ...] | None = None,
    lease_rows: tuple[MetricsRow, ...] = (),
    kinds: Mapping[str, int] | None = None,
    unmarked: tuple[str, ...] = (),
) -> TableFacts:
    return TableFacts(
        "app",
        kinds or {"LEASE": 4},
        lease_items or {},
        unmarked,
        "app-CoordinatorState",
        legacy,
        "app-WorkerMetricStats",
        legacy_rows,
        lease_rows,
        NOW,
    )


LEGACY_ROWS = (_row("w1", Place.LEGACY), _row("w2", Place.LEGACY))
LEASE_ROWS = (_row("w1", Place.LEASE_TABLE), _row("w2", Place.LEASE_TABLE))


@pytest.mark.parametrize(
    ("facts", "layout", "status", "lock_in", "removable"),
    [
        (_facts(), TableLayout.NO_3X_STATE, None, None, False),
        (
            _facts(legacy={"Leader": LOCK, "Migration3.0": CV}, legacy_rows=LEGACY_ROWS),
            TableLayout.LEGACY,
            None,
            Place.LEGACY,
            False,
        ),
        (
            _facts(
                legacy={"Leader": LOCK, "Migration3.0": CV, "TableMigration3.5": _tm(S.INIT)},
                legacy_rows=LEGACY_ROWS,
            ),
            TableLayout.LEGACY,
            S.INIT,
            Place.LEGACY,
            False,
        ),
        (
            _facts(
                legacy={"Leader": LOCK, "Migration3.0": CV, "TableMigration3.5": _tm(S.DEPLOYED)},
                legacy_rows=(_row("w1", Place.LEGACY, age=500),),
                lease_rows=LEASE_ROWS,
            ),
            TableLayout.MIGRATING,
            S.DEPLOYED,
            Place.LEGACY,
            False,
        ),
        (
            _facts(
                legacy={"Leader": LOCK, "TableMigration3.5": _tm(S.PENDING)},
                lease_items={"Migration3.0": CV},
                legacy_rows=(),
                lease_rows=LEASE_ROWS,
            ),
            TableLayout.MIGRATING,
            S.PENDING,
            Place.LEGACY,
            False,
        ),
        (
            _facts(
                legacy={"TableMigration3.5": _tm(S.COMPLETE)},
                lease_items={"Leader": LOCK, "Migration3.0": CV, "TableMigration3.5": _tm(S.COMPLETE)},
                legacy_rows=(_row("w1", Place.LEGACY, age=9999),),
                lease_rows=LEASE_ROWS,
            ),
            TableLayout.SINGLE_TABLE,
            S.COMPLETE,
            Place.LEASE_TABLE,
            True,
        ),
        (
            _facts(lease_items={"Leader": LOCK, "Migration3.0": CV}, lease_rows=LEASE_ROWS),
            TableLayout.SINGLE_TABLE,
            S.COMPLETE,
            Place.LEASE_TABLE,
            False,
        ),
    ],
)
def test_each_layout_and_migration_state(
    facts: TableFacts, layout: TableLayout, status: S | None, lock_in: Place | None, removable: bool
) -> None:
    report = describe_layout(facts)
    assert (report.layout, report.migration, report.lock_expected_in) == (layout, status, lock_in)
    assert report.legacy_tables_removable is removable
    assert report.warnings == ()
    assert report.lines()[0].startswith("layout: ")
    assert report.as_json()["layout"] == layout.name


def test_the_client_version_is_read_where_workers_read_it() -> None:
    report = describe_layout(_facts(legacy={"Migration3.0": CV}, lease_items={"Migration3.0": {"cv": "X"}}))
    assert (report.client_version, report.client_version_place) == ("CLIENT_VERSION_3X", Place.LEGACY)
    assert any("differs between the tables" in w for w in report.warnings)


@pytest.mark.parametrize(
    ("facts", "warning"),
    [
        # a KCL 3.0-3.4 worker on a single-table lease table
        (
            _facts(lease_items={"Leader": LOCK}, lease_rows=(_row("java34", Place.LEASE_TABLE, sup=None),)),
            "never run a version below 3.5",
        ),
        # a lock in both tables
        (_facts(legacy={"Leader": LOCK}, lease_items={"Leader": {**LOCK, "ownerName": "w2"}}), "both tables"),
        # the lock in the wrong table for the state
        (_facts(legacy={"TableMigration3.5": _tm(S.COMPLETE), "Leader": LOCK}), "belongs in the lease table"),
        # the legacy table re-created after COMPLETE (a 3.0-3.4 worker)
        (
            _facts(legacy={"Leader": LOCK}, lease_items={"TableMigration3.5": _tm(S.COMPLETE)}),
            "re-created",
        ),
        # a non-lease item without entityType, and an unknown entityType
        (_facts(unmarked=("Leader",)), "as if it were a shard"),
        (_facts(kinds={"LEASE": 1, "SOMETHING": 1}), "unknown entityType"),
        (_facts(legacy_rows=LEGACY_ROWS), "nothing reads it"),
        (_facts(legacy={"TableMigration3.5": {"tm": "DONE"}}), "unknown status"),
    ],
)
def test_warnings_where_versions_cannot_share_the_table(facts: TableFacts, warning: str) -> None:
    warnings = describe_layout(facts).warnings
    assert any(warning in w for w in warnings), warnings


def test_older_workers_on_a_legacy_table_are_a_note_until_a_migration_is_under_way() -> None:
    # nobody asked for the table migration: a healthy 3.0-3.4 fleet, the note says what would block it
    report = describe_layout(
        _facts(legacy={"Leader": LOCK}, legacy_rows=(_row("java34", Place.LEGACY, sup=None),))
    )
    assert "cannot start" in report.migration_note and "java34" in report.migration_note
    assert not any("java34" in w for w in report.warnings), report.warnings


def test_released_lock_and_text() -> None:
    report = describe_layout(_facts(legacy={"Leader": {**LOCK, "isReleased": "1"}}))
    assert "leader lock: released (in the legacy tables)" in report.lines()
    assert "leader lock: none" in describe_layout(_facts()).lines()


def test_configuration_warnings_and_summary() -> None:
    assert configuration_warnings(TableLayoutConfig.SINGLE_TABLE, False, "CLIENT_VERSION_CONFIG_3X") == []
    both = configuration_warnings(TableLayoutConfig.KCL_3_0_TO_3_4, True, "CLIENT_VERSION_CONFIG_3X")
    assert len(both) == 1 and "set one or the other" in both[0]
    compat = configuration_warnings(
        TableLayoutConfig.SINGLE_TABLE, False, "CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X"
    )
    assert len(compat) == 1 and "PHASE1" in compat[0]
    assert "single table" in layout_summary(TableLayoutConfig.SINGLE_TABLE, False)
    assert "created" in layout_summary(TableLayoutConfig.KCL_3_0_TO_3_4, True)
