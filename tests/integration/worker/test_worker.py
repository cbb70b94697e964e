"""The whole worker in-process (scheduler, leases, polling, real child processes) on both emulators.

The CLI end-to-end tests (tests/e2e/test_daemon.py) run separate daemon processes; these check the
same paths with direct access to the scheduler's state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.clock import SystemClock
from kcl_daemon.run import build_scheduler, plan_worker
from kcl_daemon.worker.scheduler import Scheduler
from tests.support.recorder import read_records
from tests.support.streams import put
from tests.support.worker import settings_for, wait_until

pytestmark = pytest.mark.integration


async def test_one_worker_delivers_every_record_checkpoints_and_releases_on_shutdown(
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
    records_file: Path,
) -> None:
    stream = make_stream(2)
    put(aws_clients, stream, range(300))
    plan = plan_worker(settings_for(stream, lease_table.table_name), worker_id="w-1")
    scheduler: Scheduler = build_scheduler(plan, aws_clients, clock=SystemClock())
    await scheduler.start()
    try:
        took = await wait_until(
            lambda: (
                {r["data"] for r in read_records(records_file) if r["event"] == "record"}
                == {f"record-{n}" for n in range(300)}
            ),
            30,
            "all 300 records delivered",
        )
        status = scheduler.status()
        assert status.held == 2 and status.processing == 2 and status.records_delivered >= 300
    finally:
        await scheduler.shutdown()
    assert took < 30
    events = read_records(records_file)
    assert sorted(r["shard"] for r in events if r["event"] == "shutdown") == sorted(
        lease.lease_key for lease in lease_table.list_leases().leases
    )
    last_seq = {}
    for r in events:
        if r["event"] == "record":
            last_seq[r["shard"]] = r["seq"]
    for lease in lease_table.list_leases(consistent=True).leases:
        assert lease.lease_owner is None, "released on shutdown"
        assert lease.checkpoint.sequence_number == last_seq[lease.lease_key]


async def test_a_restarted_worker_resumes_from_the_checkpoints(
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
    records_file: Path,
) -> None:
    stream = make_stream(1)
    put(aws_clients, stream, range(50))
    settings = settings_for(stream, lease_table.table_name)
    first = build_scheduler(plan_worker(settings, worker_id="w-1"), aws_clients, clock=SystemClock())
    await first.start()
    try:
        await wait_until(lambda: len(read_records(records_file)) >= 51, 30, "first 50 records")
    finally:
        await first.shutdown()
    put(aws_clients, stream, range(50, 100))
    second = build_scheduler(plan_worker(settings, worker_id="w-2"), aws_clients, clock=SystemClock())
    await second.start()
    try:
        await wait_until(
            lambda: sum(r["event"] == "record" for r in read_records(records_file)) >= 100,
            30,
            "next 50 records",
        )
        await asyncio.sleep(1.0)  # anything re-delivered would arrive now
    finally:
        await second.shutdown()
    data = [r["data"] for r in read_records(records_file) if r["event"] == "record"]
    assert data == [f"record-{n}" for n in range(100)], "each record exactly once, in order"
