"""The KCL 3.0-3.4 side tables' names, built in one place (contract §9.1)."""

from __future__ import annotations

import pytest

from kcl_daemon.core.leader.table_names import LegacyTableNames, legacy_table_names, worker_metrics_beside


@pytest.mark.parametrize(
    ("app", "lease_table", "coordinator", "metrics", "expected"),
    [
        ("orders", "orders", None, None, ("orders-CoordinatorState", "orders-WorkerMetricStats")),
        # applicationName names them, not tableName
        ("orders", "orders-leases", None, None, ("orders-CoordinatorState", "orders-WorkerMetricStats")),
        # no applicationName: the lease table's name
        (None, "leases", None, None, ("leases-CoordinatorState", "leases-WorkerMetricStats")),
        # configured names win, each on its own
        ("orders", "orders", "coord", None, ("coord", "orders-WorkerMetricStats")),
        ("orders", "orders", None, "metrics", ("orders-CoordinatorState", "metrics")),
    ],
)
def test_legacy_table_names(
    app: str | None, lease_table: str, coordinator: str | None, metrics: str | None, expected: tuple[str, str]
) -> None:
    names = legacy_table_names(app, lease_table, coordinator_state=coordinator, worker_metrics=metrics)
    assert names == LegacyTableNames(*expected)
    if coordinator is None and metrics is None:  # doctor's guess from the coordinator-state table alone
        assert worker_metrics_beside(names.coordinator_state) == names.worker_metrics
