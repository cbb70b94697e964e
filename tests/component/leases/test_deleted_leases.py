"""A finished lease this worker's own cleanup deletes leaves the keeper quietly; one deleted by anyone
else while held is still lost (issue 28, point 5).

The coordinator and its keeper over an in-memory, counter-fenced table that, like DynamoDB, fails the
condition of a write on a deleted item; the real :class:`LeaseCleaner` wired as the scheduler wires it.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from random import Random

import pytest

from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import SHARD_END, ExtendedSequenceNumber
from kcl_daemon.errors import LeaseConflict
from kcl_daemon.leases.coordinator import CoordinatorConfig, LeaseCoordinator
from kcl_daemon.shards.cleanup import LeaseCleaner
from tests.support.clocks import SteppedClock
from tests.support.fakes import FakeTable

PARENT = "shardId-000000000000"
CHILD = "shardId-000000000001"


class DeletingTable(FakeTable):
    """Writes on a deleted item fail their condition (ConditionalCheckFailed), as in DynamoDB."""

    def _check(self, lease: Lease) -> None:
        if lease.lease_key not in self.items:
            raise LeaseConflict(f"{lease.lease_key}: the conditional request failed")
        super()._check(lease)

    def update_child_shard_ids(self, lease_key: str, child_shard_ids: object) -> bool:
        return lease_key in self.items

    def delete(self, lease_key: str) -> None:
        self.items.pop(lease_key, None)


def _fleet() -> tuple[DeletingTable, LeaseCoordinator, list[str]]:
    parent = Lease(PARENT, ExtendedSequenceNumber("1"), child_shard_ids=frozenset({CHILD}))
    child = Lease(CHILD, ExtendedSequenceNumber("7"), lease_owner="other", lease_counter=3)
    table = DeletingTable([parent, child])
    coordinator = LeaseCoordinator(
        table, CoordinatorConfig(worker_id="me", max_leases_for_worker=1), SteppedClock(), rng=Random(1)
    )
    lost: list[str] = []
    coordinator.listeners.lost.append(lost.append)
    return table, coordinator, lost


async def _finish(coordinator: LeaseCoordinator) -> None:
    await coordinator.take_once()
    assert set(coordinator.held) == {PARENT}
    await coordinator.checkpoint(PARENT, SHARD_END)


async def test_a_finished_lease_our_cleanup_deletes_leaves_the_keeper_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    table, coordinator, lost = _fleet()
    await _finish(coordinator)
    cleaner = LeaseCleaner(table, coordinator._clock, before_delete=coordinator.forget_deleted)
    cleaner.enqueue(PARENT)
    decisions = await cleaner.clean_once()
    assert PARENT not in table.items and cleaner.deleted == [PARENT], decisions
    await coordinator.renew_once()
    coordinator.keeper.tick()
    assert lost == [] and PARENT not in coordinator.held and coordinator.keeper.keys() == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert " lost" not in caplog.text and "ConditionalCheckFailed" not in caplog.text
    assert "no longer kept: its shard is complete" in caplog.text


async def test_a_finished_lease_deleted_by_another_worker_while_held_is_still_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    table, coordinator, lost = _fleet()
    await _finish(coordinator)
    table.delete(PARENT)  # someone else's cleanup, or an operator
    await coordinator.renew_once()
    assert lost == [PARENT] and PARENT not in coordinator.held
    assert "the lease was deleted" in caplog.text


async def test_an_unfinished_lease_our_cleanup_deletes_is_still_lost_so_its_shard_stops() -> None:
    """The garbage path (the shard no longer exists) deletes whatever the lease's state: a shard still
    being processed must hear of it, through the loss."""
    table, coordinator, lost = _fleet()
    await coordinator.take_once()
    table.items[PARENT] = replace(table.items[PARENT], child_shard_ids=frozenset())
    cleaner = LeaseCleaner(
        table, coordinator._clock, before_delete=coordinator.forget_deleted, child_shard_lookup=lambda _: None
    )
    cleaner.enqueue(PARENT)
    await cleaner.clean_once()
    assert PARENT not in table.items
    await coordinator.renew_once()
    assert lost == [PARENT]
