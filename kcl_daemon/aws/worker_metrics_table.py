"""WorkerMetricStats rows in one place (contract §3.9, §9.1): the ``<app>-WorkerMetricStats`` table of
KCL 3.0-3.4 (key ``wid``), or the lease table of KCL 3.5 (key ``leaseKey``, ``entityType`` =
``WORKER_METRIC_STATS``).

Upsert of one worker's item (as Java: SET every attribute; in the lease table also on condition that
the item is absent or already a worker-metrics item, so it can never land on a lease), scan of all rows
(in the lease table a Scan filtered on ``entityType``, as Java), and deletes: this worker's own on a
graceful stop, and stale ones (conditional on the ``lut`` the leader read).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from kcl_daemon.aws.coordinator_state import LEASE_TABLE_KEY, CoordinatorStore
from kcl_daemon.core.leader.table_migration import Place
from kcl_daemon.core.leader.worker_metrics import (
    ENTITY_TYPE,
    LAST_UPDATE,
    OPERATING_RANGE,
    STATS,
    SUPPORT_CODE,
    SUPPORT_UPDATED,
    WORKER_ID,
    WorkerMetricsItemError,
    WorkerMetricStats,
    from_item,
    to_item,
)
from kcl_daemon.core.leader.zones import EXTRA_ATTRIBUTE
from kcl_daemon.core.leases.heartbeat import BEAT
from kcl_daemon.errors import LeaseConflict
from kcl_daemon.retry import LEASE_IO

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: what a report writes (:func:`to_item`): removed from an entry that keeps a heartbeat
REPORT_ATTRIBUTES = (STATS, OPERATING_RANGE, EXTRA_ATTRIBUTE, SUPPORT_CODE, SUPPORT_UPDATED)


class WorkerMetricsTable:
    def __init__(self, client: DynamoDBClient, table_name: str, *, in_lease_table: bool = False) -> None:
        self._store = CoordinatorStore(client, table_name, LEASE_TABLE_KEY if in_lease_table else WORKER_ID)
        self.table_name = table_name
        self.place = Place.LEASE_TABLE if in_lease_table else Place.LEGACY
        self._kind = ENTITY_TYPE if in_lease_table else None

    def exists(self) -> bool:
        return self._store.exists()

    def create_table_if_missing(self) -> bool:
        """Create ``<app>-WorkerMetricStats`` (the legacy place only; the lease table exists already)."""
        if self.place is Place.LEASE_TABLE:
            return False
        return self._store.create_table_if_missing()

    def publish(self, stats: WorkerMetricStats) -> None:
        LEASE_IO.call(self._store.update, stats.worker_id, to_item(stats), entity_type=self._kind)

    def scan(self) -> tuple[list[WorkerMetricStats], list[str]]:
        """Every readable entry, and one message per unreadable one."""
        entries: list[WorkerMetricStats] = []
        problems: list[str] = []
        for item in self._store.scan(self._kind):
            try:
                entries.append(from_item(item, self._store.key_name))
            except WorkerMetricsItemError as exc:
                problems.append(str(exc))
        return entries, problems

    def delete(self, worker_id: str) -> None:
        """Delete this worker's entry (a graceful stop). In the ``<app>-WorkerMetricStats`` table the
        entry may carry the worker's per-worker heartbeat (``leaseRenewal = PER_WORKER``), which must
        outlive the report until the worker's leases are released: then only the report goes, ``lut``
        becomes 0 (a dead entry to every leader) and the heartbeat thread deletes the item as it stops."""
        if self.place is Place.LEASE_TABLE:
            LEASE_IO.call(self._store.delete, worker_id, entity_type=self._kind)
            return
        try:
            LEASE_IO.call(self._store.delete, worker_id, require_missing=(BEAT,))
        except LeaseConflict:  # absent, or a heartbeat is on it (absent: the strip's condition fails too)
            with contextlib.suppress(LeaseConflict):
                LEASE_IO.call(self._store.strip, worker_id, REPORT_ATTRIBUTES, {LAST_UPDATE: 0}, require=BEAT)

    def delete_stale(self, worker_id: str, observed_lut: float) -> None:
        """Delete an entry only if it still has the ``lut`` the leader saw (Java's condition), and never
        one that carries a per-worker heartbeat (its ``lut`` is 0 until the first report: its worker's
        own withdrawal deletes it)."""
        self._store.delete(
            worker_id,
            require_equal={LAST_UPDATE: int(observed_lut)},
            entity_type=self._kind,
            require_missing=() if self.place is Place.LEASE_TABLE else (BEAT,),
        )
