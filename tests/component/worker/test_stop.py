"""The scheduler's graceful stop gives up what the table names it on, held or not (issue 17, point 4), and
a hand-off of a parked shard does not wait out its timeout."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kcl_daemon.leases.coordinator import CoordinatorConfig
from kcl_daemon.lifecycle.shard_consumer import ConsumerSettings
from kcl_daemon.shards.sync import ShardSyncConfig
from kcl_daemon.worker.scheduler import Scheduler, SchedulerConfig
from tests.support.clocks import FakeClock
from tests.support.fakes import FakeTable, shards


class _NoShards:
    def list_shards(self, stream_name: str, shard_filter: object = None) -> list[object]:
        return []


def _scheduler(table: FakeTable) -> Scheduler:
    async def no_child() -> object:
        raise AssertionError("no child may start")

    config = SchedulerConfig(
        coordinator=CoordinatorConfig(worker_id="me"),
        shard_sync=ShardSyncConfig(stream_name="s"),
        consumer=ConsumerSettings(),
    )
    return Scheduler(
        config,
        table,
        _NoShards(),
        make_source=lambda shard: None,  # type: ignore[arg-type,return-value]
        launch_child=no_child,  # type: ignore[arg-type]
        clock=FakeClock(),  # type: ignore[arg-type]
    )


async def test_shutdown_releases_leases_the_table_names_us_on_that_we_never_started(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    leases = shards(3)
    table = FakeTable([leases[0].taken_by("me"), leases[1].taken_by("me"), leases[2].taken_by("other")])
    scheduler = _scheduler(table)
    await scheduler.shutdown()
    assert [lease.lease_owner for lease in table.items.values()] == [None, None, "other"]
    assert "shutdown complete: 2 lease(s) released" in caplog.text


async def test_shutdown_with_a_restart_grace_keeps_them() -> None:
    table = FakeTable([lease.taken_by("me") for lease in shards(2)])
    scheduler = _scheduler(table)
    scheduler.keep_leases_until = 4e9
    await scheduler.shutdown()
    assert [lease.lease_owner for lease in table.items.values()] == ["me", "me"]


def test_stopping_a_parked_shard_for_a_hand_off_wakes_it() -> None:
    scheduler = _scheduler(FakeTable([]))
    wake = asyncio.Event()
    scheduler.parked["shardId-000000000000"] = ("it failed 3 times", wake)
    scheduler.stop_shard("shardId-000000000000")
    assert wake.is_set()


async def test_a_lease_held_again_while_its_lost_shard_stops_starts_a_new_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Lost, then re-assigned to us before the old shard task ended: _on_taken finds the runner busy,
    # so the runner itself must start the shard again (it ended for good, leaving a held lease idle).
    from kcl_daemon.core.lifecycle.states import ShardState, ShutdownReason
    from kcl_daemon.leases.coordinator import HeldLease
    from kcl_daemon.lifecycle.shard_consumer import ShardOutcome
    from kcl_daemon.worker import scheduler as module

    [lease] = [lease.taken_by("me") for lease in shards(1)]
    scheduler = _scheduler(FakeTable([lease]))
    runs: list[int] = []

    class Task:
        consumer = None
        failure = None

        def __init__(self, held: object, context: object) -> None:
            runs.append(len(runs))

        def lease_lost(self) -> None:
            pass

        async def run(self) -> ShardOutcome | None:
            if len(runs) == 1:  # the first run ends because the lease was lost...
                # ...and by then the leader has given it back to us
                scheduler.coordinator.held[lease.lease_key] = HeldLease(lease, 0.0)
                return ShardOutcome(
                    lease.shard_id,
                    ShardState.SHUTDOWN_COMPLETE,
                    ShutdownReason.LEASE_LOST,
                    lease.checkpoint,
                    None,  # type: ignore[arg-type]
                )
            scheduler.coordinator.held.pop(lease.lease_key, None)  # the second run: lost for good
            return ShardOutcome(
                lease.shard_id,
                ShardState.SHUTDOWN_COMPLETE,
                ShutdownReason.LEASE_LOST,
                lease.checkpoint,
                None,  # type: ignore[arg-type]
            )

    monkeypatch.setattr(module, "ShardTask", Task)
    await scheduler._run_shard(lease)
    assert runs == [0, 1]
