"""The names of the KCL 3.0-3.4 layout's side tables, built in one place (contract §9.1, §9.2).

Pure. KCL 3.0-3.4 keep the leader lock and the migration state in ``<app>-CoordinatorState`` and the
workers' metrics in ``<app>-WorkerMetricStats``, ``<app>`` being ``applicationName`` (else the lease
table's name); ``coordinatorStateTableName`` and ``workerMetricsTableName`` name them otherwise. The
worker, doctor, the checkpoint tool, the table commands, the benchmarks and the tests all take the names
from :func:`legacy_table_names`.
"""

from __future__ import annotations

from typing import Final, NamedTuple

COORDINATOR_STATE_SUFFIX: Final = "-CoordinatorState"
WORKER_METRICS_SUFFIX: Final = "-WorkerMetricStats"


class LegacyTableNames(NamedTuple):
    """The coordinator-state and worker-metrics tables of one application."""

    coordinator_state: str
    worker_metrics: str


def legacy_table_names(
    application_name: str | None,
    lease_table: str,
    *,
    coordinator_state: str | None = None,
    worker_metrics: str | None = None,
) -> LegacyTableNames:
    """The side tables of the application (``application_name``, else ``lease_table``), unless configured
    (``coordinator_state``, ``worker_metrics``)."""
    app = application_name or lease_table
    return LegacyTableNames(
        coordinator_state or f"{app}{COORDINATOR_STATE_SUFFIX}",
        worker_metrics or f"{app}{WORKER_METRICS_SUFFIX}",
    )


def worker_metrics_beside(coordinator_state: str) -> str:
    """The worker-metrics table that goes with a coordinator-state table of the default shape (doctor's
    guess when only the coordinator-state table is known)."""
    return coordinator_state.replace(COORDINATOR_STATE_SUFFIX, WORKER_METRICS_SUFFIX)
