"""The whole worker in-process on the emulators (``build_scheduler``), for tests that need its state."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kcl_daemon.config.settings import Settings
from kcl_daemon.core.sequence import Sentinel
from tests.support.paths import RECORDER


def settings_for(stream: str, table: str, **overrides: Any) -> Settings:
    """A worker over ``stream`` with the recording processor, short intervals, from TRIM_HORIZON."""
    base = Settings(
        executable=(sys.executable, str(RECORDER)),
        application_name=table,
        stream_name=stream,
        initial_position=Sentinel.TRIM_HORIZON,
        idle_time_between_reads_s=0.2,
        failover_s=2.0,
        parent_shard_poll_interval_s=0.5,
        shutdown_grace_s=10.0,
        child_stop_timeout_s=2.0,
    )
    return replace(base, **overrides)


async def wait_until(check: Callable[[], bool], limit_s: float, what: str) -> float:
    """Seconds until ``check()``, polling every 0.1 s without blocking the event loop."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < limit_s, f"{what} not within {limit_s}s"
        await asyncio.sleep(0.1)
    return time.monotonic() - start
