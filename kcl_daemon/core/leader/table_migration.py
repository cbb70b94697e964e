"""The KCL 3.5 table migration (contract §9.2): where coordinator state, worker metrics and the leader
lock live, and how a leader moves a 3.0-3.4 application into its lease table. Pure.

A 3.0-3.4 application keeps ``Leader`` and ``Migration3.0`` in ``<app>-CoordinatorState`` and one
WorkerMetricStats row per worker in ``<app>-WorkerMetricStats`` (the *legacy* tables). A 3.5 application
keeps them all in the lease table. The state of the move is the ``TableMigration3.5`` item of the legacy
coordinator-state table: INIT -> DEPLOYED -> PENDING -> COMPLETE (terminal), PENDING -> DEPLOYED on
rollback.

* :func:`start_status`: a worker's status at start-up, from whether the legacy table exists, the stored
  status, ``migrateAllEntitiesToLeaseTable`` and the ``leaseTableLayout`` key (what a new application
  gets);
* :func:`local_status`: the status a worker follows while running, re-evaluated at every read of the
  stored status (Java fixes write targets at start; kcl-daemon follows the live state, so a worker
  never keeps writing the legacy worker-metrics table and rolling the migration back);
* :func:`routing`: where writes, reads and the lock go in a status;
* :func:`leader_step`: the one transition (if any) the leader makes now;
* :func:`lock_place`, :func:`leads`, :func:`after_acquire`: the election rules that keep one leader
  across the move of the lock from the legacy table into the lease table.

Deliberate differences from Java 3.5.1, each safer and each documented:

* INIT with ``migrateAllEntitiesToLeaseTable=true`` runs as INIT with a warning (Java refuses to start);
  the worker moves on by itself when the leader reaches DEPLOYED.
* The leader confirms the status *after* taking a lock and before it leads (:func:`after_acquire`), so a
  worker that took the legacy lock just after COMPLETE was written never leads beside the new leader.
* ``tableMigrationCompleteBakeTimeSeconds`` below Java's floor (3600) is honoured with a warning (Java
  clamps it), and the INIT bake (Java: fixed 3600 s) can be shortened by kcl-daemon's own key; both only
  for tests.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

TABLE_MIGRATION_KEY: Final = "TableMigration3.5"
TABLE_MIGRATION_ENTITY_TYPE: Final = "TABLE_MIGRATION"
LEADER_KEY: Final = "Leader"
MIGRATION_KEY: Final = "Migration3.0"
#: the attributes of the TableMigration3.5 item (contract §3.8)
STATUS_ATTRIBUTE: Final = "tm"
MODIFIED_BY: Final = "mb"
MODIFIED_AT_MS: Final = "mts"
HISTORY: Final = "h"
HISTORY_LIMIT: Final = 10
#: Java's bake before INIT -> DEPLOYED (fixed in Java)
INIT_BAKE_S: Final = 3600.0
COMPLETE_BAKE_DEFAULT_S: Final = 86400.0
COMPLETE_BAKE_MIN_S: Final = 3600.0
COMPLETE_BAKE_MAX_S: Final = 604800.0
#: the support code a 3.5 worker publishes in its WorkerMetricStats item (``sup``)
SUPPORT_CODE: Final = 1
#: legacy items moved in one TransactWriteItems (Java: 25 entries)
MOVE_BATCH: Final = 25


class TableMigrationStatus(enum.Enum):
    INIT = "TABLE_MIGRATION_STATUS_INIT"
    DEPLOYED = "TABLE_MIGRATION_STATUS_DEPLOYED"
    PENDING = "TABLE_MIGRATION_STATUS_PENDING"
    COMPLETE = "TABLE_MIGRATION_STATUS_COMPLETE"

    @property
    def short(self) -> str:
        return self.name


class Place(enum.Enum):
    """Where an item lives."""

    LEGACY = "legacy tables"  # <app>-CoordinatorState (key ``key``) and <app>-WorkerMetricStats (``wid``)
    LEASE_TABLE = "lease table"  # the lease table, partition key ``leaseKey``, with an ``entityType``


class TableLayoutConfig(enum.Enum):
    """The ``leaseTableLayout`` key: what a worker does when the legacy coordinator-state table is missing."""

    SINGLE_TABLE = "SINGLE_TABLE"  # KCL 3.5: everything in the lease table (the default)
    KCL_3_0_TO_3_4 = "KCL_3_0_TO_3_4"  # create the two legacy tables, as KCL 3.0-3.4 do


class LayoutConflict(ValueError):
    """The configured layout cannot join this table without splitting the fleet (says why)."""


def parse_status(text: object) -> TableMigrationStatus | None:
    """The stored ``tm``; None when absent. An unknown value raises ValueError naming it."""
    if text is None:
        return None
    for status in TableMigrationStatus:
        if status.value == text:
            return status
    raise ValueError(f"TableMigration3.5 holds an unknown status tm={text!r}")


def effective_complete_bake_s(configured_s: float | None) -> tuple[float, str | None]:
    """``tableMigrationCompleteBakeTimeSeconds``: Java clamps it to [3600, 604800]; kcl-daemon honours a
    lower value (tests) with a warning, and clamps only the upper end."""
    if configured_s is None:
        return COMPLETE_BAKE_DEFAULT_S, None
    if configured_s > COMPLETE_BAKE_MAX_S:
        return (
            COMPLETE_BAKE_MAX_S,
            f"{configured_s:g} s is above Java's maximum; {COMPLETE_BAKE_MAX_S:g} s used",
        )
    if configured_s < COMPLETE_BAKE_MIN_S:
        return configured_s, (
            f"{configured_s:g} s is below Java's minimum of {COMPLETE_BAKE_MIN_S:g} s: kcl-daemon honours it "
            "(meant for tests); a Java leader would wait 3600 s"
        )
    return configured_s, None


@dataclass(frozen=True, slots=True)
class Start:
    """A worker's table-migration status at start-up."""

    status: TableMigrationStatus
    #: create <app>-CoordinatorState and <app>-WorkerMetricStats (the 3.0-3.4 layout of a new application)
    create_legacy_tables: bool
    reason: str
    warning: str | None = None


