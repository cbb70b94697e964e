"""Deletes finished parent leases once their children have started (contract §6.5; Java's
``LeaseCleanupManager``).

The shell around :func:`kcl_daemon.core.shards.cleanup.parent_lease_deletable`. A worker enqueues a lease when
it finishes the shard (or takes a lease that is already at SHARD_END); every ``interval_s`` each queued
lease is re-read with its children and parents and deleted if the decision says so, otherwise it stays
queued; a lease (or a related one) that cannot be decoded is dropped from the queue with a warning.
When the lease does not know its children, ``child_shard_lookup`` asks the service and the
answer is stored on the lease; a lookup that says the shard no longer exists deletes the lease
unconditionally (the garbage path). Failures keep the entry queued; nothing here raises.

Before each deletion ``before_delete`` is told the lease key (the scheduler passes the coordinator's
``forget_deleted``): a lease this worker still holds, its shard complete, leaves the keeper quietly
first, so no renewal of the deleted item is attempted and the deletion is not reported as a loss.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Protocol, TypeVar

from kcl_daemon.clock import Clock
from kcl_daemon.core.leases.lease import Lease, lease_key_for
from kcl_daemon.core.leases.lease_codec import CorruptLeaseItem
from kcl_daemon.core.shards.cleanup import CleanupDecision, CleanupOutcome, parent_lease_deletable
from kcl_daemon.errors import KclError

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: lease key (the shard id, or ``account:stream:epoch:shardId`` for several streams) -> the shard's
#: child shard ids, or None when the shard (or stream) no longer exists.
ChildShardLookup = Callable[[str], Sequence[str] | None]


class CleanupTableOps(Protocol):
    def get_lease(self, lease_key: str, *, consistent: bool = False) -> Lease | None: ...

    def update_child_shard_ids(self, lease_key: str, child_shard_ids: Iterable[str]) -> bool: ...

    def delete(self, lease_key: str) -> None: ...


class LeaseCleaner:
    def __init__(
        self,
        table: CleanupTableOps,
        clock: Clock,
        *,
        interval_s: float = 60.0,
        delete_completed: bool = True,
        child_shard_lookup: ChildShardLookup | None = None,
        pool: Executor | None = None,
        before_delete: Callable[[str], object] | None = None,
    ) -> None:
        self.queue: dict[str, None] = {}  # insertion-ordered set of lease keys
        self._before_delete = before_delete
        self.deleted: list[str] = []
        self._table = table
        self._clock = clock
        self._interval_s = interval_s
        self._delete_completed = delete_completed
        self._lookup = child_shard_lookup
        self._pool: Executor = pool or ThreadPoolExecutor(2, thread_name_prefix="lease-cleanup")

    def enqueue(self, lease_key: str) -> None:
        self.queue[lease_key] = None

    async def _call(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    async def _get(self, lease_key: str) -> Lease | None:
        return await self._call(functools.partial(self._table.get_lease, lease_key, consistent=True))

    async def _delete(self, lease_key: str, why: str) -> None:
        if self._before_delete is not None:
            self._before_delete(lease_key)
        await self._call(functools.partial(self._table.delete, lease_key))
        self.queue.pop(lease_key, None)
        self.deleted.append(lease_key)
        logger.info("lease %s deleted: %s", lease_key, why)

    async def _clean(self, lease_key: str) -> CleanupDecision | None:
        lease = await self._get(lease_key)
        children: Sequence[str] | None = None
        if lease is not None and not lease.child_shard_ids and self._lookup is not None:
            children = await self._call(functools.partial(self._lookup, lease.lease_key))
            if children is None:
                await self._delete(lease_key, "its shard no longer exists")
                return None
            if children:
                await self._call(functools.partial(self._table.update_child_shard_ids, lease_key, children))
        if lease is not None and not self._delete_completed:
            return CleanupDecision(CleanupOutcome.KEEP, "cleanupLeasesUponShardCompletion is false")
        related: list[Lease] = []
        if lease is not None:
            shard_ids = [*(children or lease.child_shard_ids), *lease.parent_shard_ids]
            for shard_id in shard_ids:
                found = await self._get(lease_key_for(shard_id, lease.stream))
                if found is not None:
                    related.append(found)
        decision = parent_lease_deletable(lease, related, child_shard_ids=children or None)
        if decision.outcome is CleanupOutcome.ALREADY_GONE:
            self.queue.pop(lease_key, None)
        elif decision.deletable:
            await self._delete(lease_key, decision.reason)
        else:
            logger.debug("lease %s", decision.reason)
        return decision

    async def clean_once(self) -> dict[str, CleanupDecision | None]:
        """Look at every queued lease once; returns each one's decision (None: garbage-collected)."""
        decisions: dict[str, CleanupDecision | None] = {}
        for lease_key in list(self.queue):
            try:
                decisions[lease_key] = await self._clean(lease_key)
            except KclError as exc:
                logger.warning("cleaning up lease %s failed, will retry: %s", lease_key, exc)
            except CorruptLeaseItem as exc:
                self.queue.pop(lease_key, None)
                logger.warning("not cleaning up lease %s: %s", lease_key, exc)
        return decisions

    async def run(self) -> None:
        while True:
            await self._clock.sleep(self._interval_s)
            await self.clean_once()
