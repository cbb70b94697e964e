"""Workers of a table layout this worker cannot share a table with, as a running worker sees them, and
when to say so (docs/migrating.md). Pure.

Two layouts cannot share one application (contract §9.2):

* this application runs the **single table** (this worker's status is COMPLETE) and a worker publishes
  its worker metrics in ``<app>-WorkerMetricStats``, or heartbeats a ``Leader`` lock in
  ``<app>-CoordinatorState``: a KCL 3.0-3.4 worker (or one that followed a re-created legacy table). It
  reads the lease table's other items as leases, leads on its own, and gets no lease from this fleet;
* this application runs the **KCL 3.0-3.4 layout** (the side tables; status INIT, DEPLOYED or PENDING)
  and a worker heartbeats a ``Leader`` lock in the lease table, or (before DEPLOYED, when no worker may
  write there yet) publishes its worker metrics in the lease table: a single-table worker (a kcl-daemon
  that chose the single table before the side tables existed). KCL 2.x and 3.0-3.4 workers read its
  items as leases, and it leads apart from this fleet's leader.

:func:`strangers` finds them from one :class:`LayoutView`; a lock counts only when its
``recordVersionNumber`` changed since the previous look (a heartbeat: a stale lock of a dead worker names
no one). :func:`due_warnings` limits the WARNING to one per worker and layout every
:data:`WARN_EVERY_S` while it lasts.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kcl_daemon.core.leader.table_migration import MetricsRow, TableMigrationStatus

#: at most one WARNING per worker and layout this often, while the condition lasts
WARN_EVERY_S: Final = 300.0
#: a stranger's reporter period is its own (Java's default: 30 s): a row is live for 2 x at least this
STRANGER_PERIOD_MIN_S: Final = 30.0


class WorkerLayout(enum.Enum):
    LEGACY = (
        "the KCL 3.0-3.4 layout (the Leader lock, Migration3.0 and worker metrics in {coordinator} and "
        "{metrics}, beside the lease table)"
    )
    SINGLE_TABLE = (
        "the single-table layout (KCL 3.5: the Leader lock, Migration3.0 and worker metrics in the lease "
        "table {lease_table})"
    )


@dataclass(frozen=True, slots=True)
class LockSeen:
    """A ``Leader`` item as two looks saw it."""

    owner: str | None
    #: heartbeating: its recordVersionNumber changed since the previous look, and not released
    live: bool


def lock_seen(item: Mapping[str, object] | None, previous_rvn: object) -> tuple[LockSeen | None, object]:
    """The lock, and the recordVersionNumber to remember for the next look."""
    if item is None:
        return None, None
    rvn = item.get("recordVersionNumber")
    owner = item.get("ownerName")
    released = str(item.get("isReleased", "")) == "1"
    live = not released and previous_rvn is not None and rvn != previous_rvn
    return LockSeen(owner if isinstance(owner, str) else None, live), rvn


@dataclass(frozen=True, slots=True)
class LayoutView:
    """One look at the places a worker of the other layout writes."""

    worker_id: str
    #: this worker's local table-migration status, and the stored one
    status: TableMigrationStatus
    stored: TableMigrationStatus | None
    lease_table: str
    coordinator_table: str
    metrics_table: str
    #: rows of <app>-WorkerMetricStats (read while single-table), and of the lease table (while legacy)
    legacy_rows: tuple[MetricsRow, ...] = ()
    lease_rows: tuple[MetricsRow, ...] = ()
    legacy_lock: LockSeen | None = None
    lease_lock: LockSeen | None = None
    now_s: float = 0.0
    reporter_period_s: float = 30.0

    @property
    def ours(self) -> WorkerLayout:
        if self.status is TableMigrationStatus.COMPLETE:
            return WorkerLayout.SINGLE_TABLE
        return WorkerLayout.LEGACY

    def describe(self, layout: WorkerLayout) -> str:
        return layout.value.format(
            coordinator=self.coordinator_table, metrics=self.metrics_table, lease_table=self.lease_table
        )


@dataclass(frozen=True, slots=True)
class Stranger:
    """A worker of a layout this application cannot share its table with."""

    worker_id: str
    theirs: WorkerLayout
    ours: WorkerLayout
    evidence: tuple[str, ...]
    message: str

    @property
    def key(self) -> str:
        return f"{self.worker_id} {self.theirs.name}"


def strangers(view: LayoutView) -> tuple[Stranger, ...]:
    """Every worker of the other layout this look shows (sorted by worker id)."""
    evidence: dict[str, list[str]] = {}

    def seen(worker: str | None, what: str) -> None:
        if worker is not None and worker != view.worker_id:
            evidence.setdefault(worker, []).append(what)

    now, period = view.now_s, max(view.reporter_period_s, STRANGER_PERIOD_MIN_S)
    if view.ours is WorkerLayout.SINGLE_TABLE:
        theirs = WorkerLayout.LEGACY
        for row in view.legacy_rows:
            if row.active(now, period):
                seen(row.worker_id, f"publishes its worker metrics in {view.metrics_table}")
        if view.legacy_lock is not None and view.legacy_lock.live:
            seen(view.legacy_lock.owner, f"holds the Leader lock in {view.coordinator_table}")
    else:
        theirs = WorkerLayout.SINGLE_TABLE
        if view.stored in (None, TableMigrationStatus.INIT):  # from DEPLOYED on, workers may write there
            for row in view.lease_rows:
                if row.active(now, period):
                    seen(row.worker_id, f"publishes its worker metrics in the lease table {view.lease_table}")
        if view.lease_lock is not None and view.lease_lock.live:
            seen(view.lease_lock.owner, f"holds a Leader lock in the lease table {view.lease_table}")
    return tuple(
        Stranger(worker, theirs, view.ours, tuple(what), _message(view, worker, theirs, what))
        for worker, what in sorted(evidence.items())
    )


def _message(view: LayoutView, worker: str, theirs: WorkerLayout, evidence: Sequence[str]) -> str:
    head = (
        f"worker {worker} runs {view.describe(theirs)}: it {' and '.join(evidence)}; this application runs "
        f"{view.describe(view.ours)}. The two layouts cannot share one table: "
    )
    if theirs is WorkerLayout.LEGACY:
        return head + (
            f"{worker} reads the lease table's other items as leases, elects a leader of its own and gets no "
            "lease from this fleet. Upgrade it to KCL 3.5 or kcl-daemon (both follow the single table), or "
            "stop it; KCL 3.0-3.4 workers need an application started in their layout (leaseTableLayout = "
            "KCL_3_0_TO_3_4, which only chooses the layout of a new application)"
        )
    return head + (
        "KCL 2.x and 3.0-3.4 workers read its items in the lease table as leases, and it leads apart from "
        "this fleet's leader. Restart it: a kcl-daemon of this version or a Java 3.5 worker started now "
        "follows the side tables that exist (leaseTableLayout only chooses the layout of a new "
        "application; SINGLE_TABLE does not change an existing one)"
    )


def due_warnings(
    found: Sequence[Stranger], last: Mapping[str, float], now_s: float, every_s: float = WARN_EVERY_S
) -> tuple[tuple[Stranger, ...], dict[str, float]]:
    """The strangers to warn about now, and when each was last warned about (a condition that ended is
    forgotten, so its return is said at once)."""
    due: list[Stranger] = []
    kept: dict[str, float] = {}
    for stranger in found:
        previous = last.get(stranger.key)
        if previous is None or now_s - previous >= every_s:
            due.append(stranger)
            kept[stranger.key] = now_s
        else:
            kept[stranger.key] = previous
    return tuple(due), kept