def start_status(
    legacy_table_exists: bool,
    stored: TableMigrationStatus | None,
    migrate_all: bool,
    layout: TableLayoutConfig,
    lease_table_has_coordinator_items: bool,
) -> Start:
    """contract §9.2.2, plus the ``leaseTableLayout`` key for a missing legacy table.

    ``lease_table_has_coordinator_items``: the lease table already holds ``Leader`` or ``Migration3.0``
    (a single-table fleet). Creating the legacy tables then would elect a second leader there, so the
    3.0-3.4 layout refuses (:class:`LayoutConflict`).
    """
    if not legacy_table_exists:
        if layout is TableLayoutConfig.SINGLE_TABLE:
            return Start(
                TableMigrationStatus.COMPLETE,
                False,
                "no coordinator-state table: single-table layout (KCL 3.5), everything in the lease table",
            )
        if lease_table_has_coordinator_items:
            raise LayoutConflict(
                "leaseTableLayout = KCL_3_0_TO_3_4, but this lease table already holds the Leader lock or "
                "Migration3.0 (a KCL 3.5 single-table fleet): creating the coordinator-state table would "
                "elect a second leader there. Remove the key (or set SINGLE_TABLE) for this table"
            )
        return Start(
            TableMigrationStatus.INIT,
            True,
            "leaseTableLayout = KCL_3_0_TO_3_4: the coordinator-state and worker-metrics tables are created",
        )
    if stored in (None, TableMigrationStatus.INIT):
        warning = None
        if migrate_all:
            warning = (
                "migrateAllEntitiesToLeaseTable = true while the table migration is "
                f"{'INIT' if stored else 'not started'}: it takes effect once the leader reaches DEPLOYED "
                "(a Java 3.5 worker refuses to start in this state)"
            )
        return Start(TableMigrationStatus.INIT, False, "the legacy tables exist: migration INIT", warning)
    return Start(local_status(stored, migrate_all), False, f"the table migration is {stored.short}")


