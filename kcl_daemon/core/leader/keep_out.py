"""Which layout a worker gives an application whose ``<app>-CoordinatorState`` does not exist, so that a
lease table KCL 2.x workers may read never holds anything but leases (docs/migrating.md). Pure.

A KCL 2.x worker reads every lease-table item as a lease: one ``Migration3.0``, ``Leader`` or
worker-metrics item makes it fail at start-up (``leaseCounter is marked non-null but is null``) and stop
after 20 attempts. So while 2.x workers may be about, kcl-daemon keeps its own items in the two side
tables of the KCL 3.0-3.4 layout, which 2.x never reads. 2.x workers may be about when:

* the client version this worker resolves runs the 2.x taker (``..._COMPATIBLE_WITH_2X``,
  ``..._PHASE1``, or a stored ``CLIENT_VERSION_UPGRADE_FROM_2X`` / ``CLIENT_VERSION_2X``); or
* the table has no KCL 3.x state at all (no ``Migration3.0``, ``Leader`` or ``TableMigration3.5``) yet
  holds leases owned by other workers: every worker that runs a 3.x algorithm writes ``Migration3.0``,
  so those owners run the 2.x algorithms.

:func:`choose_layout` decides, from ``leaseTableLayout`` (None: not set) and what start-up read of the
lease table:

* the key set: it is followed (check-config warns about ``SINGLE_TABLE`` with a 2.x-compatible mode);
* no 2.x worker about: the single table, as KCL 3.5;
* 2.x workers about, nothing of ours in the lease table: the side tables;
* 2.x workers about and the lease table holds ``Migration3.0`` or worker-metrics items (a single table
  written by an earlier kcl-daemon, or by Java 3.5 in ``..._COMPATIBLE_WITH_2X``): they are moved out;
  ``Migration3.0`` into ``<app>-CoordinatorState`` (one transaction: put there if absent, delete here if
  unchanged), the worker-metrics items deleted (each live worker publishes its own again in the side
  table). Only those two kinds are moved: neither is a lock, and both are re-read by every worker;
* 2.x workers about and the lease table holds a ``Leader`` lock or ``TableMigration3.5``: moving a lock
  could make two leaders, and ``TableMigration3.5`` marks a finished table migration. The worker refuses
  to start, with what to do (:class:`~kcl_daemon.core.leader.table_migration.LayoutConflict`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kcl_daemon.core.leader.client_version import (
    Algorithm,
    ClientVersionConfig,
    parse_client_version,
    resolve,
)
from kcl_daemon.core.leader.table_migration import LayoutConflict, TableLayoutConfig


@dataclass(frozen=True, slots=True)
class LeaseTableItems:
    """What start-up read of the lease table's non-lease items (no coordinator-state table exists)."""

    #: ``cv`` of the lease table's ``Migration3.0`` (None: no such item)
    migration_cv: str | None = None
    leader: bool = False
    table_migration: bool = False
    #: the worker ids of the lease table's worker-metrics items
    metrics_rows: tuple[str, ...] = ()
    #: owners of leases other than this worker (None: not read; only read when it can matter)
    other_owners: tuple[str, ...] | None = None

    @property
    def has_3x_state(self) -> bool:
        return self.migration_cv is not None or self.leader or self.table_migration


@dataclass(frozen=True, slots=True)
class LayoutChoice:
    layout: TableLayoutConfig
    reason: str
    #: move the lease table's Migration3.0 into the coordinator-state table
    move_migration: bool = False
    #: delete these worker-metrics items from the lease table
    delete_metrics: tuple[str, ...] = ()
    #: said once at start-up, at WARNING
    warning: str | None = None


def two_x_about(config: ClientVersionConfig, items: LeaseTableItems) -> str | None:
    """Why KCL 2.x workers may read this lease table, or None."""
    try:
        stored = parse_client_version(items.migration_cv)
    except ValueError:
        return None  # the client-version step reports the unknown value
    resolution = resolve(config, stored)
    if resolution.algorithm is Algorithm.TAKER:
        return f"this worker runs the 2.x lease taker ({resolution.version.value}: {resolution.reason})"
    if not items.has_3x_state and items.other_owners:
        return (
            f"the table has no KCL 3.x state yet its leases are owned by {_names(items.other_owners)}, "
            "which therefore run the KCL 2.x algorithms"
        )
    return None


def choose_layout(
    configured: TableLayoutConfig | None, config: ClientVersionConfig, items: LeaseTableItems
) -> LayoutChoice:
    """The layout of an application without ``<app>-CoordinatorState`` (see the module's docstring)."""
    if configured is not None:
        return LayoutChoice(configured, f"leaseTableLayout = {configured.value}")
    why = two_x_about(config, items)
    if why is None:
        return LayoutChoice(TableLayoutConfig.SINGLE_TABLE, "single table (KCL 3.5): no KCL 2.x worker about")
    if items.leader or items.table_migration:
        kinds = " and ".join(
            name
            for name, there in (("a Leader lock", items.leader), ("TableMigration3.5", items.table_migration))
            if there
        )
        raise LayoutConflict(
            f"KCL 2.x workers may read this lease table ({why}), but it holds {kinds} (a KCL 3.5 "
            "single-table application): KCL 2.x workers fail on such items, and a lock cannot be moved out "
            "safely while workers may hold it. Either keep every KCL 2.x worker away from this table and set "
            "leaseTableLayout = SINGLE_TABLE, or stop the fleet, delete the Leader item (it is stale while "
            "the fleet runs the 2.x algorithms) and start again"
        )
    move = items.migration_cv is not None
    if move or items.metrics_rows:
        moved = ", ".join(
            part
            for part in (
                "Migration3.0" if move else "",
                f"{len(items.metrics_rows)} worker-metrics item(s)" if items.metrics_rows else "",
            )
            if part
        )
        return LayoutChoice(
            TableLayoutConfig.KCL_3_0_TO_3_4,
            f"KCL 3.0-3.4 layout: {why}; {moved} moved out of the lease table into the side tables",
            move_migration=move,
            delete_metrics=tuple(sorted(items.metrics_rows)),
            warning=(
                f"the lease table holds {moved}, which KCL 2.x workers read as leases (they fail to start): "
                "moving them to the coordinator-state and worker-metrics tables. A worker that writes them "
                "into the lease table again (a kcl-daemon older than this one) is named in a later warning"
            ),
        )
    warning = None
    if config is ClientVersionConfig.V3X:
        warning = (
            f"{why}: this worker keeps its items in the side tables, but it runs the 3.x leader beside "
            "them; set clientVersionConfig = CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X while KCL 2.x workers "
            "remain"
        )
    return LayoutChoice(
        TableLayoutConfig.KCL_3_0_TO_3_4,
        f"KCL 3.0-3.4 layout (the coordinator-state and worker-metrics tables beside the lease table): {why}",
        warning=warning,
    )


def _names(workers: Sequence[str]) -> str:
    shown = sorted(set(workers))
    return ", ".join(shown[:5]) + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")
