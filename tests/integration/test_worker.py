"""The whole worker in-process (scheduler, leases, polling, real child processes) on both emulators.

The CLI end-to-end tests (tests/e2e/test_daemon.py) run separate daemon processes; these check the
same paths with direct access to the scheduler's state.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.clock import SystemClock
from kcl_daemon.config.settings import Settings
from kcl_daemon.core.sequence import Sentinel
from kcl_daemon.run import build_scheduler, plan_worker
from kcl_daemon.worker.scheduler import Scheduler

pytestmark = pytest.mark.integration

RECORDER = Path(__file__).parents[1] / "fixtures" / "children" / "recording_processor.py"


def settings_for(stream: str, table: str, **overrides: Any) -> Settings:
    base = Settings(
        executable=(sys.executable, str(RECORDER)),
        application_name=table,
        stream_name=stream,
        initial_position=Sentinel.TRIM_HORIZON,
        idle_time_between_reads_s=0.2,
        failover_s=2.0,
        parent_shard_poll_interval_s=0.5,
        shutdown_grace_s=10.0,
        child_stop_timeout_s=2.0,
    )
    return replace(base, **overrides)


def put(clients: AwsClients, stream: str, count: int, start: int = 0) -> None:
    for offset in range(0, count, 100):
        entries = [
            {"Data": f"record-{n}".encode(), "PartitionKey": f"key-{n}"}
            for n in range(start + offset, start + min(offset + 100, count))
        ]
        response = clients.kinesis.put_records(StreamName=stream, Records=entries)  # type: ignore[arg-type]
        assert response.get("FailedRecordCount", 0) == 0


def recorded(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


async def wait_until(check: Callable[[], bool], limit_s: float, what: str) -> float:
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < limit_s, f"{what} not within {limit_s}s"
        await asyncio.sleep(0.1)
    return time.monotonic() - start


@pytest.fixture
def records_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "records.jsonl"
    monkeypatch.setenv("KCL_TEST_RECORDS", str(path))
    return path


async def test_one_worker_delivers_every_record_checkpoints_and_releases_on_shutdown(
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
    records_file: Path,
) -> None:
    stream = make_stream(2)
    put(aws_clients, stream, 300)
    plan = plan_worker(settings_for(stream, lease_table.table_name), worker_id="w-1")
    scheduler: Scheduler = build_scheduler(plan, aws_clients, clock=SystemClock())
    await scheduler.start()
    try:
        took = await wait_until(
            lambda: (
                {r["data"] for r in recorded(records_file) if r["event"] == "record"}
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
    events = recorded(records_file)
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
    put(aws_clients, stream, 50)
    settings = settings_for(stream, lease_table.table_name)
    first = build_scheduler(plan_worker(settings, worker_id="w-1"), aws_clients, clock=SystemClock())
    await first.start()
    try:
        await wait_until(lambda: len(recorded(records_file)) >= 51, 30, "first 50 records")
    finally:
        await first.shutdown()
    put(aws_clients, stream, 50, start=50)
    second = build_scheduler(plan_worker(settings, worker_id="w-2"), aws_clients, clock=SystemClock())
    await second.start()
    try:
        await wait_until(
            lambda: sum(r["event"] == "record" for r in recorded(records_file)) >= 100, 30, "next 50 records"
        )
        await asyncio.sleep(1.0)  # anything re-delivered would arrive now
    finally:
        await second.shutdown()
    data = [r["data"] for r in recorded(records_file) if r["event"] == "record"]
    assert data == [f"record-{n}" for n in range(100)], "each record exactly once, in order"