def local_status(stored: TableMigrationStatus | None, migrate_all: bool) -> TableMigrationStatus:
    """The status a worker follows for a stored status (contract §9.2.2's table; INIT with
    ``migrateAllEntitiesToLeaseTable`` stays INIT instead of failing)."""
    match stored:
        case None | TableMigrationStatus.INIT:
            return TableMigrationStatus.INIT
        case TableMigrationStatus.DEPLOYED | TableMigrationStatus.PENDING:
            return TableMigrationStatus.PENDING if migrate_all else TableMigrationStatus.DEPLOYED
        case TableMigrationStatus.COMPLETE:
            return TableMigrationStatus.COMPLETE


@dataclass(frozen=True, slots=True)
class Routing:
    """Where a worker in one status writes, reads and takes the lock (contract §9.2.1)."""

    writes: Place
    #: single reads try these in order; listings are their union
    reads: tuple[Place, ...]
    lock: Place


_ROUTING: Final[Mapping[TableMigrationStatus, Routing]] = {
    TableMigrationStatus.INIT: Routing(Place.LEGACY, (Place.LEGACY, Place.LEASE_TABLE), Place.LEGACY),
    TableMigrationStatus.DEPLOYED: Routing(Place.LEGACY, (Place.LEGACY, Place.LEASE_TABLE), Place.LEGACY),
    TableMigrationStatus.PENDING: Routing(Place.LEASE_TABLE, (Place.LEGACY, Place.LEASE_TABLE), Place.LEGACY),
    TableMigrationStatus.COMPLETE: Routing(Place.LEASE_TABLE, (Place.LEASE_TABLE,), Place.LEASE_TABLE),
}


def routing(status: TableMigrationStatus) -> Routing:
    return _ROUTING[status]


# -- one leader across the move of the lock --------------------------------------------------------


def lock_place(status: TableMigrationStatus) -> Place:
    return _ROUTING[status].lock


def leads(held_in: Place | None, status: TableMigrationStatus) -> bool:
    """A worker leads only while it holds the lock where its status says the lock is."""
    return held_in is not None and held_in is lock_place(status)


@dataclass(frozen=True, slots=True)
class AcquireVerdict:
    lead: bool
    #: give the lock just taken back (it is in the wrong place now)
    release: bool
    reason: str


def after_acquire(acquired_in: Place, status_read_after: TableMigrationStatus) -> AcquireVerdict:
    """After taking the lock in ``acquired_in``, with the status read *after* the take: lead, or give the
    lock back. COMPLETE is written (by the legacy-lock holder) before that lock is released, so a worker
    that took the released legacy lock always reads COMPLETE here and never leads beside the holder of
    the lease-table lock."""
    if acquired_in is lock_place(status_read_after):
        return AcquireVerdict(
            True, False, f"the lock belongs in the {acquired_in.value} ({status_read_after.short})"
        )
    return AcquireVerdict(
        False,
        True,
        f"took the lock in the {acquired_in.value} but the migration is {status_read_after.short}: "
        f"the lock now lives in the {lock_place(status_read_after).value}",
    )


# -- the leader's transitions -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MetricsRow:
    """One WorkerMetricStats row as the migration reads it (from either place)."""

    worker_id: str
    place: Place
    last_update_s: float | None
    support_code: int | None = None
    support_updated_s: float | None = None

    def active(self, now_s: float, reporter_period_s: float) -> bool:
        """``lut`` within 2 x the reporter period."""
        return self.last_update_s is not None and now_s - self.last_update_s <= 2 * reporter_period_s

    def supports_migration(self, now_s: float, reporter_period_s: float) -> bool:
        """``sup`` >= 1 refreshed (``slu``) within 3 x the reporter period."""
        return (
            self.support_code is not None
            and self.support_code >= SUPPORT_CODE
            and self.support_updated_s is not None
            and now_s - self.support_updated_s <= 3 * reporter_period_s
        )


