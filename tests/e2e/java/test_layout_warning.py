"""The real Java KCL 3.1.3 daemon joining an application kcl-daemon started on its defaults (the
single-table layout): the two layouts cannot share the table, and the running kcl-daemon worker says so in
a WARNING naming the Java worker, both layouts and ``leaseTableLayout``, within its layout check (every
minute). Four shards, as in the reported case: dynalite then scans a lease first, so Java 3.1.3 gets past
its start-up check of the lease table (with two, the first item it scans is kcl-daemon's worker-metrics
item and it stops at once, having written nothing anyone could see). kinesalite + dynalite only: Java's
start-up dominates the wall time."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend
from tests.support.figures import FIGURES
from tests.support.java import MixedFleet, skip_unless_java

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.java]


@pytest.fixture
def mixed(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
) -> Iterator[MixedFleet]:
    skip_unless_java(backend, 3)
    fleet = MixedFleet(
        tmp_path, backend, aws_clients, lease_table, make_stream(4), java_version=3, py_extra=""
    )
    yield fleet
    fleet.close()


def warning_about(text: str, worker: str) -> str | None:
    for line in text.splitlines():
        if "WARNING" in line and f"worker {worker} runs" in line:
            return line
    return None


@pytest.mark.timeout(240)
def test_a_3_0_to_3_4_worker_joining_a_single_table_is_named(mixed: MixedFleet) -> None:
    mixed.more(20)
    py = mixed.py.start("py-a")
    mixed.wait(lambda: mixed.owners() == {"py-a": 4}, 60, "py-a holds 4")
    started = time.monotonic()
    mixed.java("java-1")
    mixed.wait(lambda: warning_about(py.text(), "java-1") is not None, 150, "py-a names java-1")
    took = time.monotonic() - started
    line = warning_about(py.text(), "java-1")
    assert line is not None
    for words in (
        "KCL 3.0-3.4 layout",
        "single-table layout",
        "leaseTableLayout",
        f"{mixed.py.table}-WorkerMetricStats",
    ):
        assert words in line, line
    assert mixed.owners() == {"py-a": 4}  # the Java worker got nothing, and kcl-daemon kept its leases
    FIGURES["a Java 3.1.3 worker joining a single-table kcl-daemon application"] = (
        f"named in kcl-daemon's WARNING {took:.0f}s after Java started (layout check every 60 s)"
    )
