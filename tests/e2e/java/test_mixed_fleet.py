"""A kcl-daemon worker and the real Java MultiLangDaemon on one lease table, for each Java KCL the project
runs with (one fixture, parametrised over the version; ``scripts/install_java_kcl.sh`` installs both):

* KCL 2.5.8, both on the 2.x lease taker (kcl-daemon in 2.x-compatible mode);
* KCL 3.1.3 in 3.x mode, each side the leader in turn.

The steps both share: kcl-daemon holds all four leases; Java joins and gets its share; Java is SIGKILLed
and kcl-daemon takes its leases from Java's checkpoints; a new Java worker joins and gets its share again.
Then, with 2.5.8, kcl-daemon is SIGKILLed and Java takes everything from kcl-daemon's checkpoints. With
3.1.3, kcl-daemon stops gracefully (deleting its lock item) and Java leads and takes its leases; a new
kcl-daemon worker joins, Java's leader assigns it its share; it is restarted (no key set: it reports no
CPU, as Java here, so Java's leader balances both as one group) and holds leases again within two of the
Java leader's assignment rounds; it is SIGKILLed and Java takes its leases back. (A SIGKILLed leader is
replaced by Java only after its lock client's ~2 minutes, too long for CI; kcl-daemon replaces a dead
Java leader after the 120 s Java writes into the lock item.)

Throughout, records keep coming and none is lost, and neither side logs errors about items the other
wrote: both Java versions read every lease-table item as a lease, so kcl-daemon keeps its Migration3.0
and worker-metrics items in the two side tables of the 3.0-3.4 layout: with 2.5.8 on its defaults (it
does so by itself in the 2.x-compatible mode), with 3.1.3 with ``leaseTableLayout = KCL_3_0_TO_3_4``
(the layout 3.1.3 uses too). kinesalite + dynalite only: the Java
daemons' start-up dominates the wall time.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend
from tests.support.figures import FIGURES
from tests.support.java import FAILOVER_MS, MixedFleet, skip_unless_java

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.java]

#: the Java 3.x leader's assignment interval (leaseAssignmentIntervalMillis: 2 x failoverTimeMillis)
ROUND_S = 2 * FAILOVER_MS / 1000


def java_takes_over_from_a_killed_kcl_daemon(mixed: MixedFleet) -> float:
    """2.x: kcl-daemon is SIGKILLed; seconds until Java holds every lease."""
    mixed.py.daemons["py-a"].stop(signal.SIGKILL)
    killed = time.monotonic()
    mixed.wait(lambda: mixed.owners() == {"java-2": 4}, 90, "java-2 takes py-a's leases")
    return time.monotonic() - killed


def java_leads_and_takes_over_from_a_killed_kcl_daemon(mixed: MixedFleet) -> float:
    """3.x: kcl-daemon hands the lead to Java; a new kcl-daemon worker gets its share from Java's leader
    and is SIGKILLed; seconds until Java's leader holds every lease."""
    # kcl-daemon stops gracefully: it deletes its lock item, so Java takes the lead at its next check
    assert mixed.py.daemons["py-a"].stop(signal.SIGTERM) == 0
    mixed.wait(lambda: mixed.owners() == {"java-2": 4}, 120, "Java leads and takes py-a's leases")
    mixed.py.start("py-b")
    mixed.wait(lambda: mixed.spread() == [("java-2", 2), ("py-b", 2)], 150, "the Java leader assigns to py-b")
    mixed.wait(lambda: "py-b" in mixed.workers_seen(), 90, "py-b processes its leases")
    # py-b restarts (graceful stop, same worker id) with no key set: it sees Java report no CPU and reports
    # none either, so Java's leader balances both kinds as one group and gives it leases again
    assert mixed.py.daemons["py-b"].stop(signal.SIGTERM) == 0
    restarted = time.monotonic()
    mixed.py.start("py-b")

    def both_kinds_hold_leases() -> bool:
        spread = mixed.owners()
        return spread.get("py-b", 0) > 0 and spread.get("java-2", 0) > 0

    mixed.wait(both_kinds_hold_leases, 60, "both kinds hold leases after py-b's restart")
    back = time.monotonic() - restarted
    assert "report no CPU" in mixed.py.daemons["py-b"].text()
    FIGURES["kcl-daemon restarted under a Java 3.1.3 leader"] = (
        f"held leases again {back:.1f}s after its restart (Java assigns every {ROUND_S:g}s)"
    )
    assert back <= 2 * ROUND_S + 10.0, f"{back:.1f}s"  # two rounds, plus start-up and discovery
    mixed.py.daemons["py-b"].stop(signal.SIGKILL)
    killed = time.monotonic()
    mixed.wait(lambda: mixed.owners() == {"java-2": 4}, 150, "the Java leader takes py-b's leases")
    return time.monotonic() - killed


