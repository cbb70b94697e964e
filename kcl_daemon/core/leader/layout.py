"""Describe a lease table's layout and table-migration state from what was read (contract §9). Pure.

:func:`describe_layout` takes :class:`TableFacts` (the non-lease items of the lease table, whether the two
legacy tables exist and what they hold, the worker-metrics rows of both places) and returns a
:class:`LayoutReport`: the layout (no 3.x state yet, the 3.0-3.4 two-side-table layout, migrating, or
single table), the table-migration and client-version states and where they are stored, who holds the
leader lock and where, whether the legacy tables may be removed, and warnings where the fleet's versions
cannot share the table (a worker below 3.5 on a migrated table, a lock in both tables, a non-lease item
without ``entityType`` that a Java leader would assign as a shard, a legacy table re-created after the
migration completed).

Used by ``kcl-daemon leases``, ``check-config --table-state``, ``kcl-daemon migrate status`` and
``kcl-daemon doctor``. :func:`configuration_warnings` covers what can be said from the configuration
alone, without reading any table.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from kcl_daemon.core.leader.table_migration import (
    LEADER_KEY,
    MIGRATION_KEY,
    STATUS_ATTRIBUTE,
    TABLE_MIGRATION_KEY,
    MetricsRow,
    Place,
    TableLayoutConfig,
    TableMigrationStatus,
    lock_place,
    parse_status,
)

#: the ``entityType`` values of contract §9.1
ENTITY_TYPES: Final = (
    "LEASE",
    "WORKER_METRIC_STATS",
    "LEADER",
    "CLIENT_VERSION_MIGRATION",
    "TABLE_MIGRATION",
    "STREAM",
)
COORDINATOR_KEYS: Final = (LEADER_KEY, MIGRATION_KEY, TABLE_MIGRATION_KEY)


class TableLayout(enum.Enum):
    NO_3X_STATE = "no KCL 3.x state (a 2.x fleet, or nothing started yet)"
    LEGACY = "KCL 3.0-3.4 layout (coordinator-state and worker-metrics tables beside the lease table)"
    MIGRATING = "migrating from the 3.0-3.4 layout to a single table"
    SINGLE_TABLE = "single table (KCL 3.5): everything in the lease table"


@dataclass(frozen=True, slots=True)
class TableFacts:
    """What was read. Items are plain values (numbers as int/float)."""

    lease_table: str
    #: entityType -> item count; leases without an entityType count under "LEASE"
    kinds: Mapping[str, int]
    #: Leader / Migration3.0 / TableMigration3.5 as found in the lease table
    lease_table_items: Mapping[str, Mapping[str, object]]
    #: keys of lease-table items that carry no entityType yet are not leases (no leaseCounter)
    unmarked_non_leases: tuple[str, ...]
    legacy_coordinator_table: str
    #: key -> item of the legacy coordinator-state table; None when the table does not exist
    legacy_items: Mapping[str, Mapping[str, object]] | None
    legacy_metrics_table: str
    #: None when the legacy worker-metrics table does not exist
    legacy_metrics: tuple[MetricsRow, ...] | None
    lease_table_metrics: tuple[MetricsRow, ...]
    now_s: float
    reporter_period_s: float = 30.0


@dataclass(frozen=True, slots=True)
class LockHolder:
    place: Place
    owner: str | None
    released: bool = False


@dataclass(frozen=True, slots=True)
class LayoutReport:
    layout: TableLayout
    #: the status stored in the legacy table (what Java reads); COMPLETE for a single-table layout
    migration: TableMigrationStatus | None
    migration_note: str
    client_version: str | None
    client_version_place: Place | None
    locks: tuple[LockHolder, ...]
    #: Place.LEGACY or Place.LEASE_TABLE: where the lock must be now
    lock_expected_in: Place | None
    legacy_tables_present: tuple[str, ...]
    legacy_tables_removable: bool
    warnings: tuple[str, ...] = ()
    kinds: Mapping[str, int] = field(default_factory=dict)
    #: the warnings that mean the fleet is broken now, not just untidy: two live leader locks, or a
    #: KCL 3.0-3.4 worker on a single-table lease table (doctor reports them as errors)
    hazards: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """A short human report (one fact per line)."""
        out = [f"layout: {self.layout.value}"]
        out.append(f"table migration: {self.migration_note}")
        if self.client_version is not None and self.client_version_place is not None:
            out.append(f"client version: {self.client_version} (in the {self.client_version_place.value})")
        else:
            out.append("client version: no Migration3.0 item")
        if self.locks:
            for lock in self.locks:
                state = "released" if lock.released else f"held by {lock.owner}"
                out.append(f"leader lock: {state} (in the {lock.place.value})")
        else:
            out.append("leader lock: none")
        if self.legacy_tables_present:
            removable = " (removable: the migration is COMPLETE)" if self.legacy_tables_removable else ""
            out.append(f"legacy tables: {', '.join(self.legacy_tables_present)}{removable}")
        other = {k: n for k, n in sorted(self.kinds.items()) if k != "LEASE"}
        if other:
            out.append("non-lease items: " + ", ".join(f"{n} {k}" for k, n in other.items()))
        out += [f"warning: {w}" for w in self.warnings]
        return out

    def as_json(self) -> dict[str, object]:
        return {
            "layout": self.layout.name,
            "tableMigration": None if self.migration is None else self.migration.value,
            "tableMigrationNote": self.migration_note,
            "clientVersion": self.client_version,
            "clientVersionIn": None if self.client_version_place is None else self.client_version_place.name,
            "leaderLocks": [
                {"in": lock.place.name, "owner": lock.owner, "released": lock.released} for lock in self.locks
            ],
            "leaderLockExpectedIn": None if self.lock_expected_in is None else self.lock_expected_in.name,
            "legacyTables": list(self.legacy_tables_present),
            "legacyTablesRemovable": self.legacy_tables_removable,
            "itemKinds": dict(self.kinds),
            "warnings": list(self.warnings),
        }


def _status_of(item: Mapping[str, object] | None) -> tuple[TableMigrationStatus | None, str | None]:
    if item is None:
        return None, None
    try:
        return parse_status(item.get(STATUS_ATTRIBUTE)), None
    except ValueError as exc:
        return None, str(exc)


def _lock(item: Mapping[str, object] | None, place: Place) -> LockHolder | None:
    if item is None:
        return None
    owner = item.get("ownerName")
    return LockHolder(
        place, owner if isinstance(owner, str) else None, str(item.get("isReleased", "")) == "1"
    )


def describe_layout(facts: TableFacts) -> LayoutReport:
    """The layout and migration state of one application's tables, with the warnings that apply."""
    warnings: list[str] = []
    legacy = facts.legacy_items
    lease_items = facts.lease_table_items
    legacy_status, problem = _status_of(None if legacy is None else legacy.get(TABLE_MIGRATION_KEY))
    if problem:
        warnings.append(problem)
    lease_status, problem = _status_of(lease_items.get(TABLE_MIGRATION_KEY))
    if problem:
        warnings.append(problem)
    present = []
    if legacy is not None:
        present.append(facts.legacy_coordinator_table)
    if facts.legacy_metrics is not None:
        present.append(facts.legacy_metrics_table)

    # where Migration3.0 lives (the legacy table first, as a worker reads it)
    client_version: str | None = None
    cv_place: Place | None = None
    for place, items in ((Place.LEGACY, legacy or {}), (Place.LEASE_TABLE, lease_items)):
        item = items.get(MIGRATION_KEY)
        if item is not None:
            cv = item.get("cv")
            client_version, cv_place = (str(cv) if cv is not None else None), place
            break
    single_marks = any(k in lease_items for k in COORDINATOR_KEYS) or bool(facts.lease_table_metrics)

    if legacy is None:
        if single_marks:
            layout = TableLayout.SINGLE_TABLE
            migration: TableMigrationStatus | None = TableMigrationStatus.COMPLETE
            note = "COMPLETE (no coordinator-state table: every 3.5 worker runs the single-table layout)"
        else:
            layout, migration = TableLayout.NO_3X_STATE, None
            note = "not applicable (no coordinator-state table; a 3.5 worker would start single-table)"
        if facts.legacy_metrics is not None:
            warnings.append(
                f"{facts.legacy_metrics_table} exists without {facts.legacy_coordinator_table}: nothing "
                "reads it any more but kcl-daemon workers with leaseRenewal = PER_WORKER (their "
                "heartbeats); remove it once no KCL 3.0-3.4 worker, and no such worker, runs"
            )
    else:
        migration = legacy_status
        if legacy_status is TableMigrationStatus.COMPLETE:
            layout = TableLayout.SINGLE_TABLE
            note = "COMPLETE (the legacy tables are no longer used)"
        elif legacy_status in (TableMigrationStatus.PENDING, TableMigrationStatus.DEPLOYED):
            layout = TableLayout.MIGRATING
            note = legacy_status.short + (
                " (items moved into the lease table; COMPLETE after the bake)"
                if legacy_status is TableMigrationStatus.PENDING
                else " (waiting for migrateAllEntitiesToLeaseTable = true on every worker)"
            )
        else:
            layout = TableLayout.LEGACY
            note = (
                "INIT (every worker supports the migration; DEPLOYED after a one-hour bake)"
                if legacy_status is TableMigrationStatus.INIT
                else "not started (no TableMigration3.5 item)"
            )
        if (
            lease_status is TableMigrationStatus.COMPLETE
            and legacy_status is not TableMigrationStatus.COMPLETE
        ):
            warnings.append(
                f"the lease table says the migration is COMPLETE but {facts.legacy_coordinator_table} says "
                f"{legacy_status.short if legacy_status else 'nothing'}: the legacy table was re-created "
                "(a KCL 3.0-3.4 worker?); a 3.5 worker starting now falls back to the legacy layout"
            )

    locks = tuple(
        lock
        for lock in (
            _lock(None if legacy is None else legacy.get(LEADER_KEY), Place.LEGACY),
            _lock(lease_items.get(LEADER_KEY), Place.LEASE_TABLE),
        )
        if lock is not None
    )
    expected = (
        None if migration is None and legacy is None else lock_place(migration or TableMigrationStatus.INIT)
    )
    live = [lock for lock in locks if not lock.released]
    hazards: list[str] = []
    if len(live) == 2:
        hazards.append(
            f"a Leader lock in both tables ({live[0].owner} in the legacy table, {live[1].owner} in the "
            "lease "
            "table): if both are live the fleet has two leaders; the stale one is taken over after its "
            "leaseDuration"
        )
    elif expected is not None and live and live[0].place is not expected:
        warnings.append(
            f"the Leader lock is in the {live[0].place.value} but belongs in the {expected.value} now "
            f"(held by {live[0].owner})"
        )
    if client_version is not None and legacy is not None and MIGRATION_KEY in lease_items and cv_place:
        other = lease_items[MIGRATION_KEY].get("cv")
        if other != client_version and migration is not TableMigrationStatus.PENDING:
            warnings.append(
                f"Migration3.0 differs between the tables ({client_version} in the legacy table, {other} in "
                "the "
                "lease table); workers read the legacy one"
            )

    warnings += hazards
    metrics_warnings = _metrics_warnings(facts, layout)
    if layout is TableLayout.SINGLE_TABLE:
        hazards += metrics_warnings
    if layout is TableLayout.LEGACY and migration is None:
        # nobody asked for the table migration: older workers are a fact about it, not a problem
        note += "".join(f"; {text}" for text in metrics_warnings)
    else:
        warnings += metrics_warnings
    for key in facts.unmarked_non_leases:
        warnings.append(
            f"item {key!r} in the lease table has no entityType and is not a lease: a Java 3.5 leader would "
            "assign it to a worker as if it were a shard"
        )
    unknown = sorted(k for k in facts.kinds if k not in ENTITY_TYPES)
    if unknown:
        warnings.append(
            f"unknown entityType value(s) {', '.join(unknown)}: a Java 3.5 leader reads such items as leases"
        )
    removable = bool(present) and migration is TableMigrationStatus.COMPLETE
    return LayoutReport(
        layout,
        migration,
        note,
        client_version,
        cv_place,
        locks,
        expected,
        tuple(present),
        removable,
        tuple(warnings),
        dict(facts.kinds),
        tuple(hazards),
    )


