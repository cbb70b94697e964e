"""``leaseRenewal = PER_WORKER`` in the KCL 3.x lease mode (the default), as users run it: kcl-daemon
processes on both emulators, a leader assigning the leases and every worker (the leader too) renewing one
heartbeat instead of every lease it holds. The lease counters stand still while the heartbeats advance;
a SIGKILLed follower's leases are reassigned once its heartbeat has stood still for the failover time,
nothing lost; a worker with the key off joining puts the fleet back on per-lease renewals.

The 2.x taker's case is ``test_per_worker_renewal.py``; Java's, ``java/test_java313_per_worker.py``."""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from botocore.exceptions import ClientError  # noqa: TID251 - the table may not exist

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.core.leases.heartbeat import worker_item_from
from tests.support.daemon import run_cli
from tests.support.emulators import Backend
from tests.support.figures import FIGURES
from tests.support.fleet import FAILOVER_S, Fleet, owners
from tests.support.recorder import data_of
from tests.support.streams import put

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

PER_WORKER = "leaseRenewal = PER_WORKER\n"
FALLS_BACK = "falls back to per-lease renewals"
#: a daemon's start (Python, its first scans) on a loaded machine, beside the failover
START_SLACK_S = 10.0


class RenewalFleet(Fleet):
    """Every daemon in the 3.x lease mode (the default); ``per_worker`` names those with the key on."""

    per_worker: set[str]

    def properties(self, worker: str, executable: str) -> Path:
        path = super().properties(worker, executable)
        if worker in self.per_worker:
            path.write_text(path.read_text() + PER_WORKER)
        return path


@pytest.fixture
def fleet(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
) -> Iterator[RenewalFleet]:
    fleet = RenewalFleet(tmp_path, backend, lease_table.table_name, make_stream(4))
    fleet.per_worker = {"daemon-a", "daemon-b"}
    yield fleet
    fleet.close()
    for suffix in ("-CoordinatorState", "-WorkerMetricStats"):
        with contextlib.suppress(ClientError):
            aws_clients.dynamodb.delete_table(TableName=lease_table.table_name + suffix)


def _counters(table: DynamoLeaseTable) -> dict[str, int]:
    return {lease.lease_key: lease.lease_counter for lease in table.list_leases(consistent=True).leases}


def _beats(table: DynamoLeaseTable) -> dict[str, int]:
    """The heartbeats in the worker-metrics table (``<app>-WorkerMetricStats``)."""
    items = map(worker_item_from, table.heartbeat_items())
    return {item.worker_id: item.beat for item in items if item.beat is not None}


def _leader(fleet: RenewalFleet) -> str | None:
    for name, daemon in fleet.daemons.items():
        if daemon.log.exists() and f"worker {name} is now leader" in daemon.log.read_text():
            return name
    return None


def test_3x_heartbeats_keep_the_leases_a_sigkilled_followers_are_reassigned_and_a_key_off_worker_ends_it(
    fleet: RenewalFleet, aws_clients: AwsClients, lease_table: DynamoLeaseTable, backend: Backend
) -> None:
    """One fleet through the three cases (one start-up instead of three: the suite's time is tight)."""
    put(aws_clients, fleet.stream, range(400))
    fleet.start("daemon-a")
    fleet.start("daemon-b")
    fleet.wait(lambda: sorted(owners(lease_table).values()) == [2, 2], 60, "2/2 balance")
    fleet.wait(lambda: data_of(fleet.recorded()) >= {f"record-{n}" for n in range(400)}, 60, "400 records")
    fleet.wait(lambda: _leader(fleet) is not None, 30, "a leader")

    def idle_window() -> bool:
        """A failover (three renewal periods) without a lease write while both heartbeats advance;
        renewing per lease, no such window ever comes. (The last checkpoints and a hand-off still
        completing on a loaded machine end a window early: the next one is tried.)"""
        counters, beats = _counters(lease_table), _beats(lease_table)
        time.sleep(FAILOVER_S)
        later = _beats(lease_table)
        moving = all(later.get(w, 0) > beats.get(w, 0) for w in ("daemon-a", "daemon-b"))
        return moving and _counters(lease_table) == counters

    fleet.wait(idle_window, 60, "the counters stand still for a failover while the heartbeats advance")
    # the inspection tools read the heartbeats: leases kept by them are not expired
    properties = fleet.tmp_path / "daemon-a.properties"
    listed = run_cli("leases", "--check-expiry", "--json", properties=properties)
    assert json.loads(listed.stdout)["expired"] == [], listed.stdout + listed.stderr
    doctor = run_cli("doctor", "--json", "--wait", str(FAILOVER_S), properties=properties)
    checks = {check["name"]: check for check in json.loads(doctor.stdout)["checks"]}
    assert not [f for f in checks["leases"]["findings"] if "expired" in f["message"]], checks["leases"]

    # a SIGKILLed follower: the leader reassigns its leases once its heartbeat has stood still
    leader = _leader(fleet)
    assert leader is not None
    follower = "daemon-b" if leader == "daemon-a" else "daemon-a"
    fleet.daemons[follower].stop(signal.SIGKILL)
    killed_at = time.monotonic()
    fleet.wait(lambda: owners(lease_table) == {leader: 4}, 30, f"{leader} takes the dead follower's leases")
    took = time.monotonic() - killed_at
    put(aws_clients, fleet.stream, range(400, 800))
    fleet.wait(lambda: data_of(fleet.recorded()) >= {f"record-{n}" for n in range(800)}, 60, "800 records")
    FIGURES[f"PER_WORKER 3.x SIGKILL takeover on {backend.name}"] = (
        f"{took:.1f}s after the kill (goal: failover + 3 s = {FAILOVER_S + 3:.1f}s)"
    )
    assert took <= FAILOVER_S + 3.0 + 5.0, f"takeover took {took:.1f}s"  # slack for a loaded machine
    survivor = fleet.daemons[leader]
    assert FALLS_BACK not in survivor.log.read_text()  # a dead worker is no foreign sign

    # a worker with the key off: its metrics item without a heartbeat, then its first lease, is the sign
    fleet.start("daemon-c")
    joined_at = time.monotonic()
    fleet.wait(lambda: FALLS_BACK in survivor.log.read_text(), 60, "the fleet falls back")
    fell = time.monotonic() - joined_at
    fleet.wait(lambda: leader not in _beats(lease_table), 30, f"{leader} withdraws its heartbeat")
    put(aws_clients, fleet.stream, range(800, 1200))
    fleet.wait(lambda: data_of(fleet.recorded()) >= {f"record-{n}" for n in range(1200)}, 60, "1200 records")
    fleet.wait(lambda: sorted(owners(lease_table).values()) == [2, 2], 60, "2/2 with daemon-c")
    FIGURES[f"PER_WORKER 3.x fall-back on {backend.name}"] = (
        f"{fell:.1f}s after a key-off worker started (failover {FAILOVER_S:.0f}s)"
    )
    assert fell <= FAILOVER_S + START_SLACK_S, f"the fleet fell back after {fell:.1f}s"
    counters = _counters(lease_table)
    time.sleep(FAILOVER_S)
    moved = _counters(lease_table)
    assert all(moved[key] > counters[key] for key in counters), "every lease renewed per lease again"
