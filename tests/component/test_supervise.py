"""supervise(): a worker loop that fails is logged with its traceback, restarted with backoff, and
escalated when it keeps failing; the scheduler's loops all run under it."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kcl_daemon.clock import SystemClock
from kcl_daemon.core.supervise import LoopPolicy
from kcl_daemon.errors import LeaseTableGone
from kcl_daemon.supervise import supervise
from tests.support.clocks import FakeClock

POLICY = LoopPolicy("test_loop", initial_backoff_s=0.5, max_backoff_s=8.0, max_failures=3, window_s=60.0)


async def test_a_failing_loop_is_logged_with_its_traceback_and_restarted_with_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    runs = 0
    fatal: list[tuple[str, str]] = []

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        if runs <= 2:
            raise ValueError(f"boom {runs}")
        await asyncio.Event().wait()  # then runs for good

    task = asyncio.create_task(
        supervise("lease-renewer", flaky, POLICY, clock=clock, on_fatal=lambda n, w: fatal.append((n, w)))
    )
    for _ in range(20):
        await asyncio.sleep(0)
    assert runs == 3 and not fatal and not task.done()
    assert clock.sleeps == [0.5, 1.0]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2 and all(r.exc_info for r in errors)
    assert "lease-renewer failed unexpectedly" in errors[0].getMessage()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_loop_that_keeps_failing_escalates() -> None:
    clock = FakeClock()
    fatal: list[tuple[str, str]] = []

    async def broken() -> None:
        raise KeyError("leaseCounter")

    await supervise("lease-taker", broken, POLICY, clock=clock, on_fatal=lambda n, w: fatal.append((n, w)))
    assert len(fatal) == 1 and fatal[0][0] == "lease-taker"
    assert "failed 4 times within 60s" in fatal[0][1] and "KeyError" in fatal[0][1]


async def test_a_fatal_error_escalates_at_once() -> None:
    fatal: list[tuple[str, str]] = []

    async def gone() -> None:
        raise LeaseTableGone("the lease table has been missing for 10.0s")

    await supervise(
        "lease-renewer",
        gone,
        POLICY,
        clock=FakeClock(),
        on_fatal=lambda n, w: fatal.append((n, w)),
        fatal=(LeaseTableGone,),
    )
    assert fatal == [("lease-renewer", "[LeaseTableGone] the lease table has been missing for 10.0s")]


class BrokenTable:
    """A lease table whose scans hit a bug (not an AWS error): the taker and shard sync keep failing."""

    table_name = "broken"

    def create_table_if_missing(self) -> bool:
        return False

    def list_leases(self, *, consistent: bool = False) -> object:
        raise RuntimeError("a bug in the scan")


class NoShards:
    def list_shards(self, stream_name: str, shard_filter: object = None) -> list[object]:
        return []


async def test_a_scheduler_loop_that_keeps_failing_stops_the_worker_instead_of_running_headless() -> None:
    from kcl_daemon.leases.coordinator import CoordinatorConfig
    from kcl_daemon.lifecycle.shard_consumer import ConsumerSettings
    from kcl_daemon.shards.sync import ShardSyncConfig
    from kcl_daemon.worker.scheduler import Scheduler, SchedulerConfig

    async def no_child() -> object:
        raise AssertionError("no child may start")

    config = SchedulerConfig(
        coordinator=CoordinatorConfig(worker_id="me"),
        shard_sync=ShardSyncConfig(stream_name="s"),
        consumer=ConsumerSettings(),
        loop_policy=LoopPolicy(
            "quick", initial_backoff_s=0.01, max_backoff_s=0.05, max_failures=3, window_s=60
        ),
    )
    scheduler = Scheduler(
        config,
        BrokenTable(),
        NoShards(),
        make_source=lambda shard: None,  # type: ignore[arg-type,return-value]
        launch_child=no_child,  # type: ignore[arg-type]
        clock=SystemClock(),
    )
    await scheduler.start()
    try:
        await asyncio.wait_for(scheduler.failed.wait(), 10)
    finally:
        await scheduler.close()
    assert scheduler.failure is not None and "failed 4 times within 60s" in scheduler.failure
    assert (
        scheduler.failure.startswith("lease-taker") and "RuntimeError: a bug in the scan" in scheduler.failure
    )
