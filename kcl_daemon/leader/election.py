"""Leader election over the ``Leader`` lock item, compatible with Java KCL 3.x (contract §3.6).

The shell around :mod:`kcl_daemon.core.leader.leader_lock`. While not leader, the lock is read every
``check_s`` (each read feeds the observation that decides when a lock is stale) and taken when the rules
allow; while leader, it is heartbeated every ``heartbeat_s`` with a new ``recordVersionNumber``,
conditionally on the one we wrote. A heartbeat that fails its condition means someone took the lock:
we stop leading at once. One whose outcome is unknown keeps us leader only until the lock could have been
stolen (:func:`still_leader`), so a leader that cannot write steps down on its own.

Our lock duration is ``dynamoDbLockBasedLeaderLeaseDurationInMillis``, by default the failover time
(Java's is 120 s): a dead kcl-daemon leader is replaced within ``duration + check_s`` (``check_s`` = a
quarter of it, like the heartbeat: each follower's reads are a cost per worker-hour that a shorter check
would multiply). A follower whose last reads show the lock unchanged past a missed heartbeat
*suspects* the leader (:meth:`LeaderElection.leader_suspect`): its assignment loop observes the lease table,
so that if it takes the lock over, the dead leader's leases are due one failover after it first saw them.
We judge a lock by the ``leaseDuration`` in its item, so a Java leader gets
its 120 s; Java followers take about two minutes to replace a dead leader of either kind (their lock
client's own timing). A lock whose record version has not changed for its duration is always taken
over, whoever wrote it and however malformed (contract §9.4).

Where the lock lives follows the table migration (contract §9.2): ``locate`` returns the store that
holds it now. A held lock in the wrong place no longer makes us leader; it is released and the lock is
taken where it now lives. After every acquisition ``confirm`` re-reads the migration status and returns
where the lock belongs; if that is not where we took it, we give it back at once without leading
(:func:`kcl_daemon.core.leader.table_migration.after_acquire`), so the move of the lock never
leaves two leaders.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import TYPE_CHECKING, TypeVar

from kcl_daemon.clock import Clock
from kcl_daemon.core.leader import leader_lock as rules
from kcl_daemon.errors import KclError, LeaseConflict
from kcl_daemon.retry import LEASE_IO

if TYPE_CHECKING:
    from kcl_daemon.leader.ports import LockStore

logger = logging.getLogger(__name__)
T = TypeVar("T")


class LeaderElection:
    def __init__(
        self,
        store: LockStore,  # a CoordinatorStore, or a fake with the same methods
        worker_id: str,
        clock: Clock,
        pool: Executor,
        *,
        duration_s: float,
        heartbeat_s: float | None = None,
        check_s: float | None = None,
        new_version: Callable[[], str] = lambda: str(uuid.uuid4()),
        locate: Callable[[], LockStore] | None = None,
        confirm: Callable[[], Awaitable[LockStore]] | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.duration_s = duration_s
        self.heartbeat_s = heartbeat_s if heartbeat_s is not None else rules.check_period_s(duration_s)
        self.check_s = check_s if check_s is not None else rules.check_period_s(duration_s)
        self._store = store
        self._locate = locate
        self._confirm = confirm
        self._clock = clock
        self._pool = pool
        self._new_version = new_version
        self._held: rules.Held | None = None
        #: heartbeats of the held lock whose outcome is unknown (they may have applied)
        self._unconfirmed: list[rules.Held] = []
        #: the store and the lock of our last acquisition, if its outcome is unknown
        self._acquiring: tuple[LockStore, rules.Held] | None = None
        #: the store the held lock is in
        self._held_in: LockStore | None = None
        self._seen: rules.Observation | None = None
        self._seen_in: LockStore | None = None
        self._seen_lock: rules.LockItem | None = None
        self._was_leader = False
        #: called with True when this worker becomes leader, False when it stops
        self.on_change: list[Callable[[bool], None]] = []
        #: set whenever leadership is gained (the assignment loop runs at once)
        self.gained = asyncio.Event()
        self.leader_seen: str | None = None
        #: set while this worker completes the table migration: it holds the legacy lock (heartbeated, the
        #: transaction's fence) but does not lead, so leadership ends before the lock can move
        self.suspended = False

    @property
    def store(self) -> LockStore:
        """Where the lock lives now."""
        return self._locate() if self._locate is not None else self._store

    def is_leader(self) -> bool:
        leading = rules.still_leader(self._held, self._clock.monotonic())
        if not leading and self._held is not None:
            logger.warning("leader lock not heartbeated in time: stepping down")
            self._held = None
        leading = leading and self._held_in is self.store and not self.suspended
        self._notify(leading)
        return leading

    def leader_suspect(self) -> bool:
        """A follower that should observe the lease table: the lock it last read missed a heartbeat,
        or there is none (see :func:`~kcl_daemon.core.leader.leader_lock.leader_suspect`)."""
        if self.is_leader():
            return False
        return rules.leader_suspect(self._seen_lock, self._seen, self._clock.monotonic())

    def suspend(self, on: bool) -> None:
        """Stop (or resume) leading without giving the lock up (see :attr:`suspended`)."""
        self.suspended = on
        self.is_leader()

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
        store = self.store
        if self._held is not None and self._held_in is not store:
            await self.release("the leader lock has moved to another table")
        if self._seen_in is not store:
            self._seen, self._seen_in = None, store  # a different item: observe it afresh
            self._seen_lock = None
        try:
            item = await self._call(lambda: store.get(rules.LEADER_KEY))
        except KclError as exc:
            logger.warning("cannot read the leader lock: %s", exc)
            return False
        lock = rules.parse_lock(item)
        now = self._clock.monotonic()
        self._seen = rules.observe(self._seen, lock, now)
        self._seen_lock = lock
        if lock is not None and lock.problem and self._seen.since == now:
            logger.warning("%s: it is taken over once unchanged for %.0f s", lock.problem, lock.duration_s)
        self.leader_seen = None if lock is None or lock.released else lock.owner
        acquiring, self._acquiring = self._acquiring, None
        if self._held is None and acquiring is not None and acquiring[0] is store:
            landed = rules.heartbeat_landed(lock, self.worker_id, [acquiring[1]])
            if landed is not None:  # our last acquisition applied although it was answered with an error
                return await self._took(store, landed, "an acquisition answered with an error had applied")
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
                await self._call(lambda: self._put(store, attributes, require_absent=True))
            elif plan.action is rules.Action.ACQUIRE_RELEASED:
                released = {rules.IS_RELEASED: "1"}
                await self._call(lambda: self._put(store, attributes, require_equal=released))
            elif plan.expected_version is None:  # a malformed lock without a record version
                await self._call(
                    lambda: self._put(store, attributes, require_missing=(rules.RECORD_VERSION,))
                )
            else:
                expected = {rules.RECORD_VERSION: plan.expected_version}
                await self._call(lambda: self._put(store, attributes, require_equal=expected))
        except LeaseConflict:
            logger.debug("leader lock: another worker was first (%s)", plan.reason)
            return False
        except KclError as exc:
            logger.warning("leader lock: %s failed: %s", plan.action.value, exc)
            if exc.retriable:  # it may have applied: the next read tells
                self._acquiring = (store, rules.Held(rvn, sent_at, self.duration_s))
            return False
        return await self._took(store, rules.Held(rvn, sent_at, self.duration_s), plan.reason)

    async def _took(self, store: LockStore, taken: rules.Held, reason: str) -> bool:
        """The lock was written by us: lead once confirmed where it belongs (else give it back)."""
        if self._confirm is not None:  # not leader until confirmed: is_leader() stays False meanwhile
            try:
                belongs = await self._confirm()
            except KclError as exc:
                belongs = None
                logger.warning("cannot confirm where the leader lock belongs (%s): giving it back", exc)
            if belongs is not store:
                await self._delete(store, taken, "the table migration moved the lock meanwhile")
                return False
        self._held, self._held_in = taken, store
        logger.info("worker %s took the leader lock: %s", self.worker_id, reason)
        self.leader_seen = self.worker_id
        return self.is_leader()

    def _put(
        self,
        store: LockStore,
        attributes: dict[str, str],
        *,
        require_absent: bool = False,
        require_equal: dict[str, str] | None = None,
        require_missing: tuple[str, ...] = (),
    ) -> None:
        store.put(
            rules.LEADER_KEY,
            attributes,
            require_absent=require_absent,
            require_equal=require_equal,
            require_missing=require_missing,
            entity_type=rules.LEADER_ENTITY_TYPE,
        )

    async def _heartbeat(self, *, again: bool = True) -> None:
        held, store = self._held, self._held_in
        if held is None or store is None:
            return
        rvn = self._new_version()
        sets = {rules.LEASE_DURATION: str(round(self.duration_s * 1000)), rules.RECORD_VERSION: rvn}
        expected = {rules.RECORD_VERSION: held.record_version, rules.OWNER_NAME: self.worker_id}
        sent_at = self._clock.monotonic()
        try:
            await self._call(lambda: store.update(rules.LEADER_KEY, sets, require_equal=expected))
        except LeaseConflict:
            landed = await self._landed(store)
            if landed is not None and self._held is held:
                # an earlier heartbeat applied although it was answered with an error: still ours
                logger.info("leader lock: an earlier heartbeat had applied; still leader")
                self._held, self._unconfirmed = landed, []
                if again:
                    await self._heartbeat(again=False)
                return
            logger.warning("leader lock was taken by another worker: stepping down")
            self._held, self._unconfirmed = None, []
            self._notify(False)
            return
        except KclError as exc:
            if exc.retriable:  # it may have applied (a timeout, a 500 after the write)
                self._unconfirmed.append(rules.Held(rvn, sent_at, self.duration_s))
            logger.warning("leader lock heartbeat failed (still leader until it could be stolen): %s", exc)
            return
        if self._held is held:
            self._held, self._unconfirmed = rules.Held(rvn, sent_at, self.duration_s), []

    async def _landed(self, store: LockStore) -> rules.Held | None:
        """After a heartbeat's condition failed: the unconfirmed heartbeat the lock shows, if any."""
        if not self._unconfirmed:
            return None
        try:
            item = await self._call(lambda: store.get(rules.LEADER_KEY))
        except KclError as exc:
            logger.warning("cannot read the leader lock after a failed heartbeat: %s", exc)
            return None
        return rules.heartbeat_landed(rules.parse_lock(item), self.worker_id, self._unconfirmed)

    async def release(self, why: str) -> None:
        """Give leadership up (shutdown, or the assignment loop keeps failing): delete our lock item."""
        held, self._held = self._held, None
        store, self._held_in = self._held_in, None
        self._notify(False)
        if held is not None and store is not None:
            await self._delete(store, held, why)
        self._unconfirmed = []

    async def _delete(self, store: LockStore, held: rules.Held, why: str, *, again: bool = True) -> None:
        """Delete our lock item on its record version, under ``LEASE_IO``. An attempt answered with an
        error may have applied: a conflict after one is reconciled by reading the lock before saying
        the delete failed."""
        expected = {rules.RECORD_VERSION: held.record_version, rules.OWNER_NAME: self.worker_id}
        unknown = False

        async def attempt() -> None:
            nonlocal unknown
            try:
                await self._call(lambda: store.delete(rules.LEADER_KEY, require_equal=expected))
            except KclError as exc:
                unknown = unknown or (exc.retriable and not isinstance(exc, LeaseConflict))
                raise

        try:
            await LEASE_IO.run_async(attempt, sleep=self._clock.sleep, monotonic=self._clock.monotonic)
            logger.info("leader lock released: %s", why)
        except LeaseConflict as exc:
            if unknown and await self._gone(store, held):
                logger.info("leader lock released: %s (an attempt answered with an error had applied)", why)
                return
            landed = await self._landed(store) if again else None
            if landed is not None:  # a heartbeat answered with an error had applied: delete that version
                await self._delete(store, landed, why, again=False)
                return
            logger.warning("releasing the leader lock failed (it expires instead): %s", exc)
        except KclError as exc:
            logger.warning("releasing the leader lock failed (it expires instead): %s", exc)

    async def _gone(self, store: LockStore, held: rules.Held) -> bool:
        """Whether the lock no longer stands as ``held`` (absent, or another version or owner)."""
        try:
            lock = rules.parse_lock(await self._call(lambda: store.get(rules.LEADER_KEY)))
        except KclError as exc:
            logger.warning("cannot read the leader lock after releasing it: %s", exc)
            return False
        return lock is None or lock.owner != self.worker_id or lock.record_version != held.record_version

    async def run(self) -> None:
        while True:
            leading = await self.check_once()
            await self._clock.sleep(self.heartbeat_s if leading else self.check_s)
