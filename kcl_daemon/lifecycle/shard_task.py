"""One held lease from start to finish: wait on the parents, run the consumer, hand over at shard end.

Lifecycle (contract §6.4, Java ``ShardConsumer`` task chain):

1. waiting on parents: while a parent lease exists that is not at SHARD_END, re-check every
   ``parent_poll_s`` (no child process runs meanwhile);
2. a lease already at SHARD_END starts no child: it goes to cleanup;
3. otherwise the :class:`ShardConsumer` runs (initializing -> processing -> shutting down). When the
   shard's records run out, :meth:`ShardTask.before_shard_end` creates the child leases and records
   ``childShardIds`` before the child hears ``shardEnded``;
4. a finished shard's lease is queued for cleanup, which deletes it once the children have started.
   A shard that Kinesis says is not in the stream (ResourceNotFound) is *not* finished: its lease is
   left as it is (a warning says so), unlike Java's SHARD_END checkpoint (contract §6.6).

Lease loss and shutdown requests arrive as signals; before the consumer exists they cancel the wait.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from random import Random
from typing import Protocol, TypeVar

from kcl_daemon.clock import Clock, sleep_unless_set
from kcl_daemon.core.leases.lease import MAX_HASH_KEY, Lease, lease_key_for
from kcl_daemon.core.lifecycle.states import ShutdownReason
from kcl_daemon.core.shards.graph import (
    Shard,
    ShardEndAction,
    child_leases_at_shard_end,
    parents_block,
)
from kcl_daemon.errors import KclError, LeaseConflict
from kcl_daemon.lifecycle.checkpoint_store import CheckpointWriter, LeaseCheckpointStore, retry_in_place
from kcl_daemon.lifecycle.ports import ChildLauncher
from kcl_daemon.lifecycle.shard_consumer import ConsumerSettings, ShardConsumer, ShardOutcome
from kcl_daemon.log_context import shard_id_var
from kcl_daemon.metrics.observer import ShardObserver, no_shard_observer
from kcl_daemon.retrieval.prefetch import PrefetchingSource
from kcl_daemon.retrieval.source import ShardRecordSource
from kcl_daemon.retry import SHARD_END

logger = logging.getLogger(__name__)
T = TypeVar("T")


class LeaseReads(Protocol):
    """Synchronous lease-table calls the task makes (run on the worker's I/O pool)."""

    def get_lease(self, lease_key: str, *, consistent: bool = False) -> Lease | None: ...

    def create_lease(self, lease: Lease) -> bool: ...

    def update_child_shard_ids(self, lease_key: str, child_shard_ids: Iterable[str]) -> bool: ...


class LeaseHolder(CheckpointWriter, Protocol):
    def drop(self, lease_key: str, why: str) -> None: ...

    def may_deliver(self, lease_key: str, expected_batch_s: float) -> bool:
        """The delivery fence: whether a batch may be sent to the lease's child now."""


@dataclass(frozen=True, slots=True)
class ShardTaskContext:
    """What every shard task of one worker shares."""

    coordinator: LeaseHolder
    table: LeaseReads
    io_pool: Executor  # the lease-table reads and creates of all shard tasks
    make_source: Callable[[Shard], ShardRecordSource]  # blocking: runs on io_pool
    launch_child: ChildLauncher
    consumer_settings: ConsumerSettings
    clock: Clock
    enqueue_cleanup: Callable[[str], None]
    parent_poll_s: float = 10.0
    task_backoff_s: float = 0.5
    rng: Random = field(default_factory=Random)  # the 1-in-30 give-up of contract §6.4
    #: multi-stream leases: (shard, serialized stream identity) -> source; blocking, runs on io_pool
    make_stream_source: Callable[[Shard, str], ShardRecordSource] | None = None
    shard_observer: Callable[[str], ShardObserver] = no_shard_observer  # kcl_daemon.metrics


def shard_of(lease: Lease) -> Shard:
    """The shard as far as its lease knows it (old leases carry no hash range: the whole range)."""
    return Shard(
        lease.shard_id,
        starting_hash_key=0 if lease.starting_hash_key is None else lease.starting_hash_key,
        ending_hash_key=MAX_HASH_KEY if lease.ending_hash_key is None else lease.ending_hash_key,
    )


class _Interrupted(Exception):
    """A shard-end write stopped retrying: the lease is gone or a signal came."""


class ShardTask:
    def __init__(self, lease: Lease, context: ShardTaskContext) -> None:
        self.lease = lease
        self.consumer: ShardConsumer | None = None
        self.outcome: ShardOutcome | None = None
        self.waiting_on: tuple[str, ...] = ()
        self._ctx = context
        self._source: PrefetchingSource | None = None
        self._made: ShardRecordSource | None = None
        #: Set when the shard is not in the stream: its lease is left as it is (see README).
        self.left_unfinished: str | None = None
        self._store = LeaseCheckpointStore(context.coordinator, lease.lease_key, clock=context.clock)
        self._stop: asyncio.Event = asyncio.Event()
        self._lost = False
        #: The error that ended this task, if one did (see ``kcl_daemon.lifecycle.shard_failures``).
        self.failure: Exception | None = None

    @property
    def key(self) -> str:
        return self.lease.lease_key

    def lease_lost(self) -> None:
        self._lost = True
        self._stop.set()
        if self.consumer is not None:
            self.consumer.lease_lost()

    def request_shutdown(self) -> None:
        self._stop.set()
        if self.consumer is not None:
            self.consumer.request_shutdown()

    async def _call(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._ctx.io_pool, fn)

    async def _read(self, lease_key: str) -> Lease | None:
        return await self._call(functools.partial(self._ctx.table.get_lease, lease_key, consistent=True))

    async def _wait_for_parents(self) -> bool:
        """True once no parent blocks; False if a signal came first."""
        while not self._stop.is_set():
            parents = [
                await self._read(lease_key_for(p, self.lease.stream)) for p in self.lease.parent_shard_ids
            ]
            block = parents_block(self.lease, [p for p in parents if p is not None])
            self.waiting_on = block.blocking_parents
            if not block.blocked:
                return True
            logger.info("shard %s waits: %s", self.lease.shard_id, block.reason)
            if await sleep_unless_set(self._ctx.clock, self._ctx.parent_poll_s, self._stop):
                break
        return False

    async def run(self) -> ShardOutcome | None:
        shard_id_var.set(self.key)  # the shard id; with several streams, stream:shard (unambiguous)
        try:
            if not await self._wait_for_parents():
                return None
            if self.lease.is_shard_end:
                logger.info(
                    "shard %s: lease is already at SHARD_END; queued for cleanup", self.lease.shard_id
                )
                self._ctx.enqueue_cleanup(self.key)
                return None
            # The factory may ask ListShards for the shard (its ending sequence number), so off the loop.
            stream = self.lease.stream
            if stream is not None and self._ctx.make_stream_source is not None:
                make = functools.partial(self._ctx.make_stream_source, shard_of(self.lease), stream)
            else:
                make = functools.partial(self._ctx.make_source, shard_of(self.lease))
            made = await self._call(make)
            self._made = made
            self._source = PrefetchingSource(made)
            self.consumer = ShardConsumer(
                self.lease.shard_id,
                self._source,
                self._store,
                self._ctx.launch_child,
                self._ctx.consumer_settings,
                clock=self._ctx.clock,
                before_shard_end=self.before_shard_end,
                stream=stream,
                observer=self._ctx.shard_observer(
                    self.key
                ),  # several streams: one series per stream and shard
                may_deliver=functools.partial(self._ctx.coordinator.may_deliver, self.key),
            )
            if self._lost:
                self.consumer.lease_lost()
            elif self._stop.is_set():
                self.consumer.request_shutdown()
            self.outcome = await self.consumer.run()
        except KclError as exc:
            logger.error("shard %s stopped: %s", self.lease.shard_id, exc)  # noqa: TRY400 - expected failure
            self.failure = exc
            return None
        except Exception as exc:  # a bug or an unexpected value: this shard's failure, never the worker's
            logger.exception("shard %s failed unexpectedly", self.lease.shard_id)
            self.failure = exc
            return None
        finally:
            if self._source is not None:
                await self._source.aclose()
        if self.outcome.reason is ShutdownReason.SHARD_END:
            self._ctx.enqueue_cleanup(self.key)
        return self.outcome

    async def _in_place(self, what: str, fn: Callable[[], T]) -> T:
        """A lease-table call at shard end, retried in place (``SHARD_END``) on any lease-table error
        while the lease is held and no signal came; the child is never restarted for it."""
        retrying = SHARD_END.async_retrying(
            sleep=self._ctx.clock.sleep, monotonic=self._ctx.clock.monotonic, retry_if=retry_in_place
        )
        async for attempt in retrying:
            with attempt:
                if self._ctx.coordinator.held_lease(self.key) is None or self._stop.is_set():
                    raise _Interrupted(what)
                try:
                    return await self._call(fn)
                except LeaseConflict:
                    raise
                except KclError as exc:
                    logger.warning(
                        "shard %s: %s failed, retrying in place: %s", self.lease.shard_id, what, exc
                    )
                    raise
        raise AssertionError("unreachable: the retry policy re-raises the last error")  # pragma: no cover

    async def before_shard_end(self) -> bool:
        """contract §6.4 step 1: create the child leases and record ``childShardIds``; False = give up."""
        try:
            return await self._before_shard_end()
        except _Interrupted:
            # A signal (shutdown, hand-off, loss) before the child leases exist: never let the shard
            # checkpoint SHARD_END without them. The child hears leaseLost; the lease's next owner (or
            # this worker after a restart) reads to the shard's end again and creates them.
            return False

    async def _before_shard_end(self) -> bool:
        assert self._source is not None
        missing = getattr(self._made, "not_found", None)
        if missing is not None:
            # Java (contract §6.6) checkpoints SHARD_END here; a lease for a shard that is not in the stream
            # (another stream's lease, a stream re-created under the same name) is better left alone.
            self.left_unfinished = missing
            logger.warning(
                "shard %s is not in the stream (%s): its lease is left as it is, not checkpointed at "
                "SHARD_END; the child gets leaseLost and the lease stays held, unprocessed, until this "
                "worker stops. Delete the lease if the shard is really gone",
                self.lease.shard_id,
                missing,
            )
            return False
        children = self._source.child_shards or ()
        while True:
            held = self._ctx.coordinator.held_lease(self.key)
            if held is None:
                return False
            keys = {lease_key_for(child.shard_id, held.stream) for child in children}
            keys |= {lease_key_for(p, held.stream) for child in children for p in child.parent_shard_ids}
            existing = set()
            for key in sorted(keys):
                read = functools.partial(self._ctx.table.get_lease, key, consistent=True)
                if await self._in_place(f"reading lease {key}", read) is not None:
                    existing.add(key)
            decision = child_leases_at_shard_end(
                held, children, existing_lease_keys=existing, rng=self._ctx.rng
            )
            if decision.action is ShardEndAction.PROCEED:
                break
            if decision.action is ShardEndAction.DROP_LEASE:
                logger.warning("shard %s: %s", self.lease.shard_id, decision.reason)
                self._ctx.coordinator.drop(self.key, decision.reason)
                return False
            logger.info("shard %s: %s", self.lease.shard_id, decision.reason)
            if await sleep_unless_set(self._ctx.clock, self._ctx.task_backoff_s, self._stop):
                return False  # a signal before the child leases exist: see before_shard_end
        table = self._ctx.table
        for lease in decision.leases_to_create:
            create = functools.partial(table.create_lease, lease)
            if await self._in_place(f"creating child lease {lease.lease_key}", create):
                logger.info("shard %s ended: created lease %s", self.lease.shard_id, lease.lease_key)
        child_ids = sorted(decision.child_shard_ids)
        if child_ids:
            update = functools.partial(table.update_child_shard_ids, self.key, child_ids)
            await self._in_place("recording childShardIds", update)
        self._store.child_shard_ids = tuple(child_ids)
        return True
