"""A finished lease deleted by the worker's own cleanup leaves the keeper quietly, on a real lease table
(issue 28, point 5): the keeper's thread renewing every third of a 1 s failover, DynamoDB's conditional
failure on the deleted item. Without the fix: a WARNING for the failed renewal and ``lease … lost: the
lease was deleted``. One deleted by someone else while held is still lost. About 2 s per backend."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.clock import SystemClock
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import SHARD_END, ExtendedSequenceNumber
from kcl_daemon.leases.coordinator import CoordinatorConfig, LeaseCoordinator
from kcl_daemon.shards.cleanup import LeaseCleaner

pytestmark = pytest.mark.integration

PARENT = "shardId-000000000000"
CHILD = "shardId-000000000001"


async def _finished_parent(lease_table: DynamoLeaseTable) -> tuple[LeaseCoordinator, list[str]]:
    """This worker holds PARENT at SHARD_END; CHILD (another worker's) has checkpointed."""
    assert lease_table.create_lease(Lease(PARENT, ExtendedSequenceNumber("1")))
    assert lease_table.create_lease(Lease(CHILD, ExtendedSequenceNumber("7")))
    lease_table.update_child_shard_ids(PARENT, [CHILD])
    child = lease_table.get_lease(CHILD, consistent=True)
    assert child is not None
    lease_table.take(child, "other")
    coordinator = LeaseCoordinator(
        lease_table, CoordinatorConfig(worker_id="me", failover_s=1.0, max_leases_for_worker=1), SystemClock()
    )
    lost: list[str] = []
    coordinator.listeners.lost.append(lost.append)
    await coordinator.take_once()
    assert set(coordinator.held) == {PARENT}
    await coordinator.checkpoint(PARENT, SHARD_END)
    return coordinator, lost


async def _renewing(coordinator: LeaseCoordinator, seconds: float) -> None:
    renewer = asyncio.create_task(coordinator.run_renewer())
    try:
        await asyncio.sleep(seconds)
    finally:
        renewer.cancel()
        await asyncio.gather(renewer, return_exceptions=True)


async def test_the_workers_own_cleanup_deletes_a_finished_lease_quietly(
    lease_table: DynamoLeaseTable, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    coordinator, lost = await _finished_parent(lease_table)
    cleaner = LeaseCleaner(lease_table, SystemClock(), before_delete=coordinator.forget_deleted)
    cleaner.enqueue(PARENT)
    renewer = asyncio.create_task(_renewing(coordinator, 1.2))  # a renewal every 0.31 s meanwhile
    await asyncio.sleep(0.4)
    await cleaner.clean_once()
    await renewer
    assert cleaner.deleted == [PARENT] and lease_table.get_lease(PARENT, consistent=True) is None
    assert lost == [] and not coordinator.held
    noisy = [
        r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING or " lost" in r.getMessage()
    ]
    assert noisy == []


async def test_a_finished_lease_deleted_by_someone_else_while_held_is_lost(
    lease_table: DynamoLeaseTable, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    coordinator, lost = await _finished_parent(lease_table)
    lease_table.delete(PARENT)
    await _renewing(coordinator, 1.0)
    assert lost == [PARENT] and "the lease was deleted" in caplog.text
