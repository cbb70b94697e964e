"""A table's layout and migration state, as far as doctor needs it (contract §9.2). Pure.

TEMPORARY: issue 19 adds ``kcl_daemon.core.assignment.layout`` (the full description of a table's
layout and table-migration state, shared with ``leases`` and the migration commands). When it lands on
main, :func:`describe_layout` below is replaced by a call to it and this module is deleted; nothing else
in doctor depends on how the layout is worked out.
"""

from __future__ import annotations

from dataclasses import dataclass

from kcl_daemon.doctor.facts import LayoutFacts

LEADER, MIGRATION, TABLE_MIGRATION = "Leader", "Migration3.0", "TableMigration3.5"


@dataclass(frozen=True, slots=True)
class LayoutWarning:
    message: str
    fix: str
    error: bool = False


@dataclass(frozen=True, slots=True)
class LayoutReport:
    layout: str
    lines: tuple[str, ...]
    warnings: tuple[LayoutWarning, ...] = ()


def describe_layout(facts: LayoutFacts) -> LayoutReport:
    legacy, single = facts.legacy_items, facts.lease_table_items
    warnings: list[LayoutWarning] = []
    migration = legacy.get(TABLE_MIGRATION) or single.get(TABLE_MIGRATION)
    status = str(migration.get("tm", "")) if migration else ""
    if facts.coordinator_table_exists:
        if status.endswith("COMPLETE"):
            layout = "single table (KCL 3.5), migrated from the 3.0-3.4 layout"
        elif status:
            layout = f"KCL 3.0-3.4 layout, migrating to a single table ({status})"
        else:
            layout = f"KCL 3.0-3.4 layout ({facts.coordinator_table} beside the lease table)"
    elif any(key in single for key in (LEADER, MIGRATION, TABLE_MIGRATION)):
        layout = "single table (KCL 3.5): coordinator state in the lease table"
    else:
        layout = "no KCL 3.x coordinator state (a KCL 2.x fleet, or no worker has started)"
    version_item = legacy.get(MIGRATION) or single.get(MIGRATION)
    client_version = str(version_item.get("cv")) if version_item else "none (no Migration3.0 item)"
    lines = [f"layout: {layout}", f"client version: {client_version}"]
    if status:
        lines.append(f"table migration: {status}")
    if LEADER in legacy and LEADER in single:
        warnings.append(
            LayoutWarning(
                f"a Leader lock exists in both {facts.coordinator_table} and {facts.lease_table}: two "
                "leaders may be assigning leases",
                "find out which versions run (below); workers below 3.5 must not run on a migrated table",
                error=True,
            )
        )
    if layout.startswith("single table"):
        old = sorted(
            row.worker_id
            for row in facts.metrics
            if not row.kcl_daemon
            and row.support_code is None
            and row.last_update_s is not None
            and facts.now_s - row.last_update_s <= 2 * facts.reporter_period_s
        )
        if old:
            warnings.append(
                LayoutWarning(
                    f"KCL 3.0-3.4 worker(s) {', '.join(old)} run on a single-table layout: they read the "
                    "coordinator items as leases and re-create the side tables (contract §9.2.5)",
                    "upgrade them to KCL 3.5 or later before they run on this table",
                    error=True,
                )
            )
    return LayoutReport(layout, tuple(lines), tuple(warnings))
