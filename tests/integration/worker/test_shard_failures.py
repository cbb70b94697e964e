"""Any error on a shard's path is that shard's failure: backoff, then parked with its reason after
``childMaxConsecutiveFailures``; never a loop of tracebacks every half second (real emulators, real child)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.clock import SystemClock
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.run import build_scheduler, plan_worker
from tests.support.worker import settings_for, wait_until

pytestmark = pytest.mark.integration

SHARD = "shardId-000000000000"


@pytest.mark.parametrize(
    "checkpoint",
    [
        ExtendedSequenceNumber("4" * 5000, 0),
        # (a subSequenceNumber past Java's long no longer reaches a shard: the lease item is unreadable,
        # so it is skipped with a warning, tests/unit/core/leases/test_lease_codec.py)
    ],
    ids=["5000-digit-sequence-number"],
)
async def test_a_shard_that_keeps_failing_is_parked_with_its_reason(
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
    records_file: Path,
    checkpoint: ExtendedSequenceNumber,
    caplog: pytest.LogCaptureFixture,
) -> None:
    stream = make_stream(1)
    assert lease_table.create_lease(Lease(SHARD, checkpoint))
    settings = settings_for(stream, lease_table.table_name, child_max_consecutive_failures=3)
    plan = plan_worker(settings, worker_id="w-1")
    scheduler = build_scheduler(plan, aws_clients, clock=SystemClock())
    caplog.set_level(logging.INFO)
    await scheduler.start()
    try:
        await wait_until(lambda: SHARD in scheduler.status().parked, 30, "the shard parked")
        status = scheduler.status()
        assert status.shard_failures == 3 and f"parked: {SHARD}" in status.line()
        assert SHARD in scheduler.coordinator.held, "a parked shard keeps its lease"
        await asyncio.sleep(1.0)
        assert scheduler.status().shard_failures == 3, "parked: no more attempts"
    finally:
        await scheduler.shutdown()
    parked = [r.getMessage() for r in caplog.records if "parked, its lease is kept" in r.getMessage()]
    assert len(parked) == 1 and "failed 3 times in a row (childMaxConsecutiveFailures)" in parked[0]


async def test_a_lease_for_a_shard_not_in_the_stream_is_left_as_it_is(
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
    records_file: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    stream = make_stream(1)
    stranger = "shardId-000000000099"
    assert lease_table.create_lease(Lease(stranger, ExtendedSequenceNumber("TRIM_HORIZON")))
    scheduler = build_scheduler(
        plan_worker(settings_for(stream, lease_table.table_name), worker_id="w-1"),
        aws_clients,
        clock=SystemClock(),
    )
    caplog.set_level(logging.INFO)
    await scheduler.start()
    try:
        await wait_until(
            lambda: any("is not in the stream" in r.getMessage() for r in caplog.records),
            30,
            "the warning about the unknown shard",
        )
        await asyncio.sleep(0.5)
        lease = lease_table.get_lease(stranger, consistent=True)
        assert lease is not None and not lease.checkpoint.is_shard_end, lease
        assert stranger in scheduler.coordinator.held
        assert SHARD in scheduler.coordinator.held, "the real shard is served as usual"
    finally:
        await scheduler.shutdown()
    lease = lease_table.get_lease(stranger, consistent=True)
    assert lease is not None and lease.checkpoint == ExtendedSequenceNumber("TRIM_HORIZON")
