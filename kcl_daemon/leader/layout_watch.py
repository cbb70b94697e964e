"""The ``layout-check`` loop: names the workers of a layout this application cannot share its table with
(:mod:`kcl_daemon.core.leader.layout_watch` decides), in a WARNING at most every 5 minutes per worker
while it lasts, and in the ``kcl_incompatible_layout_workers`` gauge.

Cheap reads only, every ``interval_s`` (the client-version poll, 60 s): while single-table, a DescribeTable
of ``<app>-CoordinatorState`` and, only if it exists, a GetItem of its ``Leader`` and a Scan of the small
``<app>-WorkerMetricStats``; while in the 3.0-3.4 layout, a GetItem of the lease table's ``Leader`` and
the lease-table worker-metrics rows of the fleet's last worker-metrics scan (no scan of its own).
Blocking reads run on the ``lease-3x`` pool.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kcl_daemon.clock import Clock
from kcl_daemon.core.leader.layout_watch import (
    WARN_EVERY_S,
    LayoutView,
    LockSeen,
    Stranger,
    due_warnings,
    lock_seen,
    strangers,
)
from kcl_daemon.core.leader.table_migration import (
    LEADER_KEY,
    MetricsRow,
    Place,
    TableMigrationStatus,
)
from kcl_daemon.errors import DependencyUnavailable, KclError
from kcl_daemon.leader.tables import FleetMetrics, Tables

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LayoutWatchConfig:
    worker_id: str
    interval_s: float = 60.0
    reporter_period_s: float = 30.0
    warn_every_s: float = WARN_EVERY_S


class LayoutWatch:
    def __init__(
        self,
        tables: Tables,
        fleet_metrics: FleetMetrics,
        config: LayoutWatchConfig,
        clock: Clock,
        pool: ThreadPoolExecutor,
        *,
        wall: Callable[[], float] = time.time,
        count: Callable[[int], None] = lambda _n: None,
    ) -> None:
        self._tables = tables
        self._fleet = fleet_metrics
        self._config = config
        self._clock = clock
        self._pool = pool
        self._wall = wall
        self._count = count
        self._rvn: dict[Place, object] = {}
        self._warned: dict[str, float] = {}
        self.found: tuple[Stranger, ...] = ()

    async def run(self) -> None:
        while True:
            await self._clock.sleep(self._config.interval_s)
            try:
                await self.check_once()
            except KclError as exc:
                logger.info("layout check skipped: %s", exc)

    async def check_once(self) -> tuple[Stranger, ...]:
        view = await asyncio.get_running_loop().run_in_executor(self._pool, self._look)
        found = strangers(view)
        due, self._warned = due_warnings(
            found, self._warned, self._clock.monotonic(), self._config.warn_every_s
        )
        for stranger in due:
            logger.warning("%s", stranger.message)
        if self.found and not found:
            logger.info("no worker of an incompatible table layout is seen any more")
        self.found = found
        self._count(len(found))
        return found

    def _lock(self, place: Place, store: Any) -> LockSeen | None:
        try:
            item = store.get(LEADER_KEY)
        except DependencyUnavailable:
            item = None
        seen, self._rvn[place] = lock_seen(item, self._rvn.get(place))
        return seen

    def _look(self) -> LayoutView:
        tables = self._tables
        status = tables.status
        legacy_rows: tuple[MetricsRow, ...] = ()
        lease_rows: tuple[MetricsRow, ...] = ()
        legacy_lock: LockSeen | None = None
        lease_lock: LockSeen | None = None
        if status is TableMigrationStatus.COMPLETE:
            if tables.legacy.exists():
                legacy_lock = self._lock(Place.LEGACY, tables.legacy)
                try:
                    entries, _ = tables.legacy_metrics.scan()
                except DependencyUnavailable:
                    entries = []
                legacy_rows = tuple(
                    MetricsRow(e.worker_id, Place.LEGACY, e.last_update_s, e.support_code) for e in entries
                )
        else:
            lease_lock = self._lock(Place.LEASE_TABLE, tables.lease_table)
            lease_rows = tuple(row for row in self._fleet.rows if row.place is Place.LEASE_TABLE)
        return LayoutView(
            self._config.worker_id,
            status,
            tables.stored,
            tables.lease_table.table_name,
            tables.legacy.table_name,
            tables.legacy_metrics.table_name,
            legacy_rows,
            lease_rows,
            legacy_lock,
            lease_lock,
            self._wall(),
            self._config.reporter_period_s,
        )
