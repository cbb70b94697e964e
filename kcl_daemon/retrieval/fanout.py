"""Enhanced fan-out retrieval for one shard: a :class:`~kcl_daemon.retrieval.source.RecordSource` over
SubscribeToShard (contract §2.6).

A pump runs on its own thread of the ``fanout`` pool (a subscription blocks a thread for its whole
life) and hands events to the event loop through a bounded queue:

* **Back-pressure.** The queue holds at most ``queue_size`` events. When the child is slow the pump
  blocks on the full queue, stops reading the HTTP stream, and TCP flow control holds Kinesis back:
  memory stays bounded whatever the child's speed.
* **Resubscribe.** A subscription ends after ``resubscribe_s`` (5 minutes, as Kinesis ends them) or
  when it fails; the pump subscribes again ``AFTER_SEQUENCE_NUMBER`` the last continuation sequence
  number it queued (before any event: the start position). Failures are retried under
  ``settings.retry``; when the policy gives up, ``next_batch`` raises the error.
* **Shard end.** An event with no continuation sequence number and child shards ends the shard;
  ``child_shards`` then holds them. ``ResourceNotFoundException`` ends it without children.
* ``start(after)`` (a child restart) and ``aclose`` stop the pump (closing the stream) and drop what
  was queued; records at or before ``after`` are dropped (resuming inside a KPL aggregate).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Final, Protocol

from kcl_daemon.aws.fanout import FanoutEvent, Subscription
from kcl_daemon.clock import Clock, SystemClock
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import ChildShard, Shard
from kcl_daemon.core.shards.iterator import (
    IteratorPosition,
    NothingToRead,
    iterator_position_for,
    records_after,
    refresh_position,
)
from kcl_daemon.errors import InconsistentResponse, KclError, ShardNotFound
from kcl_daemon.retrieval.deaggregate import Deaggregator
from kcl_daemon.retrieval.settings import RetrievalSettings
from kcl_daemon.retrieval.source import Batch
from kcl_protocol import AnyRecord

logger = logging.getLogger(__name__)

#: Kinesis ends every subscription after 5 minutes; the pump does not hold one longer.
RESUBSCRIBE_S: Final = 300.0
QUEUE_SIZE: Final = 2
#: Pause before subscribing again after a subscription that delivered events failed.
RESUBSCRIBE_PAUSE_S: Final = 0.2


class Subscriber(Protocol):
    """The part of :class:`kcl_daemon.aws.fanout.Fanout` a fan-out source uses (fakes implement it)."""

    def subscribe(self, consumer_arn: str, shard_id: str, position: IteratorPosition) -> Subscription: ...


@dataclass(slots=True)
class FanoutStats:
    subscriptions: int = 0
    resubscribes_after_error: int = 0
    events: int = 0
    kinesis_records: int = 0
    user_records: int = 0


@dataclass(frozen=True, slots=True)
class _Failed:
    error: BaseException


@dataclass(frozen=True, slots=True)
class _Gone:
    reason: str


_Item = FanoutEvent | _Failed | _Gone


def next_position(continuation: str | None, start: IteratorPosition) -> IteratorPosition:
    """Where a new subscription starts: after the last continuation sequence number, else ``start``."""
    return refresh_position(continuation, start)


class _Pump:
    """Subscribes again and again and puts events on the loop's queue; runs on one pool thread."""

    def __init__(self, source: FanoutRecordSource, start: IteratorPosition) -> None:
        self.stopped = threading.Event()
        self._source = source
        self._start = start
        self._continuation: str | None = None
        self._subscription: Subscription | None = None
        self._lock = threading.Lock()
        self.delivered = 0  # events handed to the queue

    def stop(self) -> None:
        self.stopped.set()
        with self._lock:
            subscription = self._subscription
        if subscription is not None:
            subscription.close()

    def run(self, put: Callable[[_Item], bool]) -> None:
        """Subscribe until the shard ends or the pump is stopped. Failures before any event are retried
        under ``settings.retry``; a subscription that delivered events starts the policy afresh."""
        source = self._source
        try:
            while not self.stopped.is_set():
                outcome = "again"
                retrying = source.settings.retry.retrying(sleep=self._sleep, monotonic=source.clock.monotonic)
                for attempt in retrying:
                    with attempt:
                        outcome = self._attempt(put)
                if outcome == "done":
                    return
                if outcome == "failed-after-progress":
                    self._sleep(RESUBSCRIBE_PAUSE_S)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which decides
            if not self.stopped.is_set():
                put(_Failed(exc))

    def _attempt(self, put: Callable[[_Item], bool]) -> str:
        """One subscription: "done" (shard end, gone or stopped), "again" (it ended: subscribe again) or
        "failed-after-progress"; a failure before any event is raised for the retry policy."""
        delivered = self.delivered
        try:
            return "done" if self._one_subscription(put) else "again"
        except ShardNotFound as exc:  # gone: never worth retrying
            put(_Gone(str(exc)))
            return "done"
        except KclError as exc:
            if self.stopped.is_set():
                return "done"
            self._source.stats.resubscribes_after_error += 1
            if self.delivered > delivered and exc.retriable:
                logger.info("shard %s: %s; subscribing again", self._source.shard_id, exc)
                return "failed-after-progress"
            raise

    def _sleep(self, seconds: float) -> None:
        self.stopped.wait(seconds)

    def _one_subscription(self, put: Callable[[_Item], bool]) -> bool:
        """One subscription to its end; True when the pump is done (shard end or stopped)."""
        source = self._source
        position = next_position(self._continuation, self._start)
        subscription = source.subscriber.subscribe(source.consumer_arn, source.shard_id, position)
        with self._lock:
            self._subscription = subscription
        if self.stopped.is_set():
            subscription.close()
            return True
        source.stats.subscriptions += 1
        opened = source.clock.monotonic()
        logger.debug("shard %s: subscribed from %s", source.shard_id, position)
        try:
            for event in subscription:
                if event.continuation_sequence_number is None and not event.child_shards:
                    raise InconsistentResponse(
                        f"SubscribeToShard on shard {source.shard_id}: an event with neither a "
                        "continuation sequence number nor child shards"
                    )
                if not put(event):
                    return True
                self.delivered += 1
                if event.continuation_sequence_number is None:
                    return True  # shard end: the consumer has the children
                self._continuation = event.continuation_sequence_number
                if source.clock.monotonic() - opened >= source.resubscribe_s:
                    break
        finally:
            subscription.close()
            with self._lock:
                self._subscription = None
        return self.stopped.is_set()


