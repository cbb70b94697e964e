"""Stopping on signals: the first SIGTERM/SIGINT/SIGHUP is graceful, the second is immediate.

* First signal: ``on_first`` runs (the worker's graceful shutdown: children get ``shutdownRequested``
  and may checkpoint, leases are released; during start-up the start is abandoned at once). SIGHUP is
  treated like SIGTERM, as the JVM runs its shutdown hooks on SIGHUP.
* Second signal: every child process group is SIGKILLed at once, then ``on_second`` runs (cancel
  everything). Nothing waits for a child, a lease write or a grace period any more.
* :func:`exit_promptly` ends the process without waiting for I/O threads still blocked in a call
  (an endpoint that hangs, a table still CREATING): Python would otherwise join them at exit.

Exit codes (documented in the README): 0 after a graceful stop, 1 when the worker cannot start or go
on, 2 for bad configuration or input, 130 after a second signal stopped the daemon at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import NoReturn

from kcl_daemon.errors import KclError
from kcl_daemon.process.child import kill_all_children

logger = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class StoppedAtOnce(KclError):
    """A second signal stopped the daemon at once; nothing was finished or released."""


class StopSignals:
    """Installs the two-stage handlers on the running loop while in a ``with`` block."""

    def __init__(self, on_first: Callable[[], object], on_second: Callable[[], object]) -> None:
        self._on_first = on_first
        self._on_second = on_second
        self.received: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def immediate(self) -> bool:
        return len(self.received) >= 2

    def handle(self, signum: int) -> None:
        name = signal.Signals(signum).name
        self.received.append(name)
        if len(self.received) == 1:
            logger.warning("%s received: stopping gracefully (send it again to stop at once)", name)
            self._on_first()
            return
        killed = kill_all_children()
        logger.warning("%s received again: stopping at once (%d child process(es) killed)", name, killed)
        self._on_second()

    def __enter__(self) -> StopSignals:
        self._loop = asyncio.get_running_loop()
        for signum in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                self._loop.add_signal_handler(signum, self.handle, signum)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._loop is None or self._loop.is_closed():
            return
        for signum in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                self._loop.remove_signal_handler(signum)


def _blocked_threads(older: frozenset[threading.Thread]) -> list[threading.Thread]:
    main = threading.main_thread()
    return [
        t for t in threading.enumerate() if t is not main and t not in older and t.is_alive() and not t.daemon
    ]


def exit_promptly(
    code: int, grace_s: float = 2.0, older: frozenset[threading.Thread] = frozenset()
) -> NoReturn:
    """Exit with ``code``; if I/O threads are still blocked after ``grace_s``, do not wait for them.

    Threads in ``older`` (those that ran before the daemon started: an embedding program's, a test
    runner's) are not the daemon's and never make it cut the process short."""
    deadline = time.monotonic() + grace_s
    while _blocked_threads(older) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not _blocked_threads(older):
        sys.exit(code)
    logger.info("not waiting for %d blocked I/O thread(s)", len(_blocked_threads(older)))
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
