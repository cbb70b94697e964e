"""What ``kcl-daemon migrate`` would write, decided from what it read (contract §5.6, §9.2.4). Pure.

* ``rollback``: ``Migration3.0`` from ``CLIENT_VERSION_UPGRADE_FROM_2X`` or
  ``CLIENT_VERSION_3X_WITH_ROLLBACK`` to ``CLIENT_VERSION_2X``
  (``mb`` = ``KclMigrationTool-rollback``, the previous state first in ``h``), then, after Java's wait
  (120 s), delete the ``LeaseOwnerToLeaseKeyIndex`` GSI;
* ``rollforward``: ``CLIENT_VERSION_2X`` back to ``CLIENT_VERSION_UPGRADE_FROM_2X``
  (``mb`` = ``KclMigrationTool-rollforward``);
* ``remove-legacy-tables``: once the table migration is COMPLETE, delete ``<app>-CoordinatorState`` and
  ``<app>-WorkerMetricStats`` (KCL never does; nothing reads them any more).

Each update is conditional on the ``cv`` that was read (Java's tool conditions on ``cv IN`` the allowed
values; expecting the very value read is at least as strict). ``Migration3.0`` is edited where workers
read it (the legacy coordinator-state table first, else the lease table); Java's 3.5 tool only looks in
the lease table. The table migration itself cannot be rolled back (Java cannot either).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from kcl_daemon.core.leader.client_version import HISTORY_LIMIT, ClientVersion
from kcl_daemon.core.leader.layout import LayoutReport
from kcl_daemon.core.leader.table_migration import Place, TableMigrationStatus

GSI_DELETION_WAIT_S: Final = 120.0
ROLLBACK_BY: Final = "KclMigrationTool-rollback"
ROLLFORWARD_BY: Final = "KclMigrationTool-rollforward"
GSI_NAME: Final = "LeaseOwnerToLeaseKeyIndex"


class Mode(enum.Enum):
    STATUS = "status"
    ROLLBACK = "rollback"
    ROLLFORWARD = "rollforward"
    REMOVE_LEGACY_TABLES = "remove-legacy-tables"


class WriteKind(enum.Enum):
    SET_CLIENT_VERSION = "set Migration3.0"
    WAIT = "wait"
    DELETE_GSI = "delete GSI"
    DELETE_TABLE = "delete table"


@dataclass(frozen=True, slots=True)
class Write:
    kind: WriteKind
    #: the table written (or waited for)
    table: str
    #: SET_CLIENT_VERSION: the attributes to set and the cv they are conditional on
    attributes: Mapping[str, object] = field(default_factory=dict)
    expected_cv: str | None = None
    place: Place | None = None
    wait_s: float = 0.0

    def describe(self) -> str:
        match self.kind:
            case WriteKind.SET_CLIENT_VERSION:
                history = self.attributes["h"]
                count = len(history) if isinstance(history, list) else 0
                return (
                    f"UpdateItem {self.table} Migration3.0: SET cv = {self.attributes['cv']}, "
                    f"mb = {self.attributes['mb']}, mts = {self.attributes['mts']}, "
                    f"h = (previous state first, {count} entries) IF cv = {self.expected_cv}"
                )
            case WriteKind.WAIT:
                return f"wait {self.wait_s:g} s (workers switch to the 2.x algorithms)"
            case WriteKind.DELETE_GSI:
                return f"UpdateTable {self.table}: delete the global secondary index {GSI_NAME}"
            case WriteKind.DELETE_TABLE:
                return f"DeleteTable {self.table}"


@dataclass(frozen=True, slots=True)
class Plan:
    writes: tuple[Write, ...] = ()
    #: why nothing may be written (the command exits non-zero)
    refusal: str | None = None
    notes: tuple[str, ...] = ()


def _history(item: Mapping[str, object], now_ms: int) -> list[object]:
    previous = {
        "cv": item.get("cv", "Unknown"),
        "mb": item.get("mb", "Unknown"),
        "mts": item.get("mts", now_ms),
    }
    old = item.get("h")
    return [previous, *(old if isinstance(old, list) else [])][:HISTORY_LIMIT]


def plan_rollback(
    item: Mapping[str, object] | None,
    place: Place | None,
    table: str,
    lease_table: str,
    *,
    gsi_present: bool,
    now_ms: int,
    wait_s: float = GSI_DELETION_WAIT_S,
    non_lease_items: int = 0,
) -> Plan:
    """Roll the fleet back to the KCL 2.x algorithms."""
    cv = None if item is None else item.get("cv")
    if item is None or place is None:
        return Plan(
            refusal="no Migration3.0 item: a migration to KCL 3.x is not in progress (check the names)"
        )
    if cv == ClientVersion.V2X.value:
        return Plan(notes=("Migration3.0 is already CLIENT_VERSION_2X: the fleet runs the 2.x algorithms",))
    if cv == ClientVersion.V3X.value:
        return Plan(
            refusal="Migration3.0 is CLIENT_VERSION_3X: the migration is final and cannot be rolled back"
        )
    if cv not in (ClientVersion.UPGRADE_FROM_2X.value, ClientVersion.V3X_WITH_ROLLBACK.value):
        return Plan(refusal=f"Migration3.0 holds cv={cv!r}, which cannot be rolled back")
    attributes = {
        "cv": ClientVersion.V2X.value,
        "mb": ROLLBACK_BY,
        "mts": now_ms,
        "h": _history(item, now_ms),
    }
    writes = [Write(WriteKind.SET_CLIENT_VERSION, table, attributes, str(cv), place)]
    notes = []
    if gsi_present:
        writes.append(Write(WriteKind.WAIT, lease_table, wait_s=wait_s))
        writes.append(Write(WriteKind.DELETE_GSI, lease_table))
    else:
        notes.append(f"{lease_table} has no {GSI_NAME}: nothing to delete")
    if non_lease_items:
        notes.append(
            f"the lease table holds {non_lease_items} non-lease item(s): run only workers that skip them "
            "(kcl-daemon, or KCL 3.5 with CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1); a genuine KCL "
            "2.x worker reads them as leases"
        )
    return Plan(tuple(writes), notes=tuple(notes))


def plan_rollforward(
    item: Mapping[str, object] | None, place: Place | None, table: str, *, now_ms: int
) -> Plan:
    """Start the 2.x -> 3.x migration again after a rollback."""
    cv = None if item is None else item.get("cv")
    if item is None or place is None:
        return Plan(refusal="no Migration3.0 item: nothing was rolled back (check the names)")
    if cv != ClientVersion.V2X.value:
        if cv == ClientVersion.V3X.value:
            return Plan(refusal="Migration3.0 is CLIENT_VERSION_3X: the application has already migrated")
        return Plan(refusal=f"Migration3.0 is {cv}, not rolled back: nothing to roll forward")
    attributes = {
        "cv": ClientVersion.UPGRADE_FROM_2X.value,
        "mb": ROLLFORWARD_BY,
        "mts": now_ms,
        "h": _history(item, now_ms),
    }
    return Plan(
        (Write(WriteKind.SET_CLIENT_VERSION, table, attributes, str(cv), place),),
        notes=("the workers flip to 3.x by themselves once every lease owner publishes worker metrics",),
    )


def plan_remove_legacy_tables(layout: LayoutReport) -> Plan:
    """Delete the legacy tables, only once the table migration is COMPLETE."""
    if not layout.legacy_tables_present:
        return Plan(notes=("no legacy table exists: nothing to remove",))
    if layout.migration is not TableMigrationStatus.COMPLETE:
        state = layout.migration.short if layout.migration is not None else "not started"
        return Plan(
            refusal=f"the table migration is {state}, not COMPLETE: workers still use "
            f"{', '.join(layout.legacy_tables_present)}"
        )
    notes = []
    if layout.warnings:
        notes.append("check the warnings above first: a KCL 3.0-3.4 worker would re-create the tables")
    return Plan(
        tuple(Write(WriteKind.DELETE_TABLE, name) for name in layout.legacy_tables_present),
        notes=tuple(notes),
    )
