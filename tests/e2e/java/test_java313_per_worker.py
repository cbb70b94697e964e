"""A Java KCL 3.1.3 MultiLangDaemon started into a fleet of kcl-daemon workers renewing per worker
(``leaseRenewal = PER_WORKER``), in each lease mode: both sides ``clientVersionConfig =
CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X`` (the 2.x taker), and both in KCL 3.x mode (a kcl-daemon leader
assigning, the 3.0-3.4 table layout 3.1.3 uses), where Java's first worker-metrics report is the sign.

The heartbeats live on the workers' items of ``<app>-WorkerMetricStats``, never in the lease table, so
Java 3.1.3, which reads every lease-table item as a lease, lists its leases without a failure; its first
steal (its 2.x taker steals at its first pass; no heartbeat vouches for the owner) or its first
worker-metrics report, whichever a kcl-daemon worker's scan sees first, is the foreign sign: every
kcl-daemon worker falls back to per-lease renewals (a WARNING), takes its heartbeat off its item, and
renews each lease again. Java holds its share and processes it, and no record is lost. kinesalite +
dynalite only: Java's start-up dominates the wall time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.core.leases.heartbeat import worker_item_from
from tests.support.emulators import Backend
from tests.support.figures import FIGURES
from tests.support.java import FAILOVER_MS, MixedFleet, skip_unless_java

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.java]

COMPAT = "clientVersionConfig = CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X\n"
LAYOUT = "leaseTableLayout = KCL_3_0_TO_3_4\n"
FALLS_BACK = "falls back to per-lease renewals"
FAILOVER_S = FAILOVER_MS / 1000
#: a taker scan's interval and a loaded machine, beside the failover
SCAN_SLACK_S = 10.0


#: the lease mode: each side's extra properties (Java's after the helper's 3.x line: the last one counts)
MODES = {
    # the 2.x taker on both sides
    "2x": (COMPAT + "leaseRenewal = PER_WORKER\n", COMPAT),
    # KCL 3.x assignment: kcl-daemon leads (it starts first) in the 3.0-3.4 layout 3.1.3 uses; Java's
    # reporter period (the helper's 2 s): a leader judges a worker dead whose report is older than two of
    # its own periods, so at the fleet helper's 1 s Java's whole-second lut made it flicker in and out
    "3x": (LAYOUT + "leaseRenewal = PER_WORKER\nworkerMetricsReporterFreqInMillis = 2000\n", ""),
}


@pytest.fixture(params=sorted(MODES))
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def mixed(
    request: pytest.FixtureRequest, tmp_path: Path, backend: Backend, mode: str
) -> Iterator[MixedFleet]:
    skip_unless_java(backend, 3)  # before the table and the stream: a skipped backend costs nothing
    py_extra, java_extra = MODES[mode]
    lease_table: DynamoLeaseTable = request.getfixturevalue("lease_table")
    make_stream: Callable[[int], str] = request.getfixturevalue("make_stream")
    fleet = MixedFleet(
        tmp_path,
        backend,
        request.getfixturevalue("aws_clients"),
        lease_table,
        make_stream(4),
        java_version=3,
        py_extra=py_extra,
        java_extra=java_extra,
    )
    yield fleet
    fleet.close()


def _items(table: DynamoLeaseTable) -> dict[str, dict[str, object]]:
    return {item.worker_id: {"beat": item.beat, "metrics": item.metrics, "kcl_daemon": item.kcl_daemon}
            for item in map(worker_item_from, table.heartbeat_items())}  # fmt: skip


def _counters(table: DynamoLeaseTable) -> dict[str, int]:
    return {lease.lease_key: lease.lease_counter for lease in table.list_leases(consistent=True).leases}


@pytest.mark.timeout(240)
def test_a_java_313_worker_joining_puts_the_fleet_back_on_per_lease_renewals_nothing_lost(
    mixed: MixedFleet, lease_table: DynamoLeaseTable, mode: str
) -> None:
    mixed.more()
    mixed.py.start("py-a")
    mixed.py.start("py-b")
    mixed.wait(lambda: sorted(mixed.owners().values()) == [2, 2], 90, "py-a and py-b hold 2 each")
    mixed.wait(
        lambda: all((_items(lease_table).get(w) or {}).get("beat") for w in ("py-a", "py-b")),
        30,
        "both heartbeat in the worker-metrics table",
    )
    assert lease_table.list_leases(consistent=True).workers == ()  # nothing but leases in the lease table

    java = mixed.java("java-1")
    py_logs = [mixed.py.daemons[w].log for w in ("py-a", "py-b")]
    mixed.wait(lambda: all(FALLS_BACK in log.read_text() for log in py_logs), 90, "the fleet falls back")
    warnings = [next(line for line in log.read_text().splitlines() if FALLS_BACK in line) for log in py_logs]
    assert all("java-1" in line for line in warnings), warnings  # its first steal, or its first report
    # both logs carry this machine's wall clock: from Java's first act to the last worker's fall-back
    fell = max(map(_logged_at, warnings)) - _logged_at(_line(java.log, "Starting worker loop"))
    mixed.wait(lambda: not any(i["beat"] for i in _items(lease_table).values()), 30, "heartbeats withdrawn")
    counters = _counters(lease_table)
    mixed.wait(lambda: "java-1" in mixed.owners(), 90, "Java holds its share")
    mixed.wait(lambda: "java-1" in mixed.workers_seen(), 60, "Java processes its leases")
    mixed.more()
    mixed.wait(mixed.all_delivered, 90, "every record, none lost")
    moved = _counters(lease_table)
    assert all(moved[key] > counters[key] for key in counters), "every lease renewed per lease again"
    FIGURES[f"Java 3.1.3 into a PER_WORKER fleet ({mode} lease mode)"] = (
        f"both kcl-daemon workers back on per-lease renewals {fell:.1f}s after Java's worker loop started "
        f"(failover {FAILOVER_S:g}s); 0 lost"
    )
    assert fell <= FAILOVER_S + SCAN_SLACK_S, f"the fleet fell back {fell:.1f}s after Java started its loop"
    text = java.log.read_text(errors="replace")
    assert "NullPointerException" not in text and "leaseCounter is marked non-null" not in text, java.tail()
    assert (_items(lease_table).get("java-1") or {}).get("metrics") is True  # it reports beside our items
    mixed.check_logs()


def _line(log: Path, marker: str) -> str:
    return next(line for line in log.read_text(errors="replace").splitlines() if marker in line)


def _logged_at(line: str) -> float:
    """The wall-clock time a log line starts with (``2026-12-06 14:11:14,885``; both sides' format)."""
    # one machine, one zone: read as UTC, the differences are right
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC).timestamp()
