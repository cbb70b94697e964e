"""Workers of a table layout this application cannot share its table with, and the WARNING's rate
(core.leader.layout_watch)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.leader.layout_watch import (
    LayoutView,
    LockSeen,
    WorkerLayout,
    due_warnings,
    lock_seen,
    strangers,
)
from kcl_daemon.core.leader.table_migration import MetricsRow, Place
from kcl_daemon.core.leader.table_migration import TableMigrationStatus as S

NOW = 1_800_000_000.0
LIVE, DEAD = NOW - 5, NOW - 600
SINGLE, LEGACY = WorkerLayout.SINGLE_TABLE, WorkerLayout.LEGACY


def _view(status: S, stored: S | None = None, **kw: object) -> LayoutView:
    return LayoutView(
        "py-a", status, stored, "app", "app-CoordinatorState", "app-WorkerMetricStats", now_s=NOW, **kw
    )  # type: ignore[arg-type]


def _legacy(*rows: tuple[str, float]) -> tuple[MetricsRow, ...]:
    return tuple(MetricsRow(w, Place.LEGACY, lut) for w, lut in rows)


def _lease(*rows: tuple[str, float]) -> tuple[MetricsRow, ...]:
    return tuple(MetricsRow(w, Place.LEASE_TABLE, lut) for w, lut in rows)


@pytest.mark.parametrize(
    ("view", "expected"),
    [
        # single table: a live 3.0-3.4 worker's metrics in the side table, or its heartbeating lock
        (_view(S.COMPLETE, legacy_rows=_legacy(("java-1", LIVE))), [("java-1", LEGACY)]),
        (_view(S.COMPLETE, legacy_lock=LockSeen("java-1", True)), [("java-1", LEGACY)]),
        (_view(S.COMPLETE, legacy_rows=_legacy(("java-1", DEAD))), []),  # left behind by a migration
        # a worker reporting every 30 s (Java's default) is live for 60 s, whatever this worker's period
        (
            _view(S.COMPLETE, legacy_rows=_legacy(("java-1", NOW - 55)), reporter_period_s=1.0),
            [("java-1", LEGACY)],
        ),
        (_view(S.COMPLETE, legacy_lock=LockSeen("java-1", False)), []),  # stale or released
        (_view(S.COMPLETE, legacy_rows=_legacy(("py-a", LIVE))), []),  # never this worker itself
        (_view(S.COMPLETE, lease_rows=_lease(("py-b", LIVE))), []),  # single-table neighbours are fine
        # the 3.0-3.4 layout: a single-table worker's metrics in the lease table, or its lock there
        (_view(S.INIT, None, lease_rows=_lease(("py-old", LIVE))), [("py-old", SINGLE)]),
        (_view(S.INIT, S.INIT, lease_lock=LockSeen("py-old", True)), [("py-old", SINGLE)]),
        (_view(S.DEPLOYED, S.DEPLOYED, lease_rows=_lease(("py-b", LIVE))), []),  # migrateAll workers
        (_view(S.PENDING, S.PENDING, lease_lock=LockSeen("py-old", True)), [("py-old", SINGLE)]),
        (_view(S.INIT, None, legacy_rows=_legacy(("java-1", LIVE))), []),  # the same layout
    ],
)
def test_who_cannot_share_the_table(view: LayoutView, expected: list[tuple[str, WorkerLayout]]) -> None:
    assert [(s.worker_id, s.theirs) for s in strangers(view)] == expected


@pytest.mark.parametrize(
    ("view", "words"),
    [
        (
            _view(S.COMPLETE, legacy_rows=_legacy(("java-1", LIVE)), legacy_lock=LockSeen("java-1", True)),
            ["worker java-1", "KCL 3.0-3.4 layout", "single-table layout", "leaseTableLayout", "KCL 3.5",
             "app-WorkerMetricStats and holds the Leader lock in app-CoordinatorState"],
        ),
        (
            _view(S.INIT, None, lease_rows=_lease(("py-old", LIVE))),
            ["worker py-old", "single-table layout", "KCL 3.0-3.4 layout", "leaseTableLayout", "Restart it"],
        ),
    ],
)  # fmt: skip
def test_the_message_names_the_worker_both_layouts_the_key_and_the_fix(
    view: LayoutView, words: list[str]
) -> None:
    (stranger,) = strangers(view)
    for word in words:
        assert word in stranger.message


def test_a_lock_is_live_only_when_it_heartbeats() -> None:
    assert lock_seen(None, "r1") == (None, None)
    first, rvn = lock_seen({"ownerName": "java-1", "recordVersionNumber": "r1"}, None)
    assert first == LockSeen("java-1", False) and rvn == "r1"
    assert lock_seen({"ownerName": "java-1", "recordVersionNumber": "r1"}, "r1")[0] == LockSeen(
        "java-1", False
    )
    assert lock_seen({"ownerName": "java-1", "recordVersionNumber": "r2"}, "r1")[0] == LockSeen(
        "java-1", True
    )
    released = {"ownerName": "java-1", "recordVersionNumber": "r3", "isReleased": "1"}
    assert lock_seen(released, "r2")[0] == LockSeen("java-1", False)


def test_one_warning_per_worker_every_five_minutes_while_it_lasts() -> None:
    (java,) = strangers(_view(S.COMPLETE, legacy_rows=_legacy(("java-1", LIVE))))
    due, last = due_warnings([java], {}, 0.0)
    assert due == (java,)
    for t in (60.0, 120.0, 299.0):
        due, last = due_warnings([java], last, t)
        assert due == ()
    due, last = due_warnings([java], last, 300.0)
    assert due == (java,)
    due, last = due_warnings([], last, 360.0)  # gone: forgotten
    assert last == {}
    due, last = due_warnings([java], last, 420.0)  # back: said at once
    assert due == (java,)


@given(st.lists(st.floats(min_value=0, max_value=10_000), min_size=1, max_size=60).map(sorted))
def test_never_more_than_one_warning_in_any_five_minutes(times: list[float]) -> None:
    (java,) = strangers(_view(S.COMPLETE, legacy_rows=_legacy(("java-1", LIVE))))
    last: dict[str, float] = {}
    said: list[float] = []
    for t in times:
        due, last = due_warnings([java], last, t)
        said += [t] * len(due)
    assert said[0] == times[0]
    assert all(b - a >= 300.0 for a, b in itertools.pairwise(said))
