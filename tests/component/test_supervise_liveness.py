"""What the liveness check reads from supervised loops and the event loop (kcl_daemon.supervise): a loop
asleep between rounds, one wedged in a round, one that ended; a blocked event loop seen from a thread."""

from __future__ import annotations

import asyncio
import threading
import time

from kcl_daemon.clock import SystemClock
from kcl_daemon.core.supervise import WORKER_LOOP
from kcl_daemon.supervise import EventLoopWatchdog, LoopBoard, supervise

CLOCK = SystemClock()


async def test_a_loop_sleeping_between_rounds_is_asleep_and_a_wedged_one_is_busy() -> None:
    board = LoopBoard()
    sleeper = board.add("sleeper", budget_s=0.05)
    wedged = board.add("wedged", budget_s=0.05)
    wedge = asyncio.Event()

    async def sleeps() -> None:
        while True:
            await CLOCK.sleep(10)

    async def wedges() -> None:
        while True:
            await wedge.wait()  # not a clock sleep: a round that never finishes

    def fatal(name: str, why: str) -> None:
        raise AssertionError(f"{name}: {why}")

    tasks = [
        asyncio.create_task(
            supervise("sleeper", sleeps, WORKER_LOOP, clock=CLOCK, on_fatal=fatal, activity=sleeper)
        ),
        asyncio.create_task(
            supervise("wedged", wedges, WORKER_LOOP, clock=CLOCK, on_fatal=fatal, activity=wedged)
        ),
    ]
    await asyncio.sleep(0.2)
    facts = {f.name: f for f in board.facts(time.monotonic())}
    assert facts["sleeper"].running and facts["sleeper"].busy_for_s is None
    assert facts["wedged"].running and facts["wedged"].busy_for_s is not None
    assert facts["wedged"].busy_for_s > facts["wedged"].budget_s
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert not any(f.running for f in board.facts(time.monotonic()))


async def test_tasks_a_loop_starts_do_not_mark_it_asleep() -> None:
    board = LoopBoard()
    activity = board.add("parent", budget_s=60)
    inner_slept = asyncio.Event()
    release = asyncio.Event()

    async def parent() -> None:
        async def child() -> None:
            await CLOCK.sleep(0.01)  # the child's sleep is not the parent's
            inner_slept.set()

        started = asyncio.create_task(child())
        await release.wait()
        await started

    task = asyncio.create_task(
        supervise("parent", parent, WORKER_LOOP, clock=CLOCK, on_fatal=lambda *_: None, activity=activity)
    )
    await inner_slept.wait()
    assert activity.busy_since is not None
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_the_watchdog_sees_a_blocked_event_loop_from_its_thread() -> None:
    watchdog = EventLoopWatchdog(asyncio.get_running_loop(), interval_s=0.05).start()
    try:
        await asyncio.sleep(0.2)
        assert watchdog.lag_s < 0.2
        seen: list[float] = []
        timer = threading.Timer(0.6, lambda: seen.append(watchdog.lag_s))
        timer.start()
        time.sleep(0.8)  # noqa: ASYNC251 - blocks the event loop on purpose
        timer.join()
        assert seen and seen[0] >= 0.4
        await asyncio.sleep(0.2)
        assert watchdog.lag_s < 0.2
    finally:
        watchdog.stop()
