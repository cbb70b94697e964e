"""The application's tables as the table migration says to use them *now* (contract §9.2).

:class:`Tables` owns the two places (the legacy ``<app>-CoordinatorState`` / ``<app>-WorkerMetricStats``
tables and the lease table) and this worker's live table-migration status
(:mod:`kcl_daemon.core.leader.table_migration` decides; this class reads and remembers):

* :meth:`Tables.start` finds the status at start-up (and whether a new application gets the legacy
  tables: ``leaseTableLayout``, else :mod:`kcl_daemon.core.leader.keep_out`, which keeps the lease
  table free of non-lease items while KCL 2.x workers may read it, moving them out with
  :mod:`kcl_daemon.leader.move_out`); :meth:`Tables.refresh` re-reads the stored status (consistently; never
  once COMPLETE) and re-derives the local status, so write targets follow the live state;
* coordinator-state reads try the places in the status's order; writes go to the status's place (the
  legacy tables are created on the first write that needs them);
* :meth:`Tables.lock_store` is where the ``Leader`` lock lives now;
* :class:`FleetMetrics` reads worker metrics from every place the status reads (the newest row of a
  worker wins) and remembers where each came from; :class:`MetricsWriter` publishes this worker's row
  to the status's place and deletes its row from the place it left.

Blocking (boto3): callers run these on the ``lease-3x`` pool.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kcl_daemon.core.leader.client_version import ClientVersionConfig
from kcl_daemon.core.leader.keep_out import LayoutChoice, LeaseTableItems, choose_layout, two_x_about
from kcl_daemon.core.leader.table_migration import (
    LEADER_KEY,
    MIGRATION_KEY,
    TABLE_MIGRATION_KEY,
    MetricsRow,
    Place,
    Routing,
    Start,
    TableLayoutConfig,
    TableMigrationStatus,
    local_status,
    parse_status,
    routing,
    start_status,
)
from kcl_daemon.core.leader.worker_metrics import WorkerMetricStats
from kcl_daemon.errors import DependencyUnavailable, KclError
from kcl_daemon.leader.move_out import move_out
from kcl_daemon.retry import STARTUP

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TablesConfig:
    worker_id: str
    #: ``migrateAllEntitiesToLeaseTable``
    migrate_all: bool = False
    #: ``leaseTableLayout``: what a new application gets (None: not set, chosen by
    #: :func:`~kcl_daemon.core.leader.keep_out.choose_layout`)
    layout: TableLayoutConfig | None = None
    #: ``clientVersionConfig`` (whether KCL 2.x workers may be about)
    client_version: ClientVersionConfig = ClientVersionConfig.V3X


class Tables:
    def __init__(
        self,
        legacy: Any,  # CoordinatorStore on <app>-CoordinatorState (key ``key``)
        lease_table: Any,  # CoordinatorStore on the lease table (key ``leaseKey``)
        legacy_metrics: Any,  # WorkerMetricsTable on <app>-WorkerMetricStats
        lease_table_metrics: Any,  # WorkerMetricsTable in the lease table
        config: TablesConfig,
    ) -> None:
        self.legacy = legacy
        self.lease_table = lease_table
        self.legacy_metrics = legacy_metrics
        self.lease_table_metrics = lease_table_metrics
        self.config = config
        self.status: TableMigrationStatus = TableMigrationStatus.COMPLETE
        self.stored: TableMigrationStatus | None = None
        self.stored_item: dict[str, Any] | None = None
        self.started: Start | None = None
        #: the layout chosen for an application without a coordinator-state table (None: it has one)
        self.choice: LayoutChoice | None = None
        #: the owners of the lease table's leases (read only when the layout choice needs them)
        self.lease_owners: Callable[[], Sequence[str | None]] | None = None
        self._create_legacy = False
        self._legacy_ready = False
        #: called with (old, new) when the local status changes
        self.on_change: list[Callable[[TableMigrationStatus, TableMigrationStatus], None]] = []

    # -- status ----------------------------------------------------------------------------------

    @property
    def routing(self) -> Routing:
        return routing(self.status)

    def start(self) -> Start:
        """The status at start-up (contract §9.2.2). Raises LayoutConflict (a ValueError) when the
        configured layout cannot join this table."""
        exists = STARTUP.call(self.legacy.exists)
        stored = None
        if exists:
            self.stored_item = STARTUP.call(self.legacy.get, TABLE_MIGRATION_KEY)
            stored = parse_status(None if self.stored_item is None else self.stored_item.get("tm"))
        layout = self.config.layout or TableLayoutConfig.SINGLE_TABLE
        has_items = False
        if not exists:
            items = self._lease_table_items()
            self.choice = choice = choose_layout(self.config.layout, self.config.client_version, items)
            layout, has_items = choice.layout, items.has_3x_state
            if choice.warning:
                logger.warning("%s", choice.warning)
            if choice.move_migration or choice.delete_metrics:
                move_out(choice, self.legacy, self.lease_table, self.lease_table_metrics)
                self.legacy_metrics.create_table_if_missing()
                exists, has_items = True, False  # the side tables exist now, with Migration3.0 if any
        started = start_status(exists, stored, self.config.migrate_all, layout, has_items)
        self.started = started
        self.stored = stored
        self._create_legacy = started.create_legacy_tables
        self._legacy_ready = exists
        self.status = started.status
        logger.info("table layout: %s (status %s)", started.reason, started.status.short)
        if started.warning:
            logger.warning("%s", started.warning)
        return started

    def _coordinator_items(self) -> LeaseTableItems:
        migration = STARTUP.call(self.lease_table.get, MIGRATION_KEY)
        return LeaseTableItems(
            None if migration is None else str(migration.get("cv")),
            STARTUP.call(self.lease_table.get, LEADER_KEY) is not None,
            STARTUP.call(self.lease_table.get, TABLE_MIGRATION_KEY) is not None,
        )

    def _lease_table_items(self) -> LeaseTableItems:
        """The lease table's non-lease items, as far as the layout choice needs them."""
        items = self._coordinator_items()
        if self.config.layout is not None:
            return items
        version = self.config.client_version
        if two_x_about(version, items) is None and not items.has_3x_state and self.lease_owners is not None:
            me = self.config.worker_id
            owners = {o for o in STARTUP.call(self.lease_owners) if o is not None and o != me}
            # read again after the owners: a 3.x worker writes Migration3.0 before it owns any lease, so
            # owners seen while there is still no Migration3.0 run the 2.x algorithms (a 3.x worker that
            # started beside this one meanwhile is not taken for one)
            items = self._coordinator_items()
            if not items.has_3x_state:
                items = replace(items, other_owners=tuple(sorted(owners)))
        if two_x_about(version, items) is not None:
            entries, _ = STARTUP.call(self.lease_table_metrics.scan)
            items = replace(items, metrics_rows=tuple(sorted(e.worker_id for e in entries)))
        return items

    def refresh(self) -> TableMigrationStatus:
        """Re-read the stored status (strongly consistent) and re-derive the local one; nothing is read
        once COMPLETE (terminal)."""
        if self.status is TableMigrationStatus.COMPLETE:
            return self.status
        if not self._legacy_ready and not self._create_legacy:
            return self.status
        try:
            item = self.legacy.get(TABLE_MIGRATION_KEY)
        except DependencyUnavailable:
            item = None  # the legacy table does not exist (yet)
        self.stored_item = item
        self.stored = parse_status(None if item is None else item.get("tm"))
        self._set(local_status(self.stored, self.config.migrate_all))
        return self.status

    def force(self, status: TableMigrationStatus) -> None:
        """The leader wrote ``status`` itself (the COMPLETE transaction): follow it at once."""
        self.stored = status
        self._set(local_status(status, self.config.migrate_all))

    def _set(self, status: TableMigrationStatus) -> None:
        old = self.status
        if status is old:
            return
        self.status = status
        logger.info(
            "table migration: %s -> %s (writes to the %s, leader lock in the %s)",
            old.short,
            status.short,
            self.routing.writes.value,
            self.routing.lock.value,
        )
        for listener in self.on_change:
            listener(old, status)

    # -- coordinator state -----------------------------------------------------------------------

    def store(self, place: Place) -> Any:
        return self.legacy if place is Place.LEGACY else self.lease_table

    def ensure_legacy_tables(self) -> None:
        """Create the legacy tables if this worker is the one to create them (KCL_3_0_TO_3_4 layout)."""
        if self._legacy_ready or not self._create_legacy:
            return
        self.legacy.create_table_if_missing()
        self.legacy_metrics.create_table_if_missing()
        self._legacy_ready = True

    def read(self, key: str) -> dict[str, Any] | None:
        """A coordinator-state item from the first place of the status's reads that has it."""
        for place in self.routing.reads:
            if place is Place.LEGACY and not self._legacy_ready and not self._create_legacy:
                continue  # (a worker that may create them looks: another one may have created them first)
            try:
                item = self.store(place).get(key)
            except DependencyUnavailable:
                continue
            if item is not None:
                return dict(item)
        return None

    def write_store(self) -> Any:
        """Where coordinator-state items are written now (legacy tables created first if needed)."""
        place = self.routing.writes
        if place is Place.LEGACY:
            self.ensure_legacy_tables()
        return self.store(place)

    def lock_store(self) -> Any:
        """Where the ``Leader`` lock lives now."""
        place = self.routing.lock
        return self.store(place)

    def metrics_write_table(self) -> Any:
        place = self.routing.writes
        if place is Place.LEGACY:
            self.ensure_legacy_tables()
            return self.legacy_metrics
        return self.lease_table_metrics

    def metrics_read_tables(self) -> list[Any]:
        tables = []
        for place in self.routing.reads:
            if place is Place.LEGACY:
                if self._legacy_ready or self._create_legacy:
                    tables.append(self.legacy_metrics)
            else:
                tables.append(self.lease_table_metrics)
        return tables


