"""supervise(): a worker loop that fails is logged with its traceback, restarted with backoff, and
escalated when it keeps failing; the scheduler's loops all run under it."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kcl_daemon.core.loop_restart import LoopPolicy
from kcl_daemon.errors import LeaseTableGone
from kcl_daemon.supervise import supervise
from tests.fake_clock import FakeClock

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
