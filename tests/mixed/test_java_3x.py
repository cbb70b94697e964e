"""A kcl-daemon worker and the real Java KCL 3.1.3 MultiLangDaemon share one table in 3.x mode.

One run, each side the leader in turn: kcl-daemon leads and hands two leases to Java (its processor
checkpoints first); Java is SIGKILLed and kcl-daemon takes its leases back from Java's checkpoints; a new
Java worker joins and gets its share; kcl-daemon stops gracefully (deleting its lock item) and Java leads;
a new kcl-daemon worker joins, Java's leader assigns it its share, it is SIGKILLed and Java takes its
leases back. (A SIGKILLed leader is replaced by Java only after its lock client's ~2 minutes, too
long for CI; kcl-daemon replaces a dead Java leader after the 120 s Java writes into the lock item.)
Throughout, records keep coming and none is lost, and neither side logs errors about items the other
wrote. kinesalite + dynalite only (the Java daemon's start-up dominates the wall time).
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

PY_EXTRA = (
    "clientVersionConfig = CLIENT_VERSION_CONFIG_3X\n"
    "leaseAssignmentStrategy = LEASE_COUNT_BASED\n"
    "workerMetricsReporterFreqInMillis = 2000\n"
    "gracefulLeaseHandoffTimeoutMillis = 10000\n"
    # Java reports no CPU outside EC2/ECS/EKS; its leader balances CPU reporters and the others
    # separately, so in this fleet kcl-daemon reports none either and all balance by throughput
    "disableWorkerMetrics = true\n"
)


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
    why = unavailable(3)
    if why is not None:
        pytest.skip(why)
    fleet = MixedFleet(
        tmp_path, backend, aws_clients, lease_table, make_stream(4), java_version=3, py_extra=PY_EXTRA
    )
    yield fleet
    fleet.close()


@pytest.mark.timeout(300)
def test_kcl_daemon_and_java_3x_share_a_table_each_leading_in_turn(mixed: MixedFleet) -> None:
    mixed.more()
    mixed.py.start("py-a")
    mixed.wait(lambda: mixed.owners() == {"py-a": 4}, 60, "py-a leads and holds 4")
    mixed.java("java-1")
    joined = mixed.wait(lambda: mixed.spread() == [("java-1", 2), ("py-a", 2)], 150, "py-a hands 2 to Java")
    mixed.wait(lambda: "java-1" in mixed.workers_seen(), 90, "Java processes its leases")

    mixed.javas["java-1"].stop(signal.SIGKILL)
    killed = time.monotonic()
    mixed.wait(lambda: mixed.owners() == {"py-a": 4}, 60, "py-a takes java-1's leases")
    py_took = time.monotonic() - killed

    mixed.java("java-2")
    mixed.wait(lambda: mixed.spread() == [("java-2", 2), ("py-a", 2)], 150, "2/2 again")
    mixed.wait(lambda: "java-2" in mixed.workers_seen(), 90, "java-2 processes its leases")
    # kcl-daemon stops gracefully: it deletes its lock item, so Java takes the lead at its next check
    assert mixed.py.daemons["py-a"].stop(signal.SIGTERM) == 0
    mixed.wait(lambda: mixed.owners() == {"java-2": 4}, 120, "Java leads and takes py-a's leases")
    mixed.py.start("py-b")
    mixed.wait(lambda: mixed.spread() == [("java-2", 2), ("py-b", 2)], 150, "the Java leader assigns to py-b")
    mixed.wait(lambda: "py-b" in mixed.workers_seen(), 90, "py-b processes its leases")
    mixed.py.daemons["py-b"].stop(signal.SIGKILL)
    killed = time.monotonic()
    mixed.wait(lambda: mixed.owners() == {"java-2": 4}, 150, "the Java leader takes py-b's leases")
    java_took = time.monotonic() - killed
    mixed.more()
    mixed.wait(mixed.all_delivered, 90, "every record, none lost")
    FIGURES["mixed fleet with Java 3.1.3"] = (
        f"Java got its share {joined:.0f}s after starting; a killed Java worker's leases were back on the "
        f"kcl-daemon leader after {py_took:.1f}s; a killed kcl-daemon worker's on the Java leader after "
        f"{java_took:.1f}s"
    )
    mixed.check_logs()
