"""Lease discovery (contract §5.1): each worker finds the leases the leader assigned to it through the GSI.

Every ``interval_s`` the ``LeaseOwnerToLeaseKeyIndex`` is queried for ``leaseOwner = me``; the keys not
held yet are read (consistently, since the GSI lags; one BatchGetItem per 100 keys) and each is adopted
only if the item really names this worker as owner and carries no ``checkpointOwner`` (a hand-off to us
is still in progress: the old owner must checkpoint first; a worker restarting with leases stuck that
way leaves them to the leader, KCL#1729). No scan: in 3.x mode a worker reads only its own leases. Renewing
per worker (``leaseRenewal = PER_WORKER``), nothing is adopted before this worker's first heartbeat is
confirmed (the others would see an owner without one).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from concurrent.futures import Executor

from kcl_daemon.clock import Clock, sleep_unless_set
from kcl_daemon.core.leases.lease_codec import CorruptLeaseItem
from kcl_daemon.errors import KclError
from kcl_daemon.leader.ports import DiscoveryTable
from kcl_daemon.leases.coordinator import LeaseCoordinator

logger = logging.getLogger(__name__)


class LeaseDiscovery:
    def __init__(
        self,
        table: DiscoveryTable,
        coordinator: LeaseCoordinator,
        clock: Clock,
        pool: Executor,
        *,
        interval_s: float,
    ) -> None:
        self.interval_s = interval_s
        self._table = table
        self._coordinator = coordinator
        self._clock = clock
        self._pool = pool
        self.wake = asyncio.Event()

    async def discover_once(self) -> list[str]:
        """Adopt what the leader assigned to us; returns the adopted keys. The keys not held yet are read
        in one BatchGetItem per 100 (a worker starting with 256 leases made 256 GetItem calls in a row)."""
        me = self._coordinator.config.worker_id
        loop = asyncio.get_running_loop()
        renewal = self._coordinator.renewal
        # per worker: no lease before a heartbeat
        if (
            renewal is not None
            and not renewal.ready()
            and not await loop.run_in_executor(self._pool, renewal.beat_now)
        ):
            return []
        keys = await loop.run_in_executor(self._pool, self._table.lease_keys_owned_by, me)
        new = [key for key in keys if key not in self._coordinator.held]
        if not new:
            return []
        read = functools.partial(self._table.get_leases, new, consistent=True)
        found = await loop.run_in_executor(self._pool, read)
        adopted = []
        for key in new:
            lease = found.get(key)
            if isinstance(lease, CorruptLeaseItem):
                logger.warning("not adopting lease %s: %s", key, lease)
                continue
            if lease is None or lease.lease_owner != me:
                continue  # the GSI lagged behind a move
            if lease.checkpoint_owner is not None:
                logger.debug("lease %s: hand-off from %s still pending", key, lease.checkpoint_owner)
                continue
            if self._coordinator.adopt(lease):
                adopted.append(key)
        return adopted

    async def run(self) -> None:
        while True:
            self.wake.clear()
            try:
                await self.discover_once()
            except KclError as exc:
                logger.warning("lease discovery failed, will retry: %s", exc)
            await sleep_unless_set(self._clock, self.interval_s, self.wake)