def _metrics_warnings(facts: TableFacts, layout: TableLayout) -> list[str]:
    """Live workers that cannot share this table's layout."""
    now, period = facts.now_s, facts.reporter_period_s
    old = sorted(
        row.worker_id
        for row in (*(facts.legacy_metrics or ()), *facts.lease_table_metrics)
        if row.active(now, period) and row.support_code is None
    )
    if not old:
        return []
    names = ", ".join(old[:5]) + (f" and {len(old) - 5} more" if len(old) > 5 else "")
    if layout is TableLayout.SINGLE_TABLE:
        return [
            f"live worker(s) publish no support code (KCL 3.0-3.4?): {names}. Such a worker reads the "
            "lease table's non-lease items as leases and re-creates the legacy tables (a second leader): "
            "never run a version below 3.5 against a single-table lease table"
        ]
    return [
        f"live worker(s) publish no support code (KCL 3.0-3.4?): {names}; the table migration cannot start "
        "until they run 3.5 code (or kcl-daemon)"
    ]


def configuration_warnings(
    layout: TableLayoutConfig | None, migrate_all: bool, client_version_config: str
) -> list[str]:
    """What the layout-related keys say without reading a table."""
    out: list[str] = []
    if layout is TableLayoutConfig.KCL_3_0_TO_3_4 and migrate_all:
        out.append(
            "leaseTableLayout = KCL_3_0_TO_3_4 with migrateAllEntitiesToLeaseTable = true: a new application "
            "gets the legacy tables and is then migrated out of them; set one or the other"
        )
    if layout is TableLayoutConfig.SINGLE_TABLE and client_version_config.endswith("COMPATIBLE_WITH_2X"):
        out.append(
            "leaseTableLayout = SINGLE_TABLE with clientVersionConfig = "
            "CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X on a table without a coordinator-state table "
            "writes Migration3.0 and worker metrics into the lease table, which KCL 2.x workers read as "
            "leases (they fail to start): while 2.x workers remain, remove the key (kcl-daemon then keeps "
            "them in the side tables) or run ..._COMPATIBLE_WITH_2X_PHASE1, which writes nothing"
        )
    return out


