"""Helpers of the KCL 3.5 layout tests: a daemon fleet with short timings and extra keys, and the legacy
table names of a lease table."""

from __future__ import annotations

from pathlib import Path

from tests.support.emulators import Backend
from tests.support.fleet import Fleet


class LayoutFleet(Fleet):
    """kcl-daemon processes with a 1 s failover (so a dead lock is taken over in a second); ``extra``
    properties are appended to each worker's file."""

    def __init__(self, tmp_path: Path, backend: Backend, table: str, stream: str, *, extra: str = "") -> None:
        super().__init__(tmp_path, backend, table, stream, failover_ms=1000, extra=extra)


def legacy_table_names(lease_table: str) -> tuple[str, str]:
    return f"{lease_table}-CoordinatorState", f"{lease_table}-WorkerMetricStats"
