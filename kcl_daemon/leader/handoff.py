"""Graceful lease hand-off, the current owner's side (contract §5.3 steps 2-4).

The leader marks a planned move by setting ``leaseOwner`` to the new worker and ``checkpointOwner`` to
us, without touching the counter, so our renewals keep succeeding and return the marked item. Every
``check_s`` this watcher looks at the leases we hold; for each one marked that way it:

1. asks the shard's task to shut down: the child gets ``shutdownRequested`` and may checkpoint (a task
   whose consumer never started - still waiting on its parents - just stops, KCL#1743/#1765);
2. waits for the task to finish, at most ``timeout_s`` (``gracefulLeaseHandoffTimeoutMillis``);
3. stops renewing the lease and completes the transfer with *assign* (conditional on ``leaseOwner`` =
   the new worker and ``checkpointOwner`` = us; ``REMOVE checkpointOwner``, counter + 1), which lets the
   new owner's discovery adopt it and start from the checkpoint just written;
4. if the task was still running (forced hand-off), it is told ``leaseLost`` after the transfer.

A transfer that fails leaves the lease to the leader, which reassigns a hand-off still pending after
``timeout + failover``; a stopping worker clears ``checkpointOwner`` when it releases (KCL#1718).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import Executor

from kcl_daemon.clock import Clock, sleep_unless_set
from kcl_daemon.errors import KclError, LeaseConflict
from kcl_daemon.leader.ports import HandoffTable
from kcl_daemon.leases.coordinator import LeaseCoordinator

logger = logging.getLogger(__name__)

#: key -> the task running that shard (after asking it to shut down), or None if none runs
StopShard = Callable[[str], "asyncio.Task[None] | None"]


class HandoffWatcher:
    def __init__(
        self,
        table: HandoffTable,
        coordinator: LeaseCoordinator,
        stop_shard: StopShard,
        clock: Clock,
        pool: Executor,
        *,
        timeout_s: float = 30.0,
        check_s: float = 0.5,
    ) -> None:
        self.timeout_s = timeout_s
        self.check_s = check_s
        self.completed: list[tuple[str, str, bool]] = []  # (key, new owner, forced)
        self._table = table
        self._coordinator = coordinator
        self._stop_shard = stop_shard
        self._clock = clock
        self._pool = pool
        self._running: dict[str, asyncio.Task[None]] = {}

    def pending(self) -> list[str]:
        me = self._coordinator.config.worker_id
        return [
            key
            for key, held in self._coordinator.held.items()
            if held.lease.checkpoint_owner == me and held.lease.lease_owner not in (None, me)
        ]

    def check_once(self) -> None:
        for key in self.pending():
            if key not in self._running:
                self._running[key] = asyncio.create_task(self._hand_off(key), name=f"handoff-{key}")

    async def _hand_off(self, key: str) -> None:
        try:
            await self.hand_off_now(key)
        except Exception:
            logger.exception("hand-off of lease %s failed unexpectedly", key)
        finally:
            self._running.pop(key, None)

    async def hand_off_now(self, key: str) -> None:
        lease = self._coordinator.held_lease(key)
        if lease is None or lease.lease_owner is None:
            return
        new_owner = lease.lease_owner
        logger.info("lease %s: handing off to %s (shutdownRequested to the processor)", key, new_owner)
        runner = self._stop_shard(key)
        forced = False
        if runner is not None and not runner.done():
            finished = asyncio.Event()
            runner.add_done_callback(lambda _: finished.set())
            forced = not await sleep_unless_set(self._clock, self.timeout_s, finished)
        lease = self._coordinator.held_lease(key)
        if lease is None:
            logger.info("lease %s was lost during its hand-off", key)
            return
        self._coordinator.drop(key, f"handed off to {new_owner}" + (" (forced: timed out)" if forced else ""))
        assign = functools.partial(self._table.assign, lease, new_owner, fence_counter=False)
        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, assign)
        except LeaseConflict as exc:
            logger.info("lease %s: hand-off already resolved by the leader: %s", key, exc)
        except KclError as exc:
            logger.warning("lease %s: completing the hand-off failed (the leader resolves it): %s", key, exc)
        else:
            logger.info("lease %s handed off to %s%s", key, new_owner, " (forced)" if forced else "")
            self.completed.append((key, new_owner, forced))
        if forced:
            for listener in self._coordinator.listeners.lost:
                listener(key)

    async def run(self) -> None:
        try:
            while True:
                self.check_once()
                await self._clock.sleep(self.check_s)
        finally:
            for task in self._running.values():
                task.cancel()
