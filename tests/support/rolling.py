"""A rolling restart of a four-worker fleet with a restart grace, watched for moves and duplicates.

Four daemons (real processes, the recording processor) in two zones share eight shards with
``restartGraceMillis = 30000``. Once they hold 2/2/2/2, each daemon in turn is stopped with SIGTERM, stays
down for a failover time and a second (so that its leases have expired in every other worker's eyes:
only the grace holds them), and is started again with the same ``workerId``, while records keep
flowing. :class:`tests.support.fleet.OwnerWatch` counts every change of a lease's owner or hand-off mark
during the restarts; the recording processor counts the records processed twice.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from botocore.exceptions import ClientError  # noqa: TID251 - the table may not exist

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.core.leader.table_names import legacy_table_names
from tests.support.chaos.classify import log_time
from tests.support.emulators import Backend
from tests.support.figures import FIGURES
from tests.support.fleet import Fleet, OwnerWatch, owners
from tests.support.recorder import data_of
from tests.support.streams import put

ZONES = {"zone-a-1": "az-a", "zone-a-2": "az-a", "zone-b-1": "az-b", "zone-b-2": "az-b"}
SHARDS = 8
GRACE_MS = 30_000
#: the 3.x leader's decider, and the 2.x taker without metrics
MODES = {
    "3.x": "leaseAssignmentStrategy = COOPERATIVE\n",
    "2.x": "clientVersionConfig = CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1\n",
}


class RollingFleet(Fleet):
    """Zones, the grace and the lease mode on top of :class:`Fleet`'s properties."""

    mode = "3.x"

    def properties(self, worker: str, executable: str) -> Path:
        path = super().properties(worker, executable)
        text = path.read_text().replace("leaseAssignmentStrategy = LEASE_COUNT_BASED\n", "")
        path.write_text(
            text + MODES[self.mode] + f"workerZone = {ZONES[worker]}\n"
            f"restartGraceMillis = {GRACE_MS}\n"
            # no CPU figures: placement by counts only, whatever the load of the test machine
            "disableWorkerMetrics = true\n"
            "gracefulLeaseHandoffTimeoutMillis = 10000\n"
        )
        return path


@pytest.fixture
def make_fleet(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
) -> Iterator[Callable[[int, str], RollingFleet]]:
    """``make_fleet(failover_ms, mode)``: a fleet in that lease mode (a key of :data:`MODES`)."""
    made: list[RollingFleet] = []

    def make(failover_ms: int, mode: str) -> RollingFleet:
        stream = make_stream(SHARDS)
        fleet = RollingFleet(tmp_path, backend, lease_table.table_name, stream, failover_ms=failover_ms)
        fleet.mode = mode
        made.append(fleet)
        return fleet

    yield make
    for fleet in made:
        fleet.close()
    for side_table in legacy_table_names(None, lease_table.table_name):
        with contextlib.suppress(ClientError):
            aws_clients.dynamodb.delete_table(TableName=side_table)


@dataclass(frozen=True, slots=True)
class RollingResult:
    moves: list[tuple[str, object, object]]
    #: records delivered again during the restarts
    duplicates: int
    records: int
    took_s: float
    final: dict[str, int]
    #: every daemon's log, the stopped ones' included
    logs: str
    #: when the restarts began (epoch seconds)
    started_at: float
    #: worker -> (when its stop began, when it processed again), epoch seconds
    down: dict[str, tuple[float, float]]

    def judged_while_down(self, line: str) -> bool:
        """A leader's verdict on a worker while it was restarting (quiet, dead), or any lease lost during
        the restarts (while the fleet settled, a 2.x taker may steal: not counted)."""
        when = log_time(line)
        if when is None:
            return False
        if " lost:" in line:
            return when >= self.started_at
        return any(
            since <= when <= until
            and (f"worker {worker} looks dead" in line or f"worker {worker} renewed nothing" in line)
            for worker, (since, until) in self.down.items()
        )

    def figure(self) -> str:
        moves, took = len(self.moves), self.took_s
        return f"{moves} lease moves, {self.duplicates} duplicates of {self.records} records, {took:.0f}s"


