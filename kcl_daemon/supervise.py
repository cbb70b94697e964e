"""``supervise``: run one of the worker's own long-running loops and never let it die silently.

An unexpected exception is logged at ERROR at once, with its traceback, and the loop is started again
after the backoff of :func:`kcl_daemon.core.loop_restart.after_loop_failure`; a loop that keeps failing,
or raises one of the policy's ``fatal`` errors, escalates through ``on_fatal`` (the worker then stops
cleanly and exits non-zero). A loop that returns is a failure too: these loops run until cancelled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from kcl_daemon.clock import Clock
from kcl_daemon.core.loop_restart import GiveUp, LoopPolicy, after_loop_failure

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
) -> None:
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
