"""Helpers of the KCL 3.5 layout tests: a daemon fleet with short timings and extra keys, and the legacy
table names of a lease table."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kcl_daemon.core.leader import table_names
from tests.support.emulators import Backend
from tests.support.fleet import Fleet


class LayoutFleet(Fleet):
    """kcl-daemon processes with a 1 s failover (so a dead lock is taken over in a second); ``extra``
    properties are appended to each worker's file."""

    def __init__(self, tmp_path: Path, backend: Backend, table: str, stream: str, *, extra: str = "") -> None:
        super().__init__(tmp_path, backend, table, stream, failover_ms=1000, extra=extra)


def legacy_table_names(lease_table: str) -> tuple[str, str]:
    return table_names.legacy_table_names(None, lease_table)


@contextlib.contextmanager
def legacy_tables(client: Any, lease_table: str) -> Iterator[tuple[str, str]]:
    """The coordinator-state and worker-metrics table names of ``lease_table``; both deleted afterwards."""
    names = legacy_table_names(lease_table)
    try:
        yield names
    finally:
        for name in names:
            with contextlib.suppress(Exception):  # never created, or already deleted
                client.delete_table(TableName=name)
