"""The clocks tests inject in place of :class:`kcl_daemon.clock.Clock`; none of them waits for real.

* :class:`FakeClock`: time moves only when something sleeps. Every sleep is recorded in ``sleeps``,
  advances ``now`` by its length, runs the ``on_sleep`` hooks (a test's way to change the world at a
  given simulated time) and yields to the event loop once.
* :class:`VirtualClock`: several concurrent sleepers, woken in order of their wake-up times.
* :class:`SteppedClock`: the test moves ``now`` by hand and nothing may sleep
  (:class:`tests.support.lease_fleet.CoordinatorFleet` steps its coordinators with it).
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


class VirtualClock:
    """Simulated time for several concurrent sleepers: a sleep ends when ``now`` reaches its wake-up time,
    and :meth:`run` moves ``now`` to the earliest pending wake-up whenever the loop has gone idle (real
    work on threads gets ``settle_s`` of real time to finish first)."""

    def __init__(self, start: float = 0.0, *, settle_s: float = 0.002) -> None:
        self.now = start
        self._settle_s = settle_s
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = 0

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._seq += 1
        self._sleepers.append((self.now + max(seconds, 0.0), self._seq, future))
        await future

    async def run(self, until: Callable[[], bool], limit_s: float) -> float:
        """Advance until ``until()`` or ``limit_s`` simulated seconds; returns the simulated time spent."""
        start = self.now
        while not until() and self.now - start <= limit_s:
            await asyncio.sleep(self._settle_s)
            self._sleepers = [s for s in self._sleepers if not s[2].done()]
            if not self._sleepers:
                continue
            wake = min(s[0] for s in self._sleepers)
            self.now = max(self.now, wake)
            for when, _, future in self._sleepers:
                if when <= self.now:
                    future.set_result(None)
        return self.now - start


class SteppedClock:
    """A clock the test moves by hand; the coordinators' own loops are never started."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        raise AssertionError("the fleet steps the coordinators itself")
