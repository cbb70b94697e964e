"""Helpers of the KCL 3.5 layout tests: a daemon fleet with short timings and extra keys, and the legacy
table names of a lease table."""

from __future__ import annotations

from pathlib import Path

from tests.integration.test_daemon_e2e import Fleet


class LayoutFleet(Fleet):
    """kcl-daemon processes with a 1 s failover (so a dead lock is taken over in a second) and ``extra``
    properties appended to each worker's file."""

    extra = ""

    def properties(self, worker: str, executable: str) -> Path:
        path = super().properties(worker, executable)
        text = path.read_text().replace("failoverTimeMillis = 2000", "failoverTimeMillis = 1000")
        path.write_text(text + self.extra)
        return path


def legacy_table_names(lease_table: str) -> tuple[str, str]:
    return f"{lease_table}-CoordinatorState", f"{lease_table}-WorkerMetricStats"
