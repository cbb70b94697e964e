"""A 3.x follower's fallback taker: the shell around :mod:`kcl_daemon.core.leader.fallback`.

The follower's assignment loop scans the lease table every :func:`watch_interval_s` (and every expiry
interval while it suspects the leader) and hands each scan here, with its counter observations. When a
lease has stood still past ``failover + grace`` without being reassigned, the worker-metrics items are
read (only then: the fleet's kcl-daemon workers and any RESTARTING grace), the pure rule picks this
worker's share, and the coordinator takes it, fenced on the counter seen (a take that loses the race
to the leader's assign, or to another follower, is skipped). Returns when to scan next: the watch
interval, sooner when a lease that stands still comes due, and a grace later while candidates are left
for the other followers (one of them may be dead).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from typing import Any, TypeVar

from kcl_daemon.clock import Clock
from kcl_daemon.core.leader.decider import WorkerView
from kcl_daemon.core.leader.fallback import (
    FallbackConfig,
    FallbackPlan,
    Watch,
    candidates,
    next_due,
    plan_fallback,
    watch_interval_s,
)
from kcl_daemon.core.leader.passes import with_lease_graces
from kcl_daemon.core.leader.worker_metrics import WorkerMetricStats
from kcl_daemon.core.leases.expiry import LeaseObservations
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.restart_grace import restarting_owners
from kcl_daemon.core.leases.taker import PlannedTake, TakeKind

logger = logging.getLogger(__name__)
T = TypeVar("T")


class FallbackTaker:
    def __init__(
        self,
        worker_id: str,
        config: FallbackConfig,
        metrics: Any,  # FleetMetrics / WorkerMetricsTable: scan() -> (entries, problems)
        views: Callable[[Sequence[WorkerMetricStats], float], list[WorkerView]],
        take: Callable[[Sequence[PlannedTake]], Awaitable[list[Lease]]],
        held: Callable[[], int],
        clock: Clock,
        pool: Executor,
        *,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.worker_id = worker_id
        self.config = config
        self.watch_s = watch_interval_s(config.failover_s)
        self.last: FallbackPlan | None = None
        self._metrics = metrics
        self._views = views
        self._take = take
        self._held = held
        self._clock = clock
        self._pool = pool
        self._wall = wall
        self._watch = Watch()

    async def _call(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    async def after_scan(
        self, leases: Sequence[Lease], observations: LeaseObservations, now: float, *, leader_suspect: bool
    ) -> float:
        """Take what the rule gives this worker after a follower's scan at ``now`` (``observations``
        include it; ``leader_suspect``: unowned leases too); returns when to scan next (monotonic)."""
        self._watch = self._watch.see(leases, now)
        me, config = self.worker_id, self.config
        wake = now + self.watch_s
        due = next_due(leases, observations, self._watch, me, now, config, leader_suspect=leader_suspect)
        if due is not None:
            wake = min(wake, due)
        found = candidates(leases, observations, self._watch, me, now, config, leader_suspect=leader_suspect)
        if not found:
            return wake
        entries, _ = await self._call(self._metrics.scan)
        at = self._clock.monotonic()
        ours = {stats.worker_id for stats in entries if stats.extra is not None}
        wall = self._wall()
        offset = wall - at
        # a worker whose lease marks its restart grace is RESTARTING whatever its metrics item says: its
        # leases wait for it (kcl_daemon.core.leases.restart_grace), here as at the leader
        graces = {worker: until - offset for worker, until in restarting_owners(leases, wall).items()}
        views = with_lease_graces(self._views(entries, at), graces)
        plan = plan_fallback(found, me, self._held(), views, ours, at, config, wall_offset=offset)
        self.last = plan
        taken: list[Lease] = []
        if plan.takes:
            logger.info("fallback: %s", plan.summary)
            taken = await self._take([PlannedTake(c.lease, TakeKind.FALLBACK, c.reason) for c in plan.takes])
        if plan.share > 0 and plan.candidates > len(
            taken
        ):  # left to the other followers: look again a grace later
            wake = min(wake, self._clock.monotonic() + max(config.grace_s, 0.1))
        return wake
