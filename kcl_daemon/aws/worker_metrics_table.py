"""The ``<applicationName>-WorkerMetricStats`` table of KCL 3.0-3.4 (key ``wid``; contract §3.9).

Upsert of one worker's item without a condition (as Java), scan of all items, and deletes: this
worker's own on a graceful stop, and stale ones (conditional on the ``lut`` the leader read).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kcl_daemon.aws.coordinator_state import CoordinatorStore
from kcl_daemon.core.assignment.worker_metrics import (
    LAST_UPDATE,
    WORKER_ID,
    WorkerMetricsItemError,
    WorkerMetricStats,
    from_item,
    to_item,
)
from kcl_daemon.retry import LEASE_IO

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class WorkerMetricsTable:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._store = CoordinatorStore(client, table_name, WORKER_ID)
        self.table_name = table_name

    def create_table_if_missing(self) -> bool:
        return self._store.create_table_if_missing()

    def publish(self, stats: WorkerMetricStats) -> None:
        LEASE_IO.call(self._store.update, stats.worker_id, to_item(stats))

    def scan(self) -> tuple[list[WorkerMetricStats], list[str]]:
        """Every readable entry, and one message per unreadable one."""
        entries: list[WorkerMetricStats] = []
        problems: list[str] = []
        for item in self._store.scan():
            try:
                entries.append(from_item(item))
            except WorkerMetricsItemError as exc:
                problems.append(str(exc))
        return entries, problems

    def delete(self, worker_id: str) -> None:
        LEASE_IO.call(self._store.delete, worker_id)

    def delete_stale(self, worker_id: str, observed_lut: float) -> None:
        """Delete an entry only if it still has the ``lut`` the leader saw (Java's condition)."""
        lut: Any = int(observed_lut)
        self._store.delete(worker_id, require_equal={LAST_UPDATE: lut})