class FanoutRecordSource:
    """Reads one shard with SubscribeToShard. ``child_shards`` is set once ``next_batch`` returned None."""

    def __init__(
        self,
        subscriber: Subscriber,
        consumer_arn: str,
        shard: Shard,
        executor: Executor,
        settings: RetrievalSettings | None = None,
        *,
        clock: Clock | None = None,
        queue_size: int = QUEUE_SIZE,
        resubscribe_s: float = RESUBSCRIBE_S,
    ) -> None:
        self.subscriber = subscriber
        self.consumer_arn = consumer_arn
        self.shard_id = shard.shard_id
        self.settings = settings or RetrievalSettings()
        self.clock: Clock = clock or SystemClock()
        self.resubscribe_s = resubscribe_s
        self.stats = FanoutStats()
        self.deaggregator = Deaggregator(shard.shard_id, shard.starting_hash_key, shard.ending_hash_key)
        self.child_shards: tuple[ChildShard, ...] | None = None
        self._executor = executor
        self._queue_size = queue_size
        self._queue: asyncio.Queue[_Item] | None = None
        self._pump: _Pump | None = None
        self._pump_done: asyncio.Future[None] | None = None
        self._start: IteratorPosition | None = None
        self._drop_up_to: ExtendedSequenceNumber | None = None

    @property
    def ended(self) -> bool:
        return self.child_shards is not None

    async def start(self, after: ExtendedSequenceNumber) -> None:
        await self.aclose()
        self.child_shards = None
        try:
            self._start = iterator_position_for(after, timestamp=self.settings.at_timestamp)
        except NothingToRead:
            logger.info("shard %s: checkpoint is SHARD_END; nothing to read", self.shard_id)
            self.child_shards = ()
            return
        self._drop_up_to = None if after.is_sentinel else after

    async def aclose(self) -> None:
        """Stop the pump (closing its stream) and drop what it queued."""
        pump, done = self._pump, self._pump_done
        self._pump = self._pump_done = None
        self._queue = None
        if pump is not None:
            pump.stop()
        if done is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(10.0):  # not wait_for: it can swallow a cancellation (3.11)
                    await asyncio.shield(done)

    def _ensure_pump(self) -> asyncio.Queue[_Item]:
        if self._queue is not None:
            return self._queue
        if self._start is None:
            raise RuntimeError("FanoutRecordSource.next_batch() before start()")
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[_Item] = asyncio.Queue(self._queue_size)
        pump = _Pump(self, self._start)

        def put(item: _Item) -> bool:
            """Blocks the pump thread while the queue is full; False once the pump was stopped."""
            future = asyncio.run_coroutine_threadsafe(queue.put(item), loop)
            while True:
                try:
                    future.result(timeout=0.5)
                except TimeoutError:
                    if pump.stopped.is_set():
                        future.cancel()
                        return False
                else:
                    return True

        self._queue, self._pump = queue, pump
        self._pump_done = loop.run_in_executor(self._executor, pump.run, put)
        return queue

    async def next_batch(self) -> Batch | None:
        if self.child_shards is not None:
            return None
        queue = self._ensure_pump()
        item = await queue.get()
        if isinstance(item, _Failed):
            await self.aclose()
            raise item.error
        if isinstance(item, _Gone):
            logger.info("shard %s: %s; the shard ended without children", self.shard_id, item.reason)
            self.child_shards = ()
            await self.aclose()
            return None
        self.stats.events += 1
        records: Sequence[AnyRecord] = self.deaggregator.columns(item.records)
        if self._drop_up_to is not None:
            records = records_after(records, self._drop_up_to)
            if records:
                self._drop_up_to = None
        self.stats.kinesis_records += len(item.records)
        self.stats.user_records += len(records)
        if item.continuation_sequence_number is None:
            logger.info(
                "shard %s: shard end; children: %s",
                self.shard_id,
                ", ".join(c.shard_id for c in item.child_shards) or "none",
            )
            self.child_shards = item.child_shards
            await self.aclose()
            if not records:
                return None
        return Batch(records, item.millis_behind_latest)
