"""Time as a dependency: production code asks a :class:`Clock`; tests pass a fake one and never sleep.

Sleeping is also how a supervised loop says "I am between two rounds": :class:`SystemClock` and
:func:`sleep_unless_set` tell the loop's :class:`Activity` (set by :func:`kcl_daemon.supervise.supervise`
for the loop's own task) when it goes to sleep and when it wakes, so the liveness check can tell a loop
that waits for its next round from one wedged in the middle of one.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Iterator
from typing import Protocol


class Activity(Protocol):
    """Told when a supervised loop's task sleeps between rounds and when it wakes."""

    def asleep(self) -> None: ...

    def awake(self) -> None: ...


#: (the supervised loop's task, its activity); tasks the loop starts inherit it but are not that task
current_activity: contextvars.ContextVar[tuple[object, Activity] | None] = contextvars.ContextVar(
    "current_activity", default=None
)


@contextlib.contextmanager
def idle() -> Iterator[None]:
    """Mark the current supervised loop asleep for the block (nothing happens in any other task)."""
    mark = current_activity.get()
    if mark is None or mark[0] is not asyncio.current_task():
        yield
        return
    mark[1].asleep()
    try:
        yield
    finally:
        mark[1].awake()


class Clock(Protocol):
    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        with idle():
            await asyncio.sleep(seconds)


async def sleep_unless_set(clock: Clock, seconds: float, event: asyncio.Event) -> bool:
    """Sleep ``seconds`` on ``clock`` but wake as soon as ``event`` is set; True if it was set."""
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    waiter = asyncio.ensure_future(event.wait())
    try:
        with idle():
            await asyncio.wait({sleeper, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeper.cancel()
        waiter.cancel()
    return event.is_set()