@dataclass(frozen=True, slots=True)
class MigrationView:
    """What the leader knows at one step."""

    stored: TableMigrationStatus | None
    stored_at_ms: int | None
    #: owners of the leases that are not expired (the leader's own observation)
    lease_owners: frozenset[str]
    metrics: tuple[MetricsRow, ...]
    #: the keys of the legacy coordinator-state table's items
    legacy_keys: frozenset[str]
    now_s: float
    reporter_period_s: float = 30.0


def support_code_met(view: MigrationView) -> tuple[bool, str]:
    """Every owner of an unexpired lease has a row, in either table, supporting the migration."""
    supporting = {
        row.worker_id for row in view.metrics if row.supports_migration(view.now_s, view.reporter_period_s)
    }
    missing = sorted(view.lease_owners - supporting)
    if missing:
        return (
            False,
            f"{len(missing)} lease owner(s) publish no current support code: {', '.join(missing[:5])}",
        )
    return True, "every lease owner supports the table migration"


def legacy_metrics_empty(view: MigrationView) -> tuple[bool, str]:
    """contract §9.2.3 DEPLOYED -> PENDING: (a) every lease owner has an active row, (b) none is legacy."""
    now, period = view.now_s, view.reporter_period_s
    legacy_active = sorted(
        {row.worker_id for row in view.metrics if row.place is Place.LEGACY and row.active(now, period)}
    )
    if legacy_active:
        return False, f"worker(s) still write the legacy worker-metrics table: {', '.join(legacy_active[:5])}"
    active = {row.worker_id for row in view.metrics if row.active(now, period)}
    missing = sorted(view.lease_owners - active)
    if missing:
        return False, f"lease owner(s) without active worker metrics: {', '.join(missing[:5])}"
    return True, "no worker writes the legacy worker-metrics table"


def items_to_move(legacy_keys: Iterable[str]) -> tuple[str, ...]:
    """Every legacy coordinator-state item but the lock and the migration item (they stay)."""
    return tuple(sorted(k for k in legacy_keys if k not in (LEADER_KEY, TABLE_MIGRATION_KEY)))


def batches(keys: Sequence[str], size: int = MOVE_BATCH) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(keys[i : i + size]) for i in range(0, len(keys), size))


class Step(enum.Enum):
    NONE = "none"
    CREATE_INIT = "create INIT"
    DELETE_INIT = "delete INIT"
    DEPLOY = "INIT -> DEPLOYED"
    MOVE_AND_PEND = "move the legacy items, then DEPLOYED -> PENDING"
    ROLL_BACK = "PENDING -> DEPLOYED (rollback)"
    COMPLETE = "PENDING -> COMPLETE"


@dataclass(frozen=True, slots=True)
class Transition:
    step: Step
    reason: str

    @property
    def writes(self) -> TableMigrationStatus | None:
        return _WRITES.get(self.step)

    @property
    def expects(self) -> TableMigrationStatus | None:
        """The stored status the write is conditional on (None: the item must not exist)."""
        return _EXPECTS.get(self.step)


_WRITES: Final = {
    Step.CREATE_INIT: TableMigrationStatus.INIT,
    Step.DEPLOY: TableMigrationStatus.DEPLOYED,
    Step.MOVE_AND_PEND: TableMigrationStatus.PENDING,
    Step.ROLL_BACK: TableMigrationStatus.DEPLOYED,
    Step.COMPLETE: TableMigrationStatus.COMPLETE,
}
_EXPECTS: Final = {
    Step.DELETE_INIT: TableMigrationStatus.INIT,
    Step.DEPLOY: TableMigrationStatus.INIT,
    Step.MOVE_AND_PEND: TableMigrationStatus.DEPLOYED,
    Step.ROLL_BACK: TableMigrationStatus.PENDING,
    Step.COMPLETE: TableMigrationStatus.PENDING,
}


