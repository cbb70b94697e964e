"""The layout of an application without a coordinator-state table: a lease table KCL 2.x workers may read
never holds anything but leases (core.leader.keep_out)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.leader.client_version import ClientVersionConfig
from kcl_daemon.core.leader.keep_out import LeaseTableItems, choose_layout, two_x_about
from kcl_daemon.core.leader.table_migration import LayoutConflict, TableLayoutConfig

COMPAT = ClientVersionConfig.COMPATIBLE_WITH_2X
PHASE1 = ClientVersionConfig.COMPATIBLE_WITH_2X_PHASE1
V3X = ClientVersionConfig.V3X
SINGLE, SIDE = TableLayoutConfig.SINGLE_TABLE, TableLayoutConfig.KCL_3_0_TO_3_4
UPGRADE = "CLIENT_VERSION_UPGRADE_FROM_2X"
ROLLBACK = "CLIENT_VERSION_3X_WITH_ROLLBACK"


@pytest.mark.parametrize(
    ("config", "items", "layout", "move", "deleted"),
    [
        # a new application: 2.x-compatible modes get the side tables, 3.x the single table
        (COMPAT, LeaseTableItems(), SIDE, False, ()),
        (PHASE1, LeaseTableItems(), SIDE, False, ()),
        (V3X, LeaseTableItems(), SINGLE, False, ()),
        (V3X, LeaseTableItems(other_owners=()), SINGLE, False, ()),
        # leases owned by workers that wrote no 3.x state: 2.x workers, whatever this worker runs
        (V3X, LeaseTableItems(other_owners=("java-2",)), SIDE, False, ()),
        # a single table an earlier kcl-daemon wrote in UPGRADE_FROM_2X: moved out
        (COMPAT, LeaseTableItems(UPGRADE, metrics_rows=("py-a", "py-b")), SIDE, True, ("py-a", "py-b")),
        (V3X, LeaseTableItems("CLIENT_VERSION_2X"), SIDE, True, ()),
        (COMPAT, LeaseTableItems(metrics_rows=("py-a",)), SIDE, False, ("py-a",)),
        # a fleet that flipped to 3.x keeps its single table (no 2.x taker runs beside a leader)
        (COMPAT, LeaseTableItems(ROLLBACK, leader=True, metrics_rows=("py-a",)), SINGLE, False, ()),
        (V3X, LeaseTableItems("CLIENT_VERSION_3X", leader=True), SINGLE, False, ()),
        (V3X, LeaseTableItems("CLIENT_VERSION_3X", other_owners=("java-2",)), SINGLE, False, ()),
    ],
)
def test_the_layout_of_a_table_without_side_tables(
    config: ClientVersionConfig,
    items: LeaseTableItems,
    layout: TableLayoutConfig,
    move: bool,
    deleted: tuple[str, ...],
) -> None:
    choice = choose_layout(None, config, items)
    assert (choice.layout, choice.move_migration, choice.delete_metrics) == (layout, move, deleted)
    assert (choice.warning is not None) == (move or bool(deleted) or (config is V3X and layout is SIDE))


def test_a_lock_or_a_finished_table_migration_is_never_moved_while_2x_is_about() -> None:
    for items in (
        LeaseTableItems(UPGRADE, leader=True),
        LeaseTableItems("CLIENT_VERSION_2X", table_migration=True),
    ):
        with pytest.raises(LayoutConflict, match="leaseTableLayout = SINGLE_TABLE") as caught:
            choose_layout(None, COMPAT, items)
        assert "KCL 2.x" in str(caught.value)


@pytest.mark.parametrize("configured", [SINGLE, SIDE])
def test_the_key_when_set_is_followed(configured: TableLayoutConfig) -> None:
    choice = choose_layout(configured, COMPAT, LeaseTableItems(UPGRADE, metrics_rows=("py-a",)))
    assert (choice.layout, choice.move_migration, choice.delete_metrics) == (configured, False, ())


def test_why_names_the_reason() -> None:
    assert "2.x lease taker" in str(two_x_about(COMPAT, LeaseTableItems()))
    assert "java-1, java-2" in str(two_x_about(V3X, LeaseTableItems(other_owners=("java-2", "java-1"))))
    assert two_x_about(V3X, LeaseTableItems("unknown")) is None  # the client-version step reports it


CVS = st.sampled_from([None, UPGRADE, "CLIENT_VERSION_2X", ROLLBACK, "CLIENT_VERSION_3X"])


@given(
    st.sampled_from(list(ClientVersionConfig)),
    CVS,
    st.booleans(),
    st.booleans(),
    st.lists(st.sampled_from(["a", "b"]), max_size=2),
    st.none() | st.lists(st.sampled_from(["x", "y"]), max_size=2).map(tuple),
)
def test_whenever_2x_may_read_the_table_nothing_of_ours_stays_in_it(
    config: ClientVersionConfig,
    cv: str | None,
    leader: bool,
    table_migration: bool,
    rows: list[str],
    owners: tuple[str, ...] | None,
) -> None:
    items = LeaseTableItems(cv, leader, table_migration, tuple(rows), owners)
    try:
        choice = choose_layout(None, config, items)
    except LayoutConflict:
        assert two_x_about(config, items) is not None and (leader or table_migration)
        return
    if two_x_about(config, items) is not None:
        assert choice.layout is SIDE
        assert choice.move_migration == (cv is not None)
        assert set(choice.delete_metrics) == set(rows)
    else:
        assert choice.layout is SINGLE and not choice.move_migration and not choice.delete_metrics
