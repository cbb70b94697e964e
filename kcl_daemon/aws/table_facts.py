"""Read what :func:`kcl_daemon.core.leader.layout.describe_layout` needs from an application's tables:
the lease table's non-lease items (one full scan), and whether the legacy coordinator-state and
worker-metrics tables exist and what they hold. Read-only.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import TYPE_CHECKING, Any

from kcl_daemon.aws.coordinator_state import COORDINATOR_KEY, ENTITY_TYPE, LEASE_TABLE_KEY, CoordinatorStore
from kcl_daemon.aws.worker_metrics_table import WorkerMetricsTable
from kcl_daemon.core.leader.layout import COORDINATOR_KEYS, TableFacts
from kcl_daemon.core.leader.table_migration import MetricsRow
from kcl_daemon.core.leader.worker_metrics import ENTITY_TYPE as WORKER_METRICS_KIND
from kcl_daemon.core.leader.worker_metrics import WorkerMetricsItemError, WorkerMetricStats, from_item
from kcl_daemon.core.leases.lease_codec import LEASE_COUNTER
from kcl_daemon.errors import DependencyUnavailable
from kcl_daemon.retry import LEASE_IO

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def _row(stats: WorkerMetricStats, place: Any) -> MetricsRow:
    return MetricsRow(
        stats.worker_id, place, stats.last_update_s, stats.support_code, stats.support_updated_s
    )


def read_table_facts(
    client: DynamoDBClient,
    lease_table: str,
    coordinator_table: str,
    metrics_table: str,
    *,
    now_s: float,
    reporter_period_s: float = 30.0,
) -> TableFacts:
    """One scan of the lease table, and the legacy tables if they exist."""
    kinds: Counter[str] = Counter()
    coordinator: dict[str, dict[str, Any]] = {}
    unmarked: list[str] = []
    rows: list[MetricsRow] = []
    single_metrics = WorkerMetricsTable(client, lease_table, in_lease_table=True)
    for item in CoordinatorStore(client, lease_table, LEASE_TABLE_KEY).scan():
        key = str(item.get(LEASE_TABLE_KEY))
        kind = item.get(ENTITY_TYPE)
        if kind is None:
            if LEASE_COUNTER in item:
                kinds["LEASE"] += 1
                continue
            unmarked.append(key)
            if key in COORDINATOR_KEYS:
                coordinator[key] = item
            continue
        kinds[str(kind)] += 1
        if key in COORDINATOR_KEYS and kind != "LEASE":
            coordinator[key] = item
        if kind == WORKER_METRICS_KIND:
            with contextlib.suppress(WorkerMetricsItemError):  # an unreadable row is no fleet member
                rows.append(_row(from_item(item, LEASE_TABLE_KEY), single_metrics.place))
    legacy_store = CoordinatorStore(client, coordinator_table, COORDINATOR_KEY)
    legacy_items: dict[str, dict[str, Any]] | None = None
    if LEASE_IO.call(legacy_store.exists):
        legacy_items = {str(item.get(COORDINATOR_KEY)): item for item in legacy_store.scan()}
    legacy_metrics = WorkerMetricsTable(client, metrics_table)
    legacy_rows: tuple[MetricsRow, ...] | None = None
    try:
        entries, _problems = legacy_metrics.scan()
        legacy_rows = tuple(_row(stats, legacy_metrics.place) for stats in entries)
    except DependencyUnavailable:
        legacy_rows = None
    return TableFacts(
        lease_table,
        dict(kinds),
        coordinator,
        tuple(sorted(unmarked)),
        coordinator_table,
        legacy_items,
        metrics_table,
        legacy_rows,
        tuple(rows),
        now_s,
        reporter_period_s,
    )