def check_rolling_restart(
    make_fleet: Callable[[int, str], RollingFleet],
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    failover_ms: int,
    mode: str,
) -> None:
    """Run :func:`rolling_restart`, record its figures, and assert 0 moves, 0 duplicates, no judgement."""
    fleet = make_fleet(failover_ms, mode)
    result = rolling_restart(fleet, aws_clients, lease_table)
    FIGURES[f"rolling restart ({fleet.mode}, failover {failover_ms} ms, 4 workers, 8 shards)"] = (
        result.figure()
    )
    judged = [line for line in result.logs.splitlines() if result.judged_while_down(line)]
    assert result.moves == [], (result.moves, judged, fleet.logs())
    assert result.duplicates == 0
    assert result.final == dict.fromkeys(ZONES, SHARDS // len(ZONES))
    assert judged == []


def rolling_restart(
    fleet: RollingFleet, aws_clients: AwsClients, lease_table: DynamoLeaseTable
) -> RollingResult:
    """Settle the fleet at 2/2/2/2, restart every worker in turn (down for failover + 1 s), count."""
    failover_s = fleet.failover_ms / 1000
    put(aws_clients, fleet.stream, range(200))
    for worker in ZONES:
        fleet.start(worker)
    settled = dict.fromkeys(ZONES, SHARDS // len(ZONES))
    # Settled: 2/2/2/2 with no hand-off pending, and still so a failover later, when the victim of a
    # 2.x steal that completed the spread has stopped and the repeats a steal may cause are done.
    for _ in range(10):
        fleet.wait(lambda: owners(lease_table) == settled, 30 + 12 * failover_s, "2/2/2/2")
        fleet.wait(
            lambda: all(
                lease.checkpoint_owner is None for lease in lease_table.list_leases(consistent=True).leases
            ),
            30,
            "hand-offs done",
        )
        time.sleep(failover_s + 1.0)
        if owners(lease_table) == settled:
            break
    fleet.wait(lambda: data_of(fleet.recorded()) >= {f"record-{n}" for n in range(200)}, 60, "200 records")

    stop = threading.Event()
    sent: list[int] = []

    def produce() -> None:
        n = 200
        while not stop.is_set():
            put(aws_clients, fleet.stream, range(n, n + 8))
            sent.extend(range(n, n + 8))
            n += 8
            time.sleep(0.25)

    producer = threading.Thread(target=produce, daemon=True)
    started = time.monotonic()
    started_at = time.time()
    down: dict[str, tuple[float, float]] = {}
    with OwnerWatch(lease_table) as watch:
        producer.start()
        try:
            for worker in ZONES:
                since = time.time()
                daemon = fleet.daemons[worker]
                assert daemon.stop(signal.SIGTERM) == 0, daemon.tail()
                assert daemon.log is not None
                daemon.log.rename(daemon.log.with_suffix(".before-restart.log"))
                time.sleep(failover_s + 1.0)  # down long enough for its leases to expire everywhere
                fleet.start(worker)
                fleet.wait(
                    lambda w=worker: any(  # type: ignore[misc]
                        row["worker"] == w and row["t"] > time.time() - 2 for row in fleet.recorded()
                    ),
                    30 + 3 * failover_s,
                    f"{worker} processing again",
                )
                down[worker] = (since, time.time())
        finally:
            stop.set()
            producer.join()
        expected = {f"record-{n}" for n in range(200)} | {f"record-{n}" for n in sent}
        fleet.wait(lambda: data_of(fleet.recorded()) >= expected, 60, "every record")
    rows = sorted(fleet.recorded(), key=lambda row: row["t"])
    counts = Counter(row["data"] for row in rows)
    # a repeat delivered during the restarts (settling may steal in 2.x mode, and a steal may repeat)
    seen: set[str] = set()
    repeats = 0
    for row in rows:
        repeats += row["data"] in seen and row["t"] >= started_at
        seen.add(row["data"])
    return RollingResult(
        moves=list(watch.changes),
        duplicates=repeats,
        records=len(counts),
        took_s=time.monotonic() - started,
        final=owners(lease_table),
        started_at=started_at,
        down=down,
        logs="\n".join(path.read_text(errors="replace") for path in sorted(fleet.tmp_path.glob("*.log"))),
    )
