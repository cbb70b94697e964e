"""``supervise``: run one of the worker's own long-running loops and never let it die silently.

An unexpected exception is logged at ERROR at once, with its traceback, and the loop is started again
after the backoff of :func:`kcl_daemon.core.supervise.after_loop_failure`; a loop that keeps failing,
or raises one of the policy's ``fatal`` errors, escalates through ``on_fatal`` (the worker then stops
cleanly and exits non-zero). A loop that returns is a failure too: these loops run until cancelled.

For the liveness check (``/healthz``), each supervised loop can be given a :class:`LoopActivity` on a
:class:`LoopBoard`: the clock marks the loop asleep between rounds (:func:`kcl_daemon.clock.idle`), so
a loop awake for longer than its budget is wedged. :class:`EventLoopWatchdog` is a thread that sees
when the event loop itself stops running callbacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from kcl_daemon.clock import Clock, current_activity
from kcl_daemon.core.supervise import GiveUp, LoopPolicy, after_loop_failure
from kcl_daemon.core.worker.health import LoopFacts

logger = logging.getLogger(__name__)

LoopFactory = Callable[[], Coroutine[Any, Any, None]]
OnFatal = Callable[[str, str], None]  # (loop name, why)


async def supervise(
    name: str,
    coro_factory: LoopFactory,
    policy: LoopPolicy,
    *,
    clock: Clock,
    on_fatal: OnFatal,
    fatal: tuple[type[BaseException], ...] = (),
    activity: LoopActivity | None = None,
) -> None:
    if activity is not None:
        activity.task = asyncio.current_task()
        activity.awake()
        current_activity.set((activity.task, activity))
    failures: tuple[float, ...] = ()
    while True:
        try:
            await coro_factory()
        except asyncio.CancelledError:
            raise
        except fatal as exc:
            logger.error("%s: %s; stopping the worker", name, exc)  # noqa: TRY400 - a clear message, no traceback
            on_fatal(name, str(exc))
            return
        except Exception as exc:  # the whole point: log it with its traceback, restart or escalate
            logger.exception("%s failed unexpectedly", name)
            why = f"{type(exc).__name__}: {exc}"
        else:
            logger.error("%s ended unexpectedly", name)
            why = "it ended"
        decision, failures = after_loop_failure(policy, failures, clock.monotonic())
        if isinstance(decision, GiveUp):
            message = (
                f"{name} failed {decision.failures_in_window} times within {policy.window_s:.0f}s "
                f"(last: {why})"
            )
            logger.error("%s; stopping the worker", message)
            on_fatal(name, message)
            return
        logger.warning(
            "%s: restarting in %.1fs (failure %d of at most %d within %.0fs, policy %s)",
            name,
            decision.delay_s,
            decision.failures_in_window,
            policy.max_failures,
            policy.window_s,
            policy.name,
        )
        await clock.sleep(decision.delay_s)


#: A loop may stay awake this long in one round (a taker run with many takes, a shard sync of a large
#: stream, a leader's assignment run) before the liveness check calls it wedged.
DEFAULT_BUSY_BUDGET_S = 600.0


@dataclass(slots=True)
class LoopActivity:
    """Whether one supervised loop sleeps between rounds, or since when it has been awake.

    Written on the event loop, read from the health endpoint's thread: plain attribute stores only.
    """

    name: str
    budget_s: float = DEFAULT_BUSY_BUDGET_S
    monotonic: Callable[[], float] = time.monotonic
    task: asyncio.Task[Any] | None = None
    busy_since: float | None = None

    def asleep(self) -> None:
        self.busy_since = None

    def awake(self) -> None:
        self.busy_since = self.monotonic()

    def facts(self, now: float) -> LoopFacts:
        task = self.task
        running = task is None or not task.done()
        since = self.busy_since
        return LoopFacts(self.name, running, None if since is None else max(now - since, 0.0), self.budget_s)


@dataclass(slots=True)
class LoopBoard:
    """The supervised loops of one worker, for the liveness check."""

    loops: list[LoopActivity] = field(default_factory=list)

    def add(self, name: str, budget_s: float = DEFAULT_BUSY_BUDGET_S) -> LoopActivity:
        activity = LoopActivity(name, budget_s)
        self.loops.append(activity)
        return activity

    def remove(self, activity: LoopActivity) -> None:
        with contextlib.suppress(ValueError):
            self.loops.remove(activity)

    def facts(self, now: float) -> tuple[LoopFacts, ...]:
        return tuple(loop.facts(now) for loop in list(self.loops))


class EventLoopWatchdog:
    """A daemon thread that posts a callback to the event loop every ``interval_s`` and measures how
    long it waits to run: :attr:`lag_s` grows while something blocks the loop (a blocking call on it,
    a CPU-bound stretch), which no task on the loop itself could notice."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, interval_s: float = 0.25) -> None:
        self._loop = loop
        self._interval_s = interval_s
        self._posted_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="event-loop-watchdog", daemon=True)

    def start(self) -> EventLoopWatchdog:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    @property
    def lag_s(self) -> float:
        posted = self._posted_at
        return 0.0 if posted is None else max(time.monotonic() - posted, 0.0)

    def _ran(self) -> None:
        self._posted_at = None

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            if self._posted_at is not None:
                continue  # the last one has not run yet: keep measuring from when it was posted
            self._posted_at = time.monotonic()
            try:
                self._loop.call_soon_threadsafe(self._ran)
            except RuntimeError:  # the loop is closed
                return
