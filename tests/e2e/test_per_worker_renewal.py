"""``leaseRenewal = PER_WORKER`` as users run it: kcl-daemon processes on both emulators, renewing one
heartbeat each instead of every lease; a SIGKILLed worker's leases are taken once its heartbeat stands
still, and a worker with the key off joining puts the fleet back on per-lease renewals, nothing lost.

The daemons run the 2.x taker (``clientVersionConfig = ..._COMPATIBLE_WITH_2X_PHASE1``), which the mode
needs (the 3.x leader's expiry reads lease counters only)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.core.leases.heartbeat import worker_item_from
from tests.support.emulators import Backend
from tests.support.figures import FIGURES
from tests.support.fleet import FAILOVER_S, TAKE_EVERY_S, Fleet, owners
from tests.support.recorder import data_of
from tests.support.streams import put

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

TWO_X = "clientVersionConfig = CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1\n"
PER_WORKER = "leaseRenewal = PER_WORKER\n"
FALLS_BACK = "falls back to per-lease renewals"


class RenewalFleet(Fleet):
    """Every daemon on the 2.x taker; ``per_worker`` names those with the key on."""

    per_worker: set[str]

    def properties(self, worker: str, executable: str) -> Path:
        path = super().properties(worker, executable)
        key = PER_WORKER if worker in self.per_worker else ""
        path.write_text(path.read_text() + TWO_X + key)
        return path


@pytest.fixture
def fleet(
    tmp_path: Path, backend: Backend, lease_table: DynamoLeaseTable, make_stream: Callable[[int], str]
) -> Iterator[RenewalFleet]:
    fleet = RenewalFleet(tmp_path, backend, lease_table.table_name, make_stream(4))
    fleet.per_worker = {"daemon-a", "daemon-b"}
    yield fleet
    fleet.close()


def _counters(table: DynamoLeaseTable) -> dict[str, int]:
    return {lease.lease_key: lease.lease_counter for lease in table.list_leases(consistent=True).leases}


def _beats(table: DynamoLeaseTable) -> dict[str, int]:
    """The heartbeats in the worker-metrics table (``<app>-WorkerMetricStats``)."""
    items = map(worker_item_from, table.heartbeat_items())
    return {item.worker_id: item.beat for item in items if item.beat is not None}


def test_heartbeats_keep_the_leases_a_sigkilled_workers_are_taken_and_a_key_off_worker_ends_the_mode(
    fleet: RenewalFleet, aws_clients: AwsClients, lease_table: DynamoLeaseTable, backend: Backend
) -> None:
    """One fleet through the three cases (one start-up instead of three: the suite's time is tight)."""
    put(aws_clients, fleet.stream, range(400))
    a = fleet.start("daemon-a")
    b = fleet.start("daemon-b")
    fleet.wait(lambda: sorted(owners(lease_table).values()) == [2, 2], 60, "2/2 balance")
    fleet.wait(lambda: data_of(fleet.recorded()) >= {f"record-{n}" for n in range(400)}, 60, "400 records")
    time.sleep(1.0)  # the last checkpoints land
    counters, beats = _counters(lease_table), _beats(lease_table)
    time.sleep(FAILOVER_S)  # three renewal periods
    assert _counters(lease_table) == counters, "no lease write while idle"
    later = _beats(lease_table)
    assert all(later[w] > beats.get(w, 0) for w in ("daemon-a", "daemon-b")), (beats, later)

    # a SIGKILLed worker: its leases are taken once its heartbeat has stood still for the failover
    a.stop(signal.SIGKILL)
    killed_at = time.monotonic()
    fleet.wait(lambda: owners(lease_table) == {"daemon-b": 4}, 30, "daemon-b takes the dead daemon's leases")
    took = time.monotonic() - killed_at
    put(aws_clients, fleet.stream, range(400, 800))
    fleet.wait(lambda: data_of(fleet.recorded()) >= {f"record-{n}" for n in range(800)}, 60, "800 records")
    FIGURES[f"PER_WORKER SIGKILL takeover on {backend.name}"] = (
        f"{took:.1f}s after the kill (goal: failover + 3 s = {FAILOVER_S + 3:.1f}s)"
    )
    assert took <= FAILOVER_S + 3.0 + 5.0, f"takeover took {took:.1f}s"  # slack for a loaded machine
    assert FALLS_BACK not in b.log.read_text()  # a dead worker is no foreign sign

    # a worker with the key off: its first lease is the sign, and the fleet renews per lease again
    fleet.start("daemon-c")
    joined_at = time.monotonic()
    fleet.wait(lambda: FALLS_BACK in b.log.read_text(), 60, "the fleet falls back")
    fell = time.monotonic() - joined_at
    fleet.wait(lambda: "daemon-b" not in _beats(lease_table), 30, "daemon-b withdraws its heartbeat item")
    put(aws_clients, fleet.stream, range(800, 1200))
    fleet.wait(lambda: data_of(fleet.recorded()) >= {f"record-{n}" for n in range(1200)}, 60, "1200 records")
    fleet.wait(lambda: sorted(owners(lease_table).values()) == [2, 2], 60, "2/2 with daemon-c")
    FIGURES[f"PER_WORKER fall-back on {backend.name}"] = (
        f"{fell:.1f}s after a key-off worker started (failover {FAILOVER_S:.0f}s; its first take is the "
        "sign, seen at daemon-b's next full run)"
    )
    # its first take is seen at the next lease scan of daemon-b: a full run (2 x (L + ε)) at the latest
    assert fell <= TAKE_EVERY_S + START_SLACK_S, f"the fleet fell back after {fell:.1f}s"
    counters = _counters(lease_table)
    time.sleep(FAILOVER_S)
    moved = _counters(lease_table)
    assert all(moved[key] > counters[key] for key in counters), "every lease renewed per lease again"


#: a daemon's start (Python, its first scan) on a loaded machine, beside the failover
START_SLACK_S = 10.0
