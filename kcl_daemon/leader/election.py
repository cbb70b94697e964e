"""Leader election over the ``Leader`` lock item, compatible with Java KCL 3.x (contract §3.6).

The shell around :mod:`kcl_daemon.core.assignment.leader_lock`. While not leader, the lock is read every
``check_s`` (each read feeds the observation that decides when a lock is stale) and taken when the rules
allow; while leader, it is heartbeated every ``heartbeat_s`` with a new ``recordVersionNumber``,
conditionally on the one we wrote. A heartbeat that fails its condition means someone took the lock:
we stop leading at once. One whose outcome is unknown keeps us leader only until the lock could have been
stolen (:func:`still_leader`), so a leader that cannot write steps down on its own.

Our lock duration is the failover time (Java's is 120 s): a dead kcl-daemon leader is replaced within
``failover + check_s`` (``check_s`` = a quarter of it, at most 2 s). We judge a lock by the
``leaseDuration`` in its item, so a Java leader gets its 120 s; Java followers take about two minutes to
replace a dead leader of either kind (their lock client's own timing).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

from kcl_daemon.clock import Clock
from kcl_daemon.core.assignment import leader_lock as rules
from kcl_daemon.errors import KclError, LeaseConflict

logger = logging.getLogger(__name__)
T = TypeVar("T")


class LeaderElection:
    def __init__(
        self,
        store: Any,  # CoordinatorStore (get/put/update/delete) or a fake with the same methods
        worker_id: str,
        clock: Clock,
        pool: Executor,
        *,
        duration_s: float,
        heartbeat_s: float | None = None,
        check_s: float | None = None,
        new_version: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.worker_id = worker_id
        self.duration_s = duration_s
        self.heartbeat_s = heartbeat_s if heartbeat_s is not None else duration_s / 4
        self.check_s = check_s if check_s is not None else min(2.0, duration_s / 4)
        self._store = store
        self._clock = clock
        self._pool = pool
        self._new_version = new_version
        self._held: rules.Held | None = None
        self._seen: rules.Observation | None = None
        self._was_leader = False
        #: called with True when this worker becomes leader, False when it stops
        self.on_change: list[Callable[[bool], None]] = []
        #: set whenever leadership is gained (the assignment loop runs at once)
        self.gained = asyncio.Event()
        self.leader_seen: str | None = None

    def is_leader(self) -> bool:
        leading = rules.still_leader(self._held, self._clock.monotonic())
        if not leading and self._held is not None:
            logger.warning("leader lock not heartbeated in time: stepping down")
            self._held = None
        self._notify(leading)
        return leading

    def _notify(self, leading: bool) -> None:
        if leading != self._was_leader:
            self._was_leader = leading
            logger.info("worker %s %s leader", self.worker_id, "is now" if leading else "is no longer")
            if leading:
                self.gained.set()
            for listener in self.on_change:
                listener(leading)

    async def _call(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    async def check_once(self) -> bool:
        """One election step; returns whether we lead afterwards."""
        if self.is_leader():
            await self._heartbeat()
            return self.is_leader()
        try:
            item = await self._call(lambda: self._store.get(rules.LEADER_KEY))
            lock = rules.parse_lock(item)
        except rules.LockItemError as exc:
            logger.warning("cannot read the leader lock: %s", exc)
            return False
        now = self._clock.monotonic()
        self._seen = rules.observe(self._seen, lock, now)
        self.leader_seen = None if lock is None or lock.released else lock.owner
        plan = rules.plan(lock, self._seen, self.worker_id, self._held, now)
        if plan.action is rules.Action.WAIT:
            return False
        if plan.action is rules.Action.HEARTBEAT:
            await self._heartbeat()
            return self.is_leader()
        rvn = self._new_version()
        attributes = rules.lock_attributes(self.worker_id, rvn, self.duration_s)
        sent_at = self._clock.monotonic()
        try:
            if plan.action is rules.Action.ACQUIRE_ABSENT:
                await self._call(lambda: self._put(attributes, require_absent=True))
            elif plan.action is rules.Action.ACQUIRE_RELEASED:
                await self._call(lambda: self._put(attributes, require_equal={rules.IS_RELEASED: "1"}))
            else:
                expected = {rules.RECORD_VERSION: plan.expected_version}
                await self._call(lambda: self._put(attributes, require_equal=expected))
        except LeaseConflict:
            logger.debug("leader lock: another worker was first (%s)", plan.reason)
            return False
        except KclError as exc:
            logger.warning("leader lock: %s failed: %s", plan.action.value, exc)
            return False
        logger.info("worker %s took the leader lock: %s", self.worker_id, plan.reason)
        self._held = rules.Held(rvn, sent_at, self.duration_s)
        self.leader_seen = self.worker_id
        return self.is_leader()

    def _put(self, attributes: dict[str, str], **condition: Any) -> None:
        self._store.put(rules.LEADER_KEY, attributes, entity_type=rules.LEADER_ENTITY_TYPE, **condition)

    async def _heartbeat(self) -> None:
        held = self._held
        if held is None:
            return
        rvn = self._new_version()
        sets = {rules.LEASE_DURATION: str(round(self.duration_s * 1000)), rules.RECORD_VERSION: rvn}
        expected = {rules.RECORD_VERSION: held.record_version, rules.OWNER_NAME: self.worker_id}
        sent_at = self._clock.monotonic()
        try:
            await self._call(lambda: self._store.update(rules.LEADER_KEY, sets, require_equal=expected))
        except LeaseConflict:
            logger.warning("leader lock was taken by another worker: stepping down")
            self._held = None
            self._notify(False)
            return
        except KclError as exc:
            logger.warning("leader lock heartbeat failed (still leader until it could be stolen): %s", exc)
            return
        if self._held is held:
            self._held = rules.Held(rvn, sent_at, self.duration_s)

    async def release(self, why: str) -> None:
        """Give leadership up (shutdown, or the assignment loop keeps failing): delete our lock item."""
        held, self._held = self._held, None
        self._notify(False)
        if held is None:
            return
        expected = {rules.RECORD_VERSION: held.record_version, rules.OWNER_NAME: self.worker_id}
        try:
            await self._call(lambda: self._store.delete(rules.LEADER_KEY, require_equal=expected))
            logger.info("leader lock released: %s", why)
        except KclError as exc:
            logger.warning("releasing the leader lock failed (it expires instead): %s", exc)

    async def run(self) -> None:
        while True:
            leading = await self.check_once()
            await self._clock.sleep(self.heartbeat_s if leading else self.check_s)
