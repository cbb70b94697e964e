"""The leader tells who received leases in a run, so that it adopts its own at once (start-up)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from kcl_daemon.core.leader.assignor import CooperativeAssignor
from kcl_daemon.core.leader.worker_metrics import WorkerMetricStats
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import TRIM_HORIZON
from kcl_daemon.leader.assignment import AssignmentLoop
from kcl_daemon.leader.assignment_config import AssignmentConfig
from tests.support.clocks import FakeClock
from tests.support.fakes import Scan

WALL = 1_700_000_000.0


class _Table:
    def __init__(self, leases: list[Lease]) -> None:
        self.items = {lease.lease_key: lease for lease in leases}

    def list_leases(self) -> Scan:
        return Scan(list(self.items.values()))

    def assign(self, lease: Lease, new_owner: str) -> Lease:
        self.items[lease.lease_key] = replace(
            lease, lease_owner=new_owner, lease_counter=lease.lease_counter + 1
        )
        return self.items[lease.lease_key]


class _Metrics:
    def scan(self) -> tuple[list[WorkerMetricStats], list[str]]:
        return [WorkerMetricStats("w1", WALL), WorkerMetricStats("w2", WALL)], []


class _Election:
    def __init__(self) -> None:
        self.on_change: list[Any] = []


def test_a_run_reports_the_workers_that_received_leases_and_a_quiet_run_nobody() -> None:
    table = _Table([Lease(f"shardId-{i:012d}", TRIM_HORIZON) for i in range(4)])
    told: list[set[str]] = []
    with ThreadPoolExecutor(1) as pool:
        loop = AssignmentLoop(
            table, _Metrics(), _Election(), CooperativeAssignor(), AssignmentConfig(20.0, 10.0),
            FakeClock(500.0), pool, wall=lambda: WALL,
        )  # fmt: skip
        loop.on_assigned = told.append
        first = asyncio.run(loop.run_once())
        second = asyncio.run(loop.run_once())
    assert first.applied == 4 and second.applied == 0
    assert told == [{"w1", "w2"}]
    assert {lease.lease_owner for lease in table.items.values()} == {"w1", "w2"}