def leader_step(
    view: MigrationView, migrate_all: bool, complete_bake_s: float, init_bake_s: float = INIT_BAKE_S
) -> Transition:
    """The transition the leader makes now (contract §9.2.3); ``Step.NONE`` with the reason otherwise."""
    age_s = None if view.stored_at_ms is None else view.now_s - view.stored_at_ms / 1000
    match view.stored:
        case None:
            met, why = support_code_met(view)
            return Transition(Step.CREATE_INIT if met else Step.NONE, why)
        case TableMigrationStatus.INIT:
            met, why = support_code_met(view)
            if not met:
                return Transition(Step.DELETE_INIT, why)
            if age_s is not None and age_s >= init_bake_s:
                return Transition(Step.DEPLOY, f"INIT baked {age_s:.0f} s >= {init_bake_s:g} s")
            return Transition(Step.NONE, f"INIT baking ({age_s or 0:.0f} of {init_bake_s:g} s)")
        case TableMigrationStatus.DEPLOYED:
            if not migrate_all:
                return Transition(Step.NONE, "DEPLOYED; migrateAllEntitiesToLeaseTable is false")
            empty, why = legacy_metrics_empty(view)
            return Transition(Step.MOVE_AND_PEND if empty else Step.NONE, why)
        case TableMigrationStatus.PENDING:
            if not migrate_all:
                return Transition(
                    Step.ROLL_BACK, "PENDING but this leader runs migrateAllEntitiesToLeaseTable=false"
                )
            reappeared = _legacy_reappeared(view)
            if reappeared is not None:
                return Transition(Step.ROLL_BACK, reappeared)
            if age_s is not None and age_s >= complete_bake_s:
                return Transition(Step.COMPLETE, f"PENDING baked {age_s:.0f} s >= {complete_bake_s:g} s")
            return Transition(Step.NONE, f"PENDING baking ({age_s or 0:.0f} of {complete_bake_s:g} s)")
        case TableMigrationStatus.COMPLETE:
            return Transition(Step.NONE, "COMPLETE")


def _legacy_reappeared(view: MigrationView) -> str | None:
    """Rollback cause: an active legacy WorkerMetricStats row or a legacy coordinator-state item."""
    legacy = sorted(
        row.worker_id
        for row in view.metrics
        if row.place is Place.LEGACY and row.active(view.now_s, view.reporter_period_s)
    )
    if legacy:
        return f"worker(s) write the legacy worker-metrics table again: {', '.join(legacy[:5])}"
    items = items_to_move(view.legacy_keys)
    if items:
        return f"legacy coordinator-state item(s) reappeared: {', '.join(items[:5])}"
    return None


def status_attributes(
    status: TableMigrationStatus, worker_id: str, now_ms: int, previous: Mapping[str, object] | None
) -> dict[str, object]:
    """The TableMigration3.5 item's attributes (plain values): ``tm``, ``mb``, ``mts`` and the history
    ``h`` with the previous state first, at most 10 entries."""
    history: list[object] = []
    if previous is not None and previous.get(STATUS_ATTRIBUTE) is not None:
        history.append(
            {
                STATUS_ATTRIBUTE: previous.get(STATUS_ATTRIBUTE),
                MODIFIED_BY: previous.get(MODIFIED_BY),
                MODIFIED_AT_MS: previous.get(MODIFIED_AT_MS),
            }
        )
        old = previous.get(HISTORY)
        if isinstance(old, list):
            history.extend(old)
    return {
        STATUS_ATTRIBUTE: status.value,
        MODIFIED_BY: worker_id,
        MODIFIED_AT_MS: now_ms,
        HISTORY: history[:HISTORY_LIMIT],
    }
