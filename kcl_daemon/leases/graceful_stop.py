"""A graceful stop's last lease writes: give back what the table still names this worker on, or keep a
lease marked for this worker's restart (:mod:`kcl_daemon.core.leases.restart_grace`).

A mixin of :class:`~kcl_daemon.leases.coordinator.LeaseCoordinator`; every write is fenced on the counter
read, and a failure only means the lease expires instead.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from concurrent.futures import Executor

from kcl_daemon.core.leases import restart_grace
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import CorruptLeaseItem
from kcl_daemon.errors import KclError, LeaseConflict
from kcl_daemon.leases.coordinator_config import HeldLease
from kcl_daemon.leases.fenced_writes import FencedWrites
from kcl_daemon.leases.keeper import LeaseKeeper
from kcl_daemon.retry import LEASE_IO

logger = logging.getLogger("kcl_daemon.leases.coordinator")


class GracefulStop(FencedWrites):
    """Releases and restart marks of the leases a stopping worker no longer keeps."""

    held: dict[str, HeldLease]
    keeper: LeaseKeeper
    _io_pool: Executor
    _wall: Callable[[], float]

    async def release_named(self) -> int:
        """Graceful stop, after the held leases are released: give up what the table still names us on.

        A consistent scan finds the leases owned by this worker that it does not hold: assigned by a
        leader but not adopted yet, or a take whose write landed as its loop was cancelled. Each is
        released, fenced on the counter read; one handed off *to* us (``checkpointOwner`` set) is given
        back to the worker that still serves it. Returns how many were given up; a failure is a warning
        (those leases expire instead)."""
        me = self.config.worker_id
        try:
            scan = await self._call(
                self._io_pool, functools.partial(self._table.list_leases, consistent=True)
            )
        except KclError as exc:
            logger.warning("cannot look for leases still naming this worker; they expire instead: %s", exc)
            return 0
        released = 0
        for lease in scan.leases:
            if lease.lease_owner != me or lease.lease_key in self.held:
                continue
            back_to = lease.checkpoint_owner if lease.checkpoint_owner not in (None, me) else None
            assign = getattr(self._table, "assign", None)
            if back_to is not None and assign is not None:
                write = functools.partial(assign, lease, back_to)
                done = (
                    f"lease {lease.lease_key} handed back to {back_to} (a hand-off to this worker, not begun)"
                )
            else:
                write = functools.partial(self._table.release, lease)
                done = f"lease {lease.lease_key} released (assigned to this worker, not started)"
            try:
                await self._call(self._io_pool, write)
            except LeaseConflict:
                continue  # moved meanwhile: no longer ours
            except KclError as exc:
                logger.warning("lease %s not released; it expires instead: %s", lease.lease_key, exc)
                continue
            logger.info("%s", done)
            released += 1
        return released

    async def keep_for_restart(self, lease_key: str, until_s: float) -> bool:
        """Graceful stop with a restart grace: stop keeping the lease and mark it as waiting for this
        worker until ``until_s`` (epoch seconds), as its last write
        (:mod:`kcl_daemon.core.leases.restart_grace`).

        Renewals stop first; the mark is fenced on the counter held, and after a condition failure or an
        unknown outcome the lease is read again: marked already (our write landed), still ours (a renewal
        in flight landed first: marked again on what was read), or moved on (nothing to keep). Returns
        whether the mark is on the lease; without it the lease simply expires."""
        held = self.held.pop(lease_key, None)
        self.keeper.forget(lease_key)
        me = self.config.worker_id
        mark = getattr(self._table, "mark_restart", None)
        if held is None or mark is None:
            return False
        lease: Lease | None = held.lease
        deadline = self._clock.monotonic() + LEASE_IO.deadline_s
        for _ in range(3):
            if lease is None or lease.lease_owner != me or lease.checkpoint_owner is not None:
                logger.info("lease %s not kept for the restart: it is no longer this worker's", lease_key)
                return False
            what = f"restart mark of lease {lease_key}"
            try:
                await self._bounded(self._io_pool, functools.partial(mark, lease, until_s), deadline, what)
            except LeaseConflict:
                pass
            except KclError as exc:
                logger.info("%s: %s; reading it again", what, exc)
            else:
                logger.info("lease %s kept for this worker's restart grace", lease_key)
                return True
            read = functools.partial(self._table.get_lease, lease_key, consistent=True)
            try:
                lease = await self._bounded(self._io_pool, read, deadline, f"re-read of lease {lease_key}")
            except (KclError, CorruptLeaseItem):
                break
            landed = lease is not None and restart_grace.graced_leases([lease], self._wall()).get(lease_key)
            if landed == me:  # an earlier attempt of ours was applied after all
                logger.info("lease %s kept for this worker's restart grace", lease_key)
                return True
        logger.warning(
            "lease %s: its restart grace could not be marked; it expires (only the leader's reading of "
            "this worker's RESTARTING state keeps it)",
            lease_key,
        )
        return False
