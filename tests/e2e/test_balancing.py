"""Deploy-aware assignment end to end: a rolling restart with a restart grace moves no lease.

Three daemons (real processes, the recording processor) in two zones (``workerZone``: az1, az1, az2)
share six shards under the cooperative assignor (``leaseAssignmentStrategy = COOPERATIVE``) with
``restartGraceMillis``. Once they hold 2/2/2, each daemon in turn is stopped with SIGTERM (it checkpoints,
publishes RESTARTING with its grace and keeps its leases) and started again with the same workerId,
while records keep flowing. A poller watches every lease's owner throughout: no lease may change owner,
and no record may be processed twice. Each daemon's metrics item carries its zone. About 40 s per
emulator.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from botocore.exceptions import ClientError  # noqa: TID251 - the table may not exist yet

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.aws.worker_metrics_table import WorkerMetricsTable
from tests.support.emulators import Backend
from tests.support.figures import FIGURES
from tests.support.fleet import Fleet, OwnerWatch, owners
from tests.support.recorder import data_of
from tests.support.streams import put

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

ZONES = {"daemon-a": "az1", "daemon-b": "az1", "daemon-c": "az2"}
GRACE_MS = 30_000


class ZonedFleet(Fleet):
    def properties(self, worker: str, executable: str) -> Path:
        path = super().properties(worker, executable)
        text = path.read_text().replace("leaseAssignmentStrategy = LEASE_COUNT_BASED\n", "")
        path.write_text(
            text + "leaseAssignmentStrategy = COOPERATIVE\n"
            f"workerZone = {ZONES[worker]}\n"
            f"restartGraceMillis = {GRACE_MS}\n"
            # no CPU figures: placement by counts only, whatever the load of the test machine
            "disableWorkerMetrics = true\n"
            "gracefulLeaseHandoffTimeoutMillis = 10000\n"
        )
        return path


@pytest.fixture
def fleet(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
) -> Iterator[ZonedFleet]:
    fleet = ZonedFleet(tmp_path, backend, lease_table.table_name, make_stream(6))
    yield fleet
    fleet.close()
    for suffix in ("-CoordinatorState", "-WorkerMetricStats"):
        with contextlib.suppress(ClientError):
            aws_clients.dynamodb.delete_table(TableName=lease_table.table_name + suffix)


def test_rolling_restart_with_grace_moves_no_lease_and_duplicates_nothing(
    fleet: ZonedFleet, aws_clients: AwsClients, lease_table: DynamoLeaseTable, backend: Backend
) -> None:
    put(aws_clients, fleet.stream, range(300))
    for worker in ZONES:
        fleet.start(worker)
    settled = {"daemon-a": 2, "daemon-b": 2, "daemon-c": 2}
    fleet.wait(lambda: owners(lease_table) == settled, 90, "2/2/2")
    fleet.wait(
        lambda: all(
            lease.checkpoint_owner is None for lease in lease_table.list_leases(consistent=True).leases
        ),
        30,
        "hand-offs done",
    )
    fleet.wait(lambda: data_of(fleet.recorded()) >= {f"record-{n}" for n in range(300)}, 60, "300 records")
    items = WorkerMetricsTable(aws_clients.dynamodb, fleet.table, in_lease_table=True).scan()[0]
    assert {item.worker_id: (item.extra or {}).get("zone") for item in items} == ZONES

    stop = threading.Event()
    sent: list[int] = []

    def produce() -> None:
        n = 300
        while not stop.is_set():
            put(aws_clients, fleet.stream, range(n, n + 12))
            sent.extend(range(n, n + 12))
            n += 12
            time.sleep(0.2)

    producer = threading.Thread(target=produce, daemon=True)
    started = time.monotonic()
    with OwnerWatch(lease_table) as watch:
        producer.start()
        try:
            for worker in ZONES:
                daemon = fleet.daemons[worker]
                assert daemon.stop(signal.SIGTERM) == 0
                assert "its leases wait for it" in daemon.log.read_text(errors="replace"), daemon.tail()
                fleet.start(worker)
                fleet.wait(
                    lambda w=worker: any(  # type: ignore[misc]
                        row["worker"] == w and row["t"] > time.time() - 2 for row in fleet.recorded()
                    ),
                    45,
                    f"{worker} processing again",
                )
        finally:
            stop.set()
            producer.join()
        expected = {f"record-{n}" for n in range(300)} | {f"record-{n}" for n in sent}
        fleet.wait(lambda: data_of(fleet.recorded()) >= expected, 60, "every record")
    took = time.monotonic() - started
    counts = Counter(row["data"] for row in fleet.recorded())
    duplicates = sum(c - 1 for c in counts.values() if c > 1)
    FIGURES[f"rolling restart with grace on {backend.name}"] = (
        f"{len(watch.changes)} lease moves, {duplicates} duplicates of {len(counts)} records, {took:.0f}s"
    )
    assert watch.changes == []
    assert owners(lease_table) == settled
    assert duplicates == 0, [d for d, c in counts.items() if c > 1][:10]
