"""The real Java KCL 2.5.8 daemon first, then a kcl-daemon worker joining on its defaults (only
``clientVersionConfig = CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X``, the mode the docs give for a 2.x
fleet): kcl-daemon keeps its Migration3.0 and worker metrics in the side tables by itself, so the lease
table holds only leases, Java keeps working and each takes its share. (kcl-daemon first, then Java, is the
2.5.8 case of test_mixed_fleet.py.) kinesalite + dynalite only: Java's start-up dominates the wall time."""

from __future__ import annotations

import signal
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

COMPAT = "clientVersionConfig = CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X\n"


@pytest.fixture
def mixed(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
) -> Iterator[MixedFleet]:
    skip_unless_java(backend, 2)
    fleet = MixedFleet(
        tmp_path, backend, aws_clients, lease_table, make_stream(4), java_version=2, py_extra=COMPAT
    )
    yield fleet
    fleet.close()


def non_leases(clients: AwsClients, table: str) -> list[str]:
    items = clients.dynamodb.scan(TableName=table, ConsistentRead=True)["Items"]
    return sorted(item["leaseKey"]["S"] for item in items if "leaseCounter" not in item)


@pytest.mark.timeout(240)
def test_kcl_daemon_joins_a_java_2x_worker_on_its_defaults(
    mixed: MixedFleet, aws_clients: AwsClients, lease_table: DynamoLeaseTable
) -> None:
    mixed.more()
    mixed.java("java-1")
    mixed.wait(lambda: mixed.owners() == {"java-1": 4}, 120, "java-1 holds 4")
    started = time.monotonic()
    mixed.py.start("py-a")
    mixed.wait(lambda: mixed.spread() == [("java-1", 2), ("py-a", 2)], 120, "py-a steals its share")
    joined = time.monotonic() - started
    mixed.wait(lambda: "py-a" in mixed.workers_seen(), 60, "py-a processes its leases")
    assert non_leases(aws_clients, lease_table.table_name) == []
    # Java lists the whole table every taker run (~20 s here): it must keep reading only leases
    mixed.more()
    mixed.wait(mixed.all_delivered, 90, "every record, none lost")
    assert mixed.javas["java-1"].process.poll() is None, mixed.javas["java-1"].tail()
    assert "leaseCounter is marked non-null" not in mixed.javas["java-1"].log.read_text(errors="replace")
    # and a Java 2.x worker that (re)starts now starts: the lease table still holds only leases
    mixed.javas["java-1"].stop(signal.SIGKILL)
    mixed.java("java-2")
    mixed.wait(
        lambda: mixed.spread() == [("java-2", 2), ("py-a", 2)], 150, "a restarted Java worker gets its share"
    )
    assert non_leases(aws_clients, lease_table.table_name) == []
    FIGURES["kcl-daemon (defaults, 2.x-compatible) joining a Java 2.5.8 worker"] = (
        f"held its share {joined:.0f}s after starting; the lease table held only leases"
    )
    mixed.check_logs()
