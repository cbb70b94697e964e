"""Fan-out rules and the fan-out source over an in-memory subscriber: where subscriptions start, which
mode a worker reads in, bounded queueing, and stopping a pump blocked on a slow child."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from kcl_daemon.aws.fanout import FanoutEvent, starting_position
from kcl_daemon.aws.kinesis import RawRecord
from kcl_daemon.core.leases.lease import MAX_HASH_KEY
from kcl_daemon.core.sequence import TRIM_HORIZON, ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import ChildShard, Shard
from kcl_daemon.core.shards.iterator import IteratorPosition, IteratorType
from kcl_daemon.retrieval.fanout import FanoutRecordSource, next_position
from kcl_daemon.retrieval.settings import RetrievalSettings, resolve_mode

SHARD = Shard("shardId-0", None, None, 0, MAX_HASH_KEY, 0, None)
START = IteratorPosition(IteratorType.TRIM_HORIZON)


@pytest.mark.parametrize(
    ("mode", "java_rule", "from_file", "expected"),
    [
        ("POLLING", "FANOUT", True, "POLLING"),
        ("FANOUT", "POLLING", False, "FANOUT"),
        ("DEFAULT", "FANOUT", True, "FANOUT"),  # Java's rule for a file without polling keys
        ("DEFAULT", "POLLING", True, "POLLING"),
        ("DEFAULT", "FANOUT", False, "POLLING"),  # settings built in code
    ],
)
def test_resolve_mode(mode: str, java_rule: str, from_file: bool, expected: str) -> None:
    assert resolve_mode(mode, java_rule, from_file=from_file) == expected


def test_subscriptions_start_after_the_last_continuation() -> None:
    assert next_position(None, START) == START
    assert next_position("42", START) == IteratorPosition(
        IteratorType.AFTER_SEQUENCE_NUMBER, sequence_number="42"
    )
    assert starting_position(IteratorPosition(IteratorType.AFTER_SEQUENCE_NUMBER, sequence_number="7")) == {
        "Type": "AFTER_SEQUENCE_NUMBER",
        "SequenceNumber": "7",
    }
    moment = datetime(2024, 1, 1, tzinfo=UTC)
    assert starting_position(IteratorPosition(IteratorType.AT_TIMESTAMP, timestamp=moment)) == {
        "Type": "AT_TIMESTAMP",
        "Timestamp": moment,
    }


def record(seq: int) -> RawRecord:
    return RawRecord(f"r{seq}".encode(), "pk", str(seq), 0)


class FakeSubscription:
    def __init__(self, events: list[FanoutEvent], sent: list[int]) -> None:
        self._events = events
        self._sent = sent
        self.closed = threading.Event()

    def __iter__(self) -> Iterator[FanoutEvent]:
        for event in self._events:
            if self.closed.is_set():
                raise OSError("closed")
            self._sent.append(1)
            yield event
        self.closed.wait(5)  # an open subscription with nothing more to say

    def close(self) -> None:
        self.closed.set()


class FakeSubscriber:
    def __init__(self, events: list[FanoutEvent]) -> None:
        self.events = events
        self.sent: list[int] = []
        self.positions: list[IteratorPosition] = []
        self.subscriptions: list[FakeSubscription] = []

    def subscribe(self, consumer_arn: str, shard_id: str, position: IteratorPosition) -> FakeSubscription:
        self.positions.append(position)
        remaining = [
            e
            for e in self.events
            if position.sequence_number is None
            or int(e.records[-1].sequence_number) > int(position.sequence_number)
        ]
        subscription = FakeSubscription(remaining, self.sent)
        self.subscriptions.append(subscription)
        return subscription  # type: ignore[return-value]


def events(count: int, *, end: bool = False) -> list[FanoutEvent]:
    out = [FanoutEvent((record(i),), str(i), 0, ()) for i in range(1, count + 1)]
    if end:
        child = ChildShard("shardId-1", ("shardId-0",), 0, MAX_HASH_KEY)
        out.append(FanoutEvent((record(count + 1),), None, 0, (child,)))
    return out


def test_queue_is_bounded_and_the_shard_ends_with_its_children() -> None:
    subscriber = FakeSubscriber(events(50, end=True))

    async def run() -> tuple[int, list[str]]:
        with ThreadPoolExecutor(2) as pool:
            source = FanoutRecordSource(subscriber, "arn", SHARD, pool, RetrievalSettings(), queue_size=2)
            await source.start(TRIM_HORIZON)
            first = await source.next_batch()
            assert first is not None
            await asyncio.sleep(0.3)  # a slow child
            held = len(subscriber.sent)
            seen = [r.sequence_number for r in first.records]
            while (batch := await source.next_batch()) is not None:
                seen += [r.sequence_number for r in batch.records]
            assert source.child_shards is not None
            assert [c.shard_id for c in source.child_shards] == ["shardId-1"]
            await source.aclose()
            return held, seen

    held, seen = asyncio.run(run())
    assert held <= 1 + 2 + 1  # the one read, the queue, the one the pump waits to put
    assert seen == [str(i) for i in range(1, 52)]


def test_aclose_stops_a_pump_blocked_on_a_full_queue_and_start_resumes_after_the_checkpoint() -> None:
    subscriber = FakeSubscriber(events(20))

    async def run() -> list[str]:
        with ThreadPoolExecutor(2) as pool:
            source = FanoutRecordSource(subscriber, "arn", SHARD, pool, RetrievalSettings(), queue_size=1)
            await source.start(TRIM_HORIZON)
            assert await source.next_batch() is not None
            await asyncio.wait_for(source.aclose(), timeout=5)
            assert subscriber.subscriptions[0].closed.is_set()
            await source.start(ExtendedSequenceNumber("10"))
            batch = await source.next_batch()
            await source.aclose()
            assert batch is not None
            return [r.sequence_number for r in batch.records]

    assert asyncio.run(run()) == ["11"]
    # a new start subscribes at the checkpoint (records at or before it are dropped), not after the old pump
    assert subscriber.positions[-1] == IteratorPosition(IteratorType.AT_SEQUENCE_NUMBER, sequence_number="10")
