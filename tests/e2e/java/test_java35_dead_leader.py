"""A SIGKILLed Java 3.5.1 leader's shards resume on kcl-daemon within seconds (issue 28 point 6).

One kcl-daemon worker and the real Java 3.5.1 MultiLangDaemon, both on the defaults (failover 10 s), on
a new application (one table: Java 3.5 keeps its lock, ``Migration3.0`` and worker metrics in the lease
table). Java starts first, leads and holds every lease; kcl-daemon joins as a follower; records
flow. Then Java is SIGKILLed: its lock item (120 s, heartbeated every 30 s) stays, and before kcl-daemon
had a fallback its shards stood still until that lock expired (115.7 s in the issue). Now the
kcl-daemon follower takes them once they have stood still past failover + grace: this test measures
until kcl-daemon holds every lease and every one of the killed leader's shards delivers records again,
and asserts it well below the lock's two minutes. Nothing is lost; duplicates are counted.
kinesalite + dynalite only: the Java daemon's start-up dominates the wall time.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend
from tests.support.figures import FIGURES
from tests.support.java import MixedFleet, skip_unless_java

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.java]

#: the default failoverTimeMillis, on both sides
FAILOVER_MS = 10000


@pytest.fixture
def mixed(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
) -> Iterator[MixedFleet]:
    skip_unless_java(backend, 35)
    fleet = MixedFleet(
        tmp_path,
        backend,
        aws_clients,
        lease_table,
        make_stream(4),
        java_version=35,
        py_extra="",
        failover_ms=FAILOVER_MS,
    )
    yield fleet
    fleet.close()


@pytest.mark.timeout(420)
def test_a_sigkilled_java_35_leaders_shards_resume_on_kcl_daemon_within_failover_and_a_few_seconds(
    mixed: MixedFleet, aws_clients: AwsClients, lease_table: DynamoLeaseTable
) -> None:
    mixed.more()
    mixed.java("java-1")
    mixed.wait(lambda: mixed.owners() == {"java-1": 4}, 120, "Java leads and holds the four leases")
    mixed.wait(lambda: "java-1" in mixed.workers_seen(), 60, "Java processes its leases")
    table = lease_table.table_name
    mixed.py.start("py-a")

    def item(key: str) -> dict[str, Any] | None:
        found = aws_clients.dynamodb.get_item(
            TableName=table, Key={"leaseKey": {"S": key}}, ConsistentRead=True
        )
        return found.get("Item")

    # py-a has joined once its worker-metrics item is in the table; it then watches as a follower. On the
    # defaults Java 3.5.1's variance decider balances every third round (a minute), so py-a may hold
    # nothing yet, or a lease Java has begun to hand off to it: what Java serves at the kill is its share.
    mixed.wait(lambda: item("py-a") is not None, 60, "py-a publishes its worker metrics")
    mixed.wait(
        lambda: "worker py-a runs the 3.x leader" in mixed.py.daemons["py-a"].text(), 30, "py-a runs 3.x"
    )
    time.sleep(FAILOVER_MS / 1000)  # a failover of records flowing with both up
    lock = item("Leader")
    assert lock is not None and lock["ownerName"]["S"] == "java-1" and lock["leaseDuration"]["S"] == "120000"
    java_shards = {
        lease.lease_key
        for lease in lease_table.list_leases(consistent=True).leases
        if "java-1" in (lease.lease_owner, lease.checkpoint_owner)  # a hand-off: Java serves it until done
    }

    mixed.javas["java-1"].stop(signal.SIGKILL)
    killed, killed_wall = time.monotonic(), time.time()

    def py_holds_all() -> bool:  # a hand-off Java began to py-a counts once py-a holds it for itself
        leases = lease_table.list_leases(consistent=True).leases
        return len(leases) == 4 and all(
            x.lease_owner == "py-a" and x.checkpoint_owner is None for x in leases
        )

    mixed.wait(py_holds_all, 150, "py-a takes the killed leader's leases")
    took = time.monotonic() - killed

    def resumed_on(shard: str) -> float | None:
        after = [
            r["t"]
            for r in mixed.py.recorded()
            if r["shard"] == shard and r["worker"] == "py-a" and r["t"] > killed_wall
        ]
        return min(after) - killed_wall if after else None

    mixed.wait(
        lambda: all(resumed_on(s) is not None for s in java_shards),
        60,
        "the killed leader's shards deliver again",
    )
    resumed = max(t for s in java_shards if (t := resumed_on(s)) is not None)
    mixed.more()
    mixed.wait(mixed.all_delivered, 90, "every record, none lost")
    lock = item("Leader")
    counts = Counter(r["data"] for r in mixed.py.recorded())
    duplicates = sum(n - 1 for n in counts.values())
    FIGURES["SIGKILLed Java 3.5.1 leader, kcl-daemon follower (defaults, failover 10 s)"] = (
        f"kcl-daemon held every lease {took:.1f}s after the kill, the killed leader's shards delivered "
        f"again by {resumed:.1f}s (goal failover + 3 s; 115.7 s before); lost 0, {duplicates} duplicates"
    )
    # the goal is failover + 3 s; asserted generously (a watch interval, the children's start, CI load)
    assert took <= FAILOVER_MS / 1000 + 10, f"{took:.1f}s"
    assert resumed <= FAILOVER_MS / 1000 + 15, f"{resumed:.1f}s"
    assert (
        lock is not None and lock["ownerName"]["S"] == "java-1"
    )  # the dead leader's lock stands: one leader at most
    assert "took the leader lock" not in mixed.py.daemons["py-a"].text()
    assert "taken (fallback)" in mixed.py.daemons["py-a"].text()
    mixed.check_logs()