@dataclass(frozen=True)
class JavaKcl:
    """One Java KCL version of the mixed fleet, and what differs between the versions."""

    version: str
    major: int  # which jars (scripts/install_java_kcl.sh)
    py_extra: str  # the kcl-daemon workers' extra properties
    java_extra: str  # the Java workers' extra properties
    holds_all: str  # what the first wait is for
    java_joins: str  # what the wait for Java's share is for
    processing_limit_s: float  # until a new Java worker processes its leases
    finish: Callable[[MixedFleet], float]  # the version's own steps: seconds until Java holds all
    figure: str  # the printed figure, with {joined}, {py_took} and {java_took}


JAVA_2 = JavaKcl(
    version="2.5.8",
    major=2,
    # kcl-daemon's defaults but the 2.x-compatible mode: it keeps its items out of the lease table by itself
    py_extra="clientVersionConfig = CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X\n",
    java_extra="",
    holds_all="py-a holds 4",
    java_joins="Java steals its share",
    processing_limit_s=60,
    finish=java_takes_over_from_a_killed_kcl_daemon,
    figure=(
        "Java stole its share {joined:.0f}s after starting; a killed Java worker's leases on kcl-daemon "
        "after {py_took:.1f}s; a killed kcl-daemon worker's on Java after {java_took:.1f}s"
    ),
)
JAVA_3 = JavaKcl(
    version="3.1.3",
    major=3,
    py_extra=(
        "clientVersionConfig = CLIENT_VERSION_CONFIG_3X\n"
        "leaseAssignmentStrategy = LEASE_COUNT_BASED\n"
        "workerMetricsReporterFreqInMillis = 2000\n"
        "gracefulLeaseHandoffTimeoutMillis = 10000\n"
        # KCL 3.1.3 keeps the 3.0-3.4 layout: the first kcl-daemon creates the two side tables for it. No
        # disableWorkerMetrics: Java reports no CPU outside EC2/ECS/EKS, and kcl-daemon, seeing that,
        # reports none either, so a Java leader balances both kinds as one group
        "leaseTableLayout = KCL_3_0_TO_3_4\n"
    ),
    # Java balances on every run, so "within two assignment rounds" does not wait for its third
    java_extra="varianceBalancingFrequency = 1\n",
    holds_all="py-a leads and holds 4",
    java_joins="py-a hands 2 to Java",
    processing_limit_s=90,
    finish=java_leads_and_takes_over_from_a_killed_kcl_daemon,
    figure=(
        "Java got its share {joined:.0f}s after starting; a killed Java worker's leases were back on the "
        "kcl-daemon leader after {py_took:.1f}s; a killed kcl-daemon worker's on the Java leader after "
        "{java_took:.1f}s"
    ),
)


@pytest.fixture(params=[JAVA_2, JAVA_3], ids=lambda java: f"java-{java.version}")
def java(request: pytest.FixtureRequest) -> JavaKcl:
    java: JavaKcl = request.param
    return java


@pytest.fixture
def mixed(
    java: JavaKcl,
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
) -> Iterator[MixedFleet]:
    skip_unless_java(backend, java.major)
    fleet = MixedFleet(
        tmp_path,
        backend,
        aws_clients,
        lease_table,
        make_stream(4),
        java_version=java.major,
        py_extra=java.py_extra,
        java_extra=java.java_extra,
    )
    yield fleet
    fleet.close()


@pytest.mark.timeout(300)
def test_kcl_daemon_and_java_share_a_table(mixed: MixedFleet, java: JavaKcl) -> None:
    mixed.more()
    mixed.py.start("py-a")
    mixed.wait(lambda: mixed.owners() == {"py-a": 4}, 60, java.holds_all)
    mixed.java("java-1")
    joined = mixed.wait(lambda: mixed.spread() == [("java-1", 2), ("py-a", 2)], 150, java.java_joins)
    mixed.wait(lambda: "java-1" in mixed.workers_seen(), java.processing_limit_s, "Java processes its leases")

    mixed.javas["java-1"].stop(signal.SIGKILL)
    killed = time.monotonic()
    mixed.wait(lambda: mixed.owners() == {"py-a": 4}, 60, "py-a takes java-1's leases")
    py_took = time.monotonic() - killed

    mixed.java("java-2")
    mixed.wait(lambda: mixed.spread() == [("java-2", 2), ("py-a", 2)], 150, "2/2 again")
    mixed.wait(
        lambda: "java-2" in mixed.workers_seen(), java.processing_limit_s, "java-2 processes its leases"
    )
    java_took = java.finish(mixed)
    mixed.more()
    mixed.wait(mixed.all_delivered, 90, "every record, none lost")
    FIGURES[f"mixed fleet with Java {java.version}"] = java.figure.format(
        joined=joined, py_took=py_took, java_took=java_took
    )
    mixed.check_logs()