def layout_summary(
    layout: TableLayoutConfig | None,
    migrate_all: bool,
    client_version_config: str = "CLIENT_VERSION_CONFIG_3X",
) -> str:
    """One line for check-config: what this configuration does with the tables (``layout`` None: the key
    is not set)."""
    if layout is None:
        two_x = "COMPATIBLE_WITH_2X" in client_version_config
        base = (
            "the KCL 3.0-3.4 layout for a new application (<app>-CoordinatorState and "
            "<app>-WorkerMetricStats, so that the KCL 2.x workers beside it read only leases)"
            if two_x
            else "single table (KCL 3.5) for a new application, unless its leases are owned by KCL 2.x "
            "workers (then the two side tables)"
        ) + "; an existing <app>-CoordinatorState is followed through the table migration"
    elif layout is TableLayoutConfig.KCL_3_0_TO_3_4:
        base = (
            "KCL 3.0-3.4 layout for a new application (<app>-CoordinatorState and <app>-WorkerMetricStats "
            "are "
            "created); an existing table is followed as it is"
        )
    else:
        base = (
            "single table (KCL 3.5) for a new application; an existing <app>-CoordinatorState is followed "
            "through the table migration"
        )
    return base + (
        "; this worker moves to the lease table once the migration is DEPLOYED" if migrate_all else ""
    )
