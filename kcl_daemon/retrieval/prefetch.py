"""Read ahead: a shard's batches are fetched while its child processes the ones before (contract §7.2).

Java's polling publisher keeps fetching in the background until a small queue is full; without that a
shard does GetRecords, then delivery, then the checkpoint, one after the other, and a processor that
does real work waits for every read. Here too one reader task per shard keeps a queue of batches
waiting for the child, up to :class:`ReadAhead`'s limits: 4 batches, 30,000 records and 8 MiB of
payload, Java's own. The wrapped source's pacing (``idleTimeBetweenReadsInMillis``) still decides when
each read starts, so an idle shard makes the same calls either way.

* :meth:`PrefetchingSource.start` positions the source and starts reading at once (the first read
  overlaps the child's start-up); a restart drops what was read ahead.
* ``next_batch`` returns the oldest batch waiting (waiting for one if needed). A caller cancelled while
  it waits (a lease loss interrupting a read) loses nothing: the batch stays queued for the next call.
* An error of the wrapped source is raised by the ``next_batch`` call that reaches it, in order; the
  next call reads again. Once the shard has ended, ``next_batch`` returns None.
* ``aclose`` (and ``start``) cancel the read in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from dataclasses import dataclass
from typing import Final

from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import ChildShard
from kcl_daemon.retrieval.source import Batch, ShardRecordSource
from kcl_protocol import payload_bytes


@dataclass(frozen=True, slots=True)
class ReadAhead:
    """How much a shard may hold waiting for its child (a read starts only while all three hold)."""

    batches: int = 4
    records: int = 30_000
    payload_bytes: int = 8 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.batches < 1 or self.records < 1 or self.payload_bytes < 1:
            raise ValueError("read-ahead limits must be at least 1")


class _Ended:
    """Queued after the shard's last batch: every later call returns None."""


_ENDED = _Ended()


class NothingYet:
    """What :meth:`PrefetchingSource.next_batch_nowait` returns while no batch is waiting."""


NOTHING_YET: Final = NothingYet()


class PrefetchingSource:
    def __init__(self, inner: ShardRecordSource, limits: ReadAhead | None = None) -> None:
        self._inner = inner
        self._limits = limits or ReadAhead()
        self._queue: deque[Batch | BaseException | _Ended] = deque()
        self._records = 0
        self._bytes = 0
        self._changed = asyncio.Event()  # something was queued or taken
        self._reader: asyncio.Task[None] | None = None
        self._waiter: asyncio.Future[None] | None = None  # see notify

    @property
    def child_shards(self) -> tuple[ChildShard, ...] | None:
        return self._inner.child_shards

    @property
    def waiting(self) -> int:
        """Batches read ahead and not taken yet."""
        return sum(1 for item in self._queue if isinstance(item, Batch))

    async def start(self, after: ExtendedSequenceNumber) -> None:
        await self._drop_ahead()
        await self._inner.start(after)
        self._ensure_reader()

    async def next_batch(self) -> Batch | None:
        while not self._queue:
            self._ensure_reader()
            self._changed.clear()
            await self._changed.wait()
        return self._take()

    def next_batch_nowait(self) -> Batch | NothingYet | None:
        """As :meth:`next_batch` when something is queued, else :data:`NOTHING_YET` (and the reader is
        reading): with :meth:`notify`, a consumer waits for a batch or its own signal on one future,
        without the tasks that waiting on two awaitables takes."""
        if not self._queue:
            self._ensure_reader()
            return NOTHING_YET
        return self._take()

    def notify(self, waiter: asyncio.Future[None]) -> None:
        """Resolve ``waiter`` when something is queued next (one waiter at a time: a later call
        replaces it)."""
        self._waiter = waiter

    def _queued(self) -> None:
        self._changed.set()
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _take(self) -> Batch | None:
        item = self._queue[0]
        if isinstance(item, _Ended):
            return None  # stays queued: the shard has ended for every later call too
        self._queue.popleft()
        self._changed.set()  # room for the reader
        if isinstance(item, BaseException):
            raise item
        self._records -= len(item.records)
        self._bytes -= _payload(item)
        return item

    async def aclose(self) -> None:
        await self._drop_ahead()
        close = getattr(self._inner, "aclose", None)  # a fan-out source stops its subscription
        if close is not None:
            await close()

    # -- the reader --------------------------------------------------------------------------------

    def _ensure_reader(self) -> None:
        """Start reading unless a reader runs, or the queue ends with the shard's end or an error."""
        stopped = bool(self._queue) and isinstance(self._queue[-1], _Ended | BaseException)
        if (self._reader is None or self._reader.done()) and not stopped:
            self._reader = asyncio.create_task(self._read(), name="read-ahead")

    def _full(self) -> bool:
        limits = self._limits
        return (
            len(self._queue) >= limits.batches
            or self._records >= limits.records
            or self._bytes >= limits.payload_bytes
        )

    async def _read(self) -> None:
        while True:
            while self._full():
                self._changed.clear()
                await self._changed.wait()
            try:
                batch = await self._inner.next_batch()
            except Exception as exc:  # noqa: BLE001 - raised to the consumer in order, by next_batch
                self._queue.append(exc)
                self._queued()
                return
            if batch is None:
                self._queue.append(_ENDED)
                self._queued()
                return
            self._queue.append(batch)
            self._records += len(batch.records)
            self._bytes += _payload(batch)
            self._queued()

    async def _drop_ahead(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
        self._queue.clear()
        self._records = self._bytes = 0


def _payload(batch: Batch) -> int:
    return payload_bytes(batch.records)
