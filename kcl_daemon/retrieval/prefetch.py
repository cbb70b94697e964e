"""Read one batch ahead: GetRecords for the next batch runs while the child processes the current one.

Without it a shard does GetRecords, then delivery, then the checkpoint, one after another (Java's
polling publisher prefetches too). At most one batch is held in memory besides the one being
processed. The wrapped source's own pacing (``idleTimeBetweenReadsInMillis``) still decides when each
read starts.

* ``next_batch`` returns the batch fetched ahead (waiting for it if needed) and starts the next read,
  unless the shard has ended. If the caller is cancelled while waiting (a lease loss interrupting a
  read), the read goes on and its batch is returned by the next call: nothing is lost.
* ``start`` (a child restart repositions the source) and ``aclose`` drop the read in flight.
"""

from __future__ import annotations

import asyncio
import contextlib

from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import ChildShard
from kcl_daemon.retrieval.source import Batch, ShardRecordSource


class PrefetchingSource:
    def __init__(self, inner: ShardRecordSource) -> None:
        self._inner = inner
        self._ahead: asyncio.Task[Batch | None] | None = None

    @property
    def child_shards(self) -> tuple[ChildShard, ...] | None:
        return self._inner.child_shards

    async def start(self, after: ExtendedSequenceNumber) -> None:
        await self._drop_ahead()
        await self._inner.start(after)

    async def next_batch(self) -> Batch | None:
        if self._ahead is None:
            self._ahead = asyncio.create_task(self._inner.next_batch(), name="prefetch")
        batch = await asyncio.shield(self._ahead)  # a cancelled caller leaves the read running
        self._ahead = None
        if batch is not None and self._inner.child_shards is None:
            self._ahead = asyncio.create_task(self._inner.next_batch(), name="prefetch")
        return batch

    async def aclose(self) -> None:
        await self._drop_ahead()
        close = getattr(self._inner, "aclose", None)  # a fan-out source stops its subscription
        if close is not None:
            await close()

    async def _drop_ahead(self) -> None:
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await ahead
