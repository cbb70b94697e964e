"""A kcl-daemon worker in 2.x-compatible mode and the real Java KCL 2.5.8 MultiLangDaemon on one table.

Both run the 2.x lease taker: kcl-daemon holds all four leases, Java joins and steals its share; Java is
SIGKILLed and kcl-daemon takes its leases from Java's checkpoints; a new Java worker joins, kcl-daemon is
SIGKILLed and Java takes everything from kcl-daemon's checkpoints. Records keep coming; none is lost, and
neither side logs errors about the other's items (kcl-daemon's Migration3.0 and worker-metrics items live
in tables KCL 2.x never reads). kinesalite + dynalite only.
"""

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
from tests.support.java import MixedFleet, unavailable

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.java]

PY_EXTRA = "clientVersionConfig = CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X\n"


@pytest.fixture
def mixed(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
) -> Iterator[MixedFleet]:
    if backend.name == "moto":
        pytest.skip("one backend is enough: the Java daemons' start-up dominates the wall time")
    why = unavailable(2)
    if why is not None:
        pytest.skip(why)
    fleet = MixedFleet(
        tmp_path, backend, aws_clients, lease_table, make_stream(4), java_version=2, py_extra=PY_EXTRA
    )
    yield fleet
    fleet.close()


@pytest.mark.timeout(300)
def test_kcl_daemon_and_java_2x_share_a_table_with_the_2x_taker(mixed: MixedFleet) -> None:
    mixed.more()
    mixed.py.start("py-a")
    mixed.wait(lambda: mixed.owners() == {"py-a": 4}, 60, "py-a holds 4")
    mixed.java("java-1")
    joined = mixed.wait(lambda: mixed.spread() == [("java-1", 2), ("py-a", 2)], 150, "Java steals its share")
    mixed.wait(lambda: "java-1" in mixed.workers_seen(), 60, "Java processes its leases")

    mixed.javas["java-1"].stop(signal.SIGKILL)
    killed = time.monotonic()
    mixed.wait(lambda: mixed.owners() == {"py-a": 4}, 60, "py-a takes java-1's leases")
    py_took = time.monotonic() - killed

    mixed.java("java-2")
    mixed.wait(lambda: mixed.spread() == [("java-2", 2), ("py-a", 2)], 150, "2/2 again")
    mixed.wait(lambda: "java-2" in mixed.workers_seen(), 60, "java-2 processes its leases")
    mixed.py.daemons["py-a"].stop(signal.SIGKILL)
    killed = time.monotonic()
    mixed.wait(lambda: mixed.owners() == {"java-2": 4}, 90, "java-2 takes py-a's leases")
    java_took = time.monotonic() - killed
    mixed.more()
    mixed.wait(mixed.all_delivered, 90, "every record, none lost")
    FIGURES["mixed fleet with Java 2.5.8"] = (
        f"Java stole its share {joined:.0f}s after starting; a killed Java worker's leases on kcl-daemon "
        f"after {py_took:.1f}s; a killed kcl-daemon worker's on Java after {java_took:.1f}s"
    )
    mixed.check_logs()
