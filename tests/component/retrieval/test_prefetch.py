"""PrefetchingSource: one read ahead, nothing lost on cancellation, nothing read after the end."""

from __future__ import annotations

import asyncio

import pytest

from kcl_daemon.core.sequence import TRIM_HORIZON, ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import ChildShard
from kcl_daemon.retrieval.prefetch import PrefetchingSource
from kcl_daemon.retrieval.source import Batch
from kcl_protocol import Record


def record(n: int) -> Record:
    return Record(b"x", "k", str(n), 0, 0)


class Source:
    """Batches of one record each; ends (with a child) after ``count``; each read can be gated."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.reads = 0
        self.starts: list[ExtendedSequenceNumber] = []
        self.child_shards: tuple[ChildShard, ...] | None = None
        self.gate = asyncio.Event()
        self.gate.set()

    async def start(self, after: ExtendedSequenceNumber) -> None:
        self.starts.append(after)
        self.child_shards = None

    async def next_batch(self) -> Batch | None:
        await self.gate.wait()
        if self.reads >= self.count:
            self.child_shards = (ChildShard("child", ("s",), 0, 1),)
            return None
        self.reads += 1
        return Batch((record(self.reads),))


async def test_the_next_read_starts_while_the_current_batch_is_processed() -> None:
    inner = Source(3)
    source = PrefetchingSource(inner)
    await source.start(TRIM_HORIZON)
    first = await source.next_batch()
    await asyncio.sleep(0)  # the consumer processes `first`; the read ahead runs meanwhile
    assert first is not None and inner.reads == 2
    batches = [first]
    while (batch := await source.next_batch()) is not None:
        batches.append(batch)
    assert [b.records[0].sequence_number for b in batches] == ["1", "2", "3"]
    assert source.child_shards == (ChildShard("child", ("s",), 0, 1),)
    assert await source.next_batch() is None
    assert inner.reads == 3


async def test_a_cancelled_caller_loses_nothing() -> None:
    inner = Source(2)
    source = PrefetchingSource(inner)
    await source.start(TRIM_HORIZON)
    inner.gate.clear()
    waiting = asyncio.create_task(source.next_batch())
    await asyncio.sleep(0)
    waiting.cancel()  # a lease-loss signal interrupts the wait
    with pytest.raises(asyncio.CancelledError):
        await waiting
    inner.gate.set()
    batch = await source.next_batch()
    assert batch is not None and batch.records[0].sequence_number == "1"


async def test_start_drops_the_read_ahead_and_repositions() -> None:
    inner = Source(5)
    source = PrefetchingSource(inner)
    await source.start(TRIM_HORIZON)
    await source.next_batch()
    await asyncio.sleep(0)
    await source.start(ExtendedSequenceNumber("1"))  # a child restart
    assert inner.starts == [TRIM_HORIZON, ExtendedSequenceNumber("1")]
    await source.aclose()
    await source.aclose()  # idempotent
