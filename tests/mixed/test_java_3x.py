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
from tests.integration.conftest import FIGURES, Backend
from tests.integration.java_daemon import H2cProxy, JavaDaemon, missing
from tests.integration.test_daemon_e2e import Fleet, data_of, owners, put

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.java]

FAILOVER_MS = 3000
PY_EXTRA = (
    "clientVersionConfig = CLIENT_VERSION_CONFIG_3X\n"
    "leaseAssignmentStrategy = LEASE_COUNT_BASED\n"
    "workerMetricsReporterFreqInMillis = 2000\n"
    "gracefulLeaseHandoffTimeoutMillis = 10000\n"
    # Java reports no CPU outside EC2/ECS/EKS; its leader balances CPU reporters and the others
    # separately, so in this fleet kcl-daemon reports none either and all balance by throughput
    "disableWorkerMetrics = true\n"
)


class PyFleet(Fleet):
    def properties(self, worker: str, executable: str) -> Path:
        path = super().properties(worker, executable)
        text = path.read_text().replace("failoverTimeMillis = 2000", f"failoverTimeMillis = {FAILOVER_MS}")
        path.write_text(text + PY_EXTRA)
        return path


@pytest.fixture
def mixed(
    tmp_path: Path, backend: Backend, lease_table: DynamoLeaseTable, make_stream: Callable[[int], str]
) -> Iterator[tuple[PyFleet, H2cProxy, list[JavaDaemon]]]:
    if backend.name == "moto":
        pytest.skip("one backend is enough: the Java daemons' start-up dominates the wall time")
    why = missing(3)
    if why is not None:
        pytest.skip(why)
    fleet = PyFleet(tmp_path, backend, lease_table.table_name, make_stream(4))
    proxy = H2cProxy(backend.kinesis_endpoint, tmp_path / "h2c.log")
    javas: list[JavaDaemon] = []
    yield fleet, proxy, javas
    for java in javas:
        java.stop(signal.SIGKILL, 10)
    fleet.close()
    proxy.stop()


@pytest.mark.timeout(300)
def test_kcl_daemon_and_java_3x_share_a_table_each_leading_in_turn(
    mixed: tuple[PyFleet, H2cProxy, list[JavaDaemon]],
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    backend: Backend,
    tmp_path: Path,
) -> None:
    fleet, proxy, javas = mixed

    def java(name: str) -> JavaDaemon:
        daemon = JavaDaemon(
            name,
            3,
            tmp_path,
            table=fleet.table,
            stream=fleet.stream,
            kinesis_endpoint=proxy.endpoint,
            dynamodb_endpoint=backend.dynamodb_endpoint,
            records=fleet.records,
            failover_ms=FAILOVER_MS,
        )
        javas.append(daemon)
        return daemon

    def logs() -> str:
        return fleet.logs() + "".join(f"\n--- {j.name} ---\n{j.tail()}" for j in javas)

    sent = 0

    def wait(check: Callable[[], bool], limit_s: float, what: str) -> float:
        """Wait for ``check`` while records keep coming (20 every second)."""
        start = last_put = time.monotonic()
        while not check():
            if time.monotonic() - start > limit_s:
                raise AssertionError(f"{what}: not within {limit_s}s\n{logs()}")
            if time.monotonic() - last_put >= 1.0:
                more(20)
                last_put = time.monotonic()
            time.sleep(0.2)
        return time.monotonic() - start

    def more(n: int = 200) -> set[str]:
        nonlocal sent
        put(aws_clients, fleet.stream, range(sent, sent + n))
        sent += n
        return {f"record-{i}" for i in range(sent)}

    expected = more()
    fleet.start("py-a")
    wait(lambda: owners(lease_table) == {"py-a": 4}, 60, "py-a leads and holds 4")
    j1 = java("java-1")
    joined = wait(lambda: sorted(owners(lease_table).items()) == [("java-1", 2), ("py-a", 2)], 150, "2/2")
    expected = more()
    wait(lambda: "java-1" in {row["worker"] for row in fleet.recorded()}, 90, "Java processes its leases")
    wait(lambda: data_of(fleet.recorded()) >= expected, 60, "records on both")

    j1.stop(signal.SIGKILL)
    killed = time.monotonic()
    wait(lambda: owners(lease_table) == {"py-a": 4}, 60, "py-a takes java-1's leases")
    py_took = time.monotonic() - killed
    expected = more()
    wait(lambda: data_of(fleet.recorded()) >= expected, 60, "records after the Java kill")

    java("java-2")
    wait(lambda: sorted(owners(lease_table).items()) == [("java-2", 2), ("py-a", 2)], 150, "2/2 again")
    expected = more()
    wait(lambda: "java-2" in {row["worker"] for row in fleet.recorded()}, 90, "java-2 processes its leases")
    # kcl-daemon stops gracefully: it deletes its lock item, so Java takes the lead at its next check
    assert fleet.daemons["py-a"].stop(signal.SIGTERM) == 0
    wait(lambda: owners(lease_table) == {"java-2": 4}, 120, "Java leads and takes py-a's leases")
    fleet.start("py-b")
    wait(
        lambda: sorted(owners(lease_table).items()) == [("java-2", 2), ("py-b", 2)],
        150,
        "Java assigns to py-b",
    )
    expected = more()
    wait(lambda: "py-b" in {row["worker"] for row in fleet.recorded()}, 90, "py-b processes its leases")
    fleet.daemons["py-b"].stop(signal.SIGKILL)
    killed = time.monotonic()
    wait(lambda: owners(lease_table) == {"java-2": 4}, 150, "the Java leader takes py-b's leases")
    java_took = time.monotonic() - killed
    expected = more()
    wait(
        lambda: data_of(fleet.recorded()) >= {f"record-{i}" for i in range(sent)},
        90,
        "every record, none lost",
    )
    FIGURES["mixed fleet with Java 3.1.3"] = (
        f"Java got its share {joined:.0f}s after starting; a killed Java worker's leases were back on the "
        f"kcl-daemon leader after {py_took:.1f}s; a killed kcl-daemon worker's on the Java leader after "
        f"{java_took:.1f}s"
    )
    for daemon in javas:
        assert daemon.errors() == [], daemon.tail()
    for name in ("py-a", "py-b"):
        text = fleet.daemons[name].log.read_text()
        assert "skipping" not in text and " ERROR " not in text, text[-3000:]
