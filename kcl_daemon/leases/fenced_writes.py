"""The coordinator's fenced writes: one bounded call on a pool, reconciled after an unknown outcome.

A take, an eviction or a restart mark is a counter-fenced write (contract §4.2). :meth:`FencedWrites._write`
sends it, and after a condition failure or an unknown outcome (5xx, dropped connection, timeout) reads
the item again consistently and lets :func:`kcl_daemon.core.leases.reconcile.reconcile` say whether it
applied, was lost, or must be sent again (``LEASE_IO``, never past the deadline). A mixin of
:class:`~kcl_daemon.leases.coordinator.LeaseCoordinator`; it also notes since when the table has been
missing (:attr:`FencedWrites.table_missing_since`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TypeVar

from kcl_daemon.blocking import run_blocking
from kcl_daemon.clock import Clock
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import CorruptLeaseItem
from kcl_daemon.core.leases.reconcile import LeaseWrite, Verdict, reconcile
from kcl_daemon.errors import (
    DependencyUnavailable,
    KclError,
    LeaseConflict,
    LeaseUnreadable,
    Throttled,
    TransientNetwork,
)
from kcl_daemon.leases.coordinator_config import CoordinatorConfig, LeaseTableOps
from kcl_daemon.retry import LEASE_IO

logger = logging.getLogger("kcl_daemon.leases.coordinator")

T = TypeVar("T")


class FencedWrites:
    """Bounded calls and reconciled fenced writes on the coordinator's lease table."""

    config: CoordinatorConfig
    table_missing_since: float | None
    _table: LeaseTableOps
    _clock: Clock

    async def _call(self, pool: Executor, fn: Callable[[], T]) -> T:
        return await run_blocking(pool, fn)

    async def _bounded(self, pool: Executor, fn: Callable[[], T], deadline: float, what: str) -> T:
        """``fn()`` on ``pool``, waited for no longer than ``deadline`` (then: outcome unknown)."""
        remaining = deadline - self._clock.monotonic()
        if remaining <= 0:
            raise TransientNetwork(f"{what}: no time left before the deadline")
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancellation that
            # arrives after the call finished but before this task resumed (cpython gh-86296), and a
            # cancelled renewal loop then went on renewing for ever
            async with asyncio.timeout(remaining):
                result = await self._call(pool, fn)
        except TimeoutError:
            raise TransientNetwork(f"{what}: no answer within {remaining:.1f}s") from None
        except DependencyUnavailable:
            if self.table_missing_since is None:
                self.table_missing_since = self._clock.monotonic()
            raise
        self.table_missing_since = None
        return result

    async def _write(
        self, write: LeaseWrite, fn: Callable[[Lease], Lease], pool: Executor, deadline: float
    ) -> Lease:
        """One fenced write, reconciled after an unknown outcome or a condition failure, and retried
        (``LEASE_IO``, never past ``deadline``) while it was not applied.

        Returns the lease as stored; raises :class:`LeaseConflict` (lost: the message says what the
        table showed), :class:`LeaseUnreadable`, or the last error when the time ran out.
        """
        policy = LEASE_IO.within(deadline - self._clock.monotonic())

        async def sleep(seconds: float) -> None:
            await self._clock.sleep(min(seconds, max(deadline - self._clock.monotonic(), 0.0)))

        once = functools.partial(self._write_once, write, fn, pool, deadline)
        return await policy.run_async(once, sleep=sleep, monotonic=self._clock.monotonic)

    async def _write_once(
        self, write: LeaseWrite, fn: Callable[[Lease], Lease], pool: Executor, deadline: float
    ) -> Lease:
        key = write.before.lease_key
        what = f"{write.kind} of lease {key}"
        try:
            return await self._bounded(pool, functools.partial(fn, write.before), deadline, what)
        except CorruptLeaseItem as exc:
            raise LeaseUnreadable(f"{what} was written but the item cannot be read: {exc}") from exc
        except (DependencyUnavailable, Throttled):
            raise  # the table is gone, or the write was rejected unapplied: nothing to reconcile
        except KclError as exc:  # a condition failure, or an unknown outcome (5xx, connection, timeout)
            failure = exc
        read = functools.partial(self._table.get_lease, key, consistent=True)
        try:
            seen = await self._bounded(pool, read, deadline, f"re-read of lease {key}")
        except CorruptLeaseItem as exc:
            raise LeaseUnreadable(f"{what}: {failure}; the re-read item cannot be read: {exc}") from exc
        except KclError as exc:
            logger.warning("%s: %s; the re-read failed too (%s): outcome still unknown", what, failure, exc)
            if failure.retriable:
                raise failure from None
            raise TransientNetwork(f"{what}: {failure}; outcome unknown, re-read failed: {exc}") from exc
        verdict = reconcile(write, seen)
        level = logging.DEBUG if isinstance(failure, LeaseConflict) else logging.WARNING
        logger.log(level, "%s: %s; %s", what, failure, verdict.reason)
        match verdict.verdict:
            case Verdict.APPLIED:
                if verdict.seen is None:  # a release of a lease that was deleted meanwhile
                    raise LeaseConflict(f"{what}: {verdict.reason}")
                return verdict.seen
            case Verdict.LOST:
                raise LeaseConflict(f"{what}: {verdict.reason}") from failure
            case Verdict.NOT_APPLIED:
                if failure.retriable:
                    raise failure
                raise TransientNetwork(f"{what}: {failure}; {verdict.reason}") from failure
