"""PrefetchingSource: reads ahead within Java's limits, nothing lost on cancellation or error, nothing read
after the end."""

from __future__ import annotations

import asyncio

import pytest

from kcl_daemon.core.sequence import TRIM_HORIZON, ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import ChildShard
from kcl_daemon.errors import Throttled
from kcl_daemon.retrieval.prefetch import NothingYet, PrefetchingSource, ReadAhead
from kcl_daemon.retrieval.source import Batch
from kcl_protocol import Record


def record(n: int) -> Record:
    return Record(b"x", "k", str(n), 0, 0)


class Source:
    """Batches of one record each; ends (with a child) after ``count``; each read can be gated."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.reads = 0
        self.calls = 0
        self.fail_at: dict[int, Exception] = {}  # call number -> error it raises
        self.starts: list[ExtendedSequenceNumber] = []
        self.child_shards: tuple[ChildShard, ...] | None = None
        self.gate = asyncio.Event()
        self.gate.set()

    async def start(self, after: ExtendedSequenceNumber) -> None:
        self.starts.append(after)
        self.child_shards = None

    async def next_batch(self) -> Batch | None:
        await self.gate.wait()
        self.calls += 1
        if self.calls in self.fail_at:
            raise self.fail_at[self.calls]
        if self.reads >= self.count:
            self.child_shards = (ChildShard("child", ("s",), 0, 1),)
            return None
        self.reads += 1
        return Batch((record(self.reads),))


async def test_reading_starts_with_start_and_runs_ahead_of_the_consumer() -> None:
    inner = Source(3)
    source = PrefetchingSource(inner)
    await source.start(TRIM_HORIZON)
    await asyncio.sleep(0)
    assert inner.reads == 3 and source.waiting == 3  # read while the child starts, before any call
    batches = []
    while (batch := await source.next_batch()) is not None:
        batches.append(batch)
    assert [b.records[0].sequence_number for b in batches] == ["1", "2", "3"]
    assert source.child_shards == (ChildShard("child", ("s",), 0, 1),)
    assert await source.next_batch() is None
    assert inner.reads == 3


@pytest.mark.parametrize(
    ("limits", "ahead"),
    [
        (ReadAhead(batches=4), 4),
        (ReadAhead(batches=10, records=3), 3),  # one record a batch
        (ReadAhead(batches=10, payload_bytes=2), 2),  # one byte a record
    ],
)
async def test_reading_ahead_stops_at_each_limit_and_resumes_as_batches_are_taken(
    limits: ReadAhead, ahead: int
) -> None:
    inner = Source(100)
    source = PrefetchingSource(inner, limits)
    await source.start(TRIM_HORIZON)
    for _ in range(5):
        await asyncio.sleep(0)
    assert source.waiting == ahead and inner.reads == ahead
    await source.next_batch()
    for _ in range(5):
        await asyncio.sleep(0)
    assert source.waiting == ahead and inner.reads == ahead + 1


async def test_an_error_arrives_in_order_and_the_next_call_reads_again() -> None:
    inner = Source(5)
    inner.fail_at[3] = Throttled("slow down")
    source = PrefetchingSource(inner)
    await source.start(TRIM_HORIZON)
    first, second = await source.next_batch(), await source.next_batch()
    assert first is not None and second is not None
    assert [first.records[0].sequence_number, second.records[0].sequence_number] == ["1", "2"]
    with pytest.raises(Throttled):
        await source.next_batch()
    third = await source.next_batch()
    assert third is not None and third.records[0].sequence_number == "3"


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


async def test_without_waiting_a_batch_is_taken_or_a_future_resolved_when_one_comes() -> None:
    """``next_batch_nowait`` and ``notify``: how a shard consumer waits for a batch or its own signal
    on one future (no tasks per batch)."""
    inner = Source(1)
    source = PrefetchingSource(inner)
    inner.gate.clear()
    await source.start(TRIM_HORIZON)
    assert isinstance(source.next_batch_nowait(), NothingYet)
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    source.notify(waiter)
    await asyncio.sleep(0)
    assert not waiter.done()
    inner.gate.set()
    await asyncio.wait_for(waiter, 5)
    batch = source.next_batch_nowait()
    assert isinstance(batch, Batch)
    assert batch.records[0].sequence_number == "1"
    signalled: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    source.notify(signalled)
    signalled.set_result(None)  # the consumer's own signal came first: the source leaves it be
    end = source.next_batch_nowait()
    if isinstance(end, NothingYet):  # the reader has not reached the end yet: wait for it
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        source.notify(ended)
        await asyncio.wait_for(ended, 5)
        end = source.next_batch_nowait()
    assert end is None
    assert source.next_batch_nowait() is None  # the end stays