class FleetMetrics:
    """Every worker's metrics row from the places the status reads (``scan`` / ``delete_stale`` as the
    assignment loop expects); :attr:`rows` keeps where each row was found, for the table migration."""

    def __init__(self, tables: Tables) -> None:
        self._tables = tables
        self.rows: tuple[MetricsRow, ...] = ()
        self._where: dict[str, Any] = {}

    def scan(self) -> tuple[list[WorkerMetricStats], list[str]]:
        newest: dict[str, WorkerMetricStats] = {}
        where: dict[str, Any] = {}
        rows: list[MetricsRow] = []
        problems: list[str] = []
        for table in self._tables.metrics_read_tables():
            try:
                entries, found = table.scan()
            except DependencyUnavailable:
                continue  # a legacy table that is gone
            problems += found
            for stats in entries:
                rows.append(
                    MetricsRow(
                        stats.worker_id,
                        table.place,
                        stats.last_update_s,
                        stats.support_code,
                        stats.support_updated_s,
                    )
                )
                seen = newest.get(stats.worker_id)
                if seen is None or (stats.last_update_s or 0) > (seen.last_update_s or 0):
                    newest[stats.worker_id] = stats
                    where[stats.worker_id] = table
        self.rows = tuple(rows)
        self._where = where
        return list(newest.values()), problems

    def delete_stale(self, worker_id: str, observed_lut: float) -> None:
        table = self._where.get(worker_id, self._tables.metrics_write_table())
        table.delete_stale(worker_id, observed_lut)


class MetricsWriter:
    """Publishes this worker's row where the status says; after a successful publish in a new place,
    deletes the row it left behind (so the leader never counts it as still writing the legacy table)."""

    def __init__(self, tables: Tables) -> None:
        self._tables = tables
        self._last: Any = None

    def publish(self, stats: WorkerMetricStats) -> None:
        table = self._tables.metrics_write_table()
        table.publish(stats)
        previous, self._last = self._last, table
        if previous is not None and previous is not table:
            try:
                previous.delete(stats.worker_id)
                logger.info(
                    "worker metrics now in the %s; the row in the %s is deleted",
                    table.place.value,
                    previous.place.value,
                )
            except KclError as exc:
                logger.warning("deleting this worker's old metrics row failed (it goes stale): %s", exc)

    def delete(self, worker_id: str) -> None:
        for table in {id(t): t for t in (self._last, self._tables.metrics_write_table()) if t}.values():
            table.delete(worker_id)
