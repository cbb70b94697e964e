"""The clock the tests inject: time moves only when something sleeps (see kcl_daemon.clock.Clock).

Every sleep is recorded in ``sleeps``, advances ``now`` by its length, runs the ``on_sleep`` hooks (a
test's way to change the world at a given simulated time) and yields to the event loop once.
``tests.fleet_sim.SteppedClock`` is the other kind: there the test moves time and nothing may sleep.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class FakeClock:
    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.sleeps: list[float] = []
        self.on_sleep: list[Callable[[], None]] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        for hook in self.on_sleep:
            hook()
        await asyncio.sleep(0)
