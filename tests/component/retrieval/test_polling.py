"""PollingRecordSource against an in-memory Kinesis and a fake clock: order, pacing, resume, retries, end."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
from aws_kinesis_agg.aggregator import RecordAggregator

from kcl_daemon.aws.kinesis import GetRecordsResult, RawRecord
from kcl_daemon.core.sequence import LATEST, SHARD_END, TRIM_HORIZON, ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import ChildShard, Shard
from kcl_daemon.core.shards.iterator import IteratorPosition, IteratorType
from kcl_daemon.errors import (
    InconsistentResponse,
    IteratorExpired,
    ShardNotFound,
    Throttled,
    TransientNetwork,
)
from kcl_daemon.retrieval.polling import PollingRecordSource
from kcl_daemon.retrieval.settings import RetrievalSettings
from kcl_daemon.retry import RetryPolicy
from tests.support.clocks import FakeClock

SHARD_ID = "shardId-000000000000"
HALF = 2**127
LEFT = ChildShard("shardId-000000000001", (SHARD_ID,), 0, HALF - 1)
RIGHT = ChildShard("shardId-000000000002", (SHARD_ID,), HALF, 2**128 - 1)


class FakeKinesis:
    """One shard. ``end_style``: how a closed shard ends - "aws", "kinesalite" (no ChildShards), "moto"
    (never: iterators forever). Iterators are record indexes; ``failures`` are raised by get_records."""

    def __init__(self, clock: FakeClock, records: Sequence[RawRecord] = (), *, closed: bool = False) -> None:
        self.clock = clock
        self.records = list(records)
        self.closed = closed
        self.end_style = "aws"
        self.failures: deque[Exception] = deque()
        self.iterator_failures: deque[Exception] = deque()
        self.positions: list[IteratorPosition] = []
        self.call_times: list[float] = []
        self.limits: list[int] = []
        self.list_calls = 0
        self.extra_children: tuple[ChildShard, ...] = ()
        self.block: tuple[threading.Event, threading.Event] | None = None  # (started, release)
        self.latency_s = 0.0  # each GetRecords takes this long on the fake clock

    def shard(self) -> Shard:
        end = int(self.records[-1].sequence_number) if self.records else 0
        return Shard(
            SHARD_ID, starting_sequence_number=1, ending_sequence_number=end if self.closed else None
        )

    def get_shard_iterator(self, stream_name: str, shard_id: str, position: IteratorPosition) -> str:
        assert (stream_name, shard_id) == ("stream", SHARD_ID)
        if self.iterator_failures:
            raise self.iterator_failures.popleft()
        self.positions.append(position)
        seqs = [int(r.sequence_number) for r in self.records]
        match position.type:
            case IteratorType.TRIM_HORIZON | IteratorType.AT_TIMESTAMP:
                index = 0
            case IteratorType.LATEST:
                index = len(seqs)
            case IteratorType.AT_SEQUENCE_NUMBER:
                index = sum(1 for s in seqs if s < int(position.sequence_number or 0))
            case IteratorType.AFTER_SEQUENCE_NUMBER:
                index = sum(1 for s in seqs if s <= int(position.sequence_number or 0))
            case _:
                raise AssertionError(position)
        return str(index)

    def get_records(self, iterator: str, limit: int) -> GetRecordsResult:
        self.call_times.append(self.clock.now)
        self.clock.now += self.latency_s
        self.limits.append(limit)
        if self.block is not None:
            (started, release), self.block = self.block, None
            started.set()
            release.wait(5)
        if self.failures:
            raise self.failures.popleft()
        index = int(iterator)
        batch = tuple(self.records[index : index + limit])
        after = index + len(batch)
        at_end = self.closed and after >= len(self.records)
        next_iterator: str | None = str(after)
        children: tuple[ChildShard, ...] = self.extra_children
        if at_end and self.end_style == "aws":
            next_iterator, children = None, (LEFT, RIGHT)
        elif at_end and self.end_style == "kinesalite":
            next_iterator = None
        return GetRecordsResult(batch, next_iterator, 0, children)

    def list_shards(self, stream_name: str) -> list[Shard]:
        self.list_calls += 1
        return [
            self.shard(),
            Shard(LEFT.shard_id, parent_shard_id=SHARD_ID, ending_hash_key=HALF - 1),
            Shard(RIGHT.shard_id, parent_shard_id=SHARD_ID, starting_hash_key=HALF),
        ]


def plain(seq: int, data: bytes | None = None) -> RawRecord:
    return RawRecord(data or f"r{seq}".encode(), f"pk{seq}", str(seq), 1_700_000_000_000 + seq)


def aggregated(seq: int, count: int) -> RawRecord:
    agg = RecordAggregator()
    for index in range(count):
        agg.add_user_record(f"pk{index}", f"{seq}.{index}".encode())
    record = agg.clear_and_get()
    assert record is not None
    return RawRecord(bytes(record.get_contents()[2]), "outer", str(seq), 1_700_000_000_000)


@pytest.fixture
def executor() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="test-kinesis-read") as pool:
        yield pool


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=1000.0)


def source(
    kinesis: FakeKinesis,
    executor: ThreadPoolExecutor,
    clock: FakeClock,
    shard: Shard | None = None,
    **settings: object,
) -> PollingRecordSource:
    options: dict[str, object] = {"idle_between_reads_s": 1.0, "max_records": 3}
    options.update(settings)
    return PollingRecordSource(
        kinesis,
        "stream",
        shard or kinesis.shard(),
        executor,
        RetrievalSettings(**options),  # type: ignore[arg-type]
        clock=clock,
    )


def keys(records: Sequence[object]) -> list[str]:
    return [f"{r.sequence_number}/{r.sub_sequence_number}" for r in records]  # type: ignore[attr-defined]


async def drain(src: PollingRecordSource, max_batches: int = 50) -> list[str]:
    seen: list[str] = []
    for _ in range(max_batches):
        batch = await src.next_batch()
        if batch is None:
            return seen
        seen += keys(batch.records)
    raise AssertionError(f"no shard end after {max_batches} batches; read {seen}")


async def test_reads_every_record_in_order_in_batches_of_max_records(executor, clock) -> None:
    kinesis = FakeKinesis(clock, [plain(s) for s in range(1, 8)])
    src = source(kinesis, executor, clock)
    await src.start(TRIM_HORIZON)
    batches = [await src.next_batch() for _ in range(4)]
    assert [keys(b.records) for b in batches if b is not None] == [
        ["1/0", "2/0", "3/0"],
        ["4/0", "5/0", "6/0"],
        ["7/0"],
        [],  # at the tip of an open shard: empty batches, never None
    ]
    assert batches[0] is not None and batches[0].records[0].data == b"r1"
    assert batches[0].records[0].approximate_arrival_timestamp == 1_700_000_000_001
    assert batches[0].millis_behind_latest == 0
    assert kinesis.limits == [3, 3, 3, 3]
    assert kinesis.positions == [IteratorPosition(IteratorType.TRIM_HORIZON)]
    assert src.child_shards is None
    assert (src.stats.get_records_calls, src.stats.kinesis_records, src.stats.user_records) == (4, 7, 7)


@pytest.mark.parametrize(("idle", "spacing"), [(1.0, 1.0), (0.05, 0.2), (0.0, 0.2), (2.5, 2.5)])
async def test_calls_are_spaced_by_the_idle_time_never_below_200ms(executor, clock, idle, spacing) -> None:
    kinesis = FakeKinesis(clock, [plain(s) for s in range(1, 4)])
    src = source(kinesis, executor, clock, idle_between_reads_s=idle)
    await src.start(TRIM_HORIZON)
    for _ in range(5):
        await src.next_batch()
    gaps = [b - a for a, b in zip(kinesis.call_times, kinesis.call_times[1:], strict=False)]
    assert gaps == pytest.approx([spacing] * 4)


async def test_the_idle_time_counts_from_the_end_of_a_call_as_in_java(executor, clock) -> None:
    kinesis = FakeKinesis(clock, [plain(1)])
    kinesis.latency_s = 0.3
    src = source(kinesis, executor, clock, idle_between_reads_s=1.0)
    await src.start(TRIM_HORIZON)
    for _ in range(3):
        await src.next_batch()
    gaps = [b - a for a, b in zip(kinesis.call_times, kinesis.call_times[1:], strict=False)]
    assert gaps == pytest.approx([1.3, 1.3])


async def test_slow_consumer_does_not_wait_again(executor, clock) -> None:
    kinesis = FakeKinesis(clock, [plain(1)])
    src = source(kinesis, executor, clock)
    await src.start(TRIM_HORIZON)
    await src.next_batch()
    clock.now += 5.0  # the child took 5 s over the batch
    await src.next_batch()
    assert clock.sleeps == []


async def test_reduced_tps_near_the_tip(executor, clock) -> None:
    kinesis = FakeKinesis(clock, [plain(1)])
    src = source(kinesis, executor, clock, idle_between_reads_s=0.5, reduced_tps_threshold_s=3.0)
    await src.start(TRIM_HORIZON)
    await src.next_batch()
    await src.next_batch()
    assert kinesis.call_times[1] - kinesis.call_times[0] == pytest.approx(3.0)  # millisBehindLatest 0 < 3 s


async def test_resume_after_a_checkpoint_reads_at_it_and_drops_it(executor, clock) -> None:
    kinesis = FakeKinesis(clock, [plain(s) for s in (5, 9, 10, 11)], closed=True)
    src = source(kinesis, executor, clock)
    await src.start(ExtendedSequenceNumber("9"))
    assert await drain(src) == ["10/0", "11/0"]
    assert kinesis.positions[0] == IteratorPosition(IteratorType.AT_SEQUENCE_NUMBER, "9")


async def test_resume_inside_an_aggregate_drops_the_processed_sub_records(executor, clock) -> None:
    kinesis = FakeKinesis(clock, [plain(1), aggregated(2, 4), plain(3)], closed=True)
    src = source(kinesis, executor, clock)
    await src.start(ExtendedSequenceNumber("2", 1))
    assert await drain(src) == ["2/2", "2/3", "3/0"]


async def test_resume_at_sub_record_zero_of_an_aggregate_keeps_the_rest(executor, clock) -> None:
    kinesis = FakeKinesis(clock, [aggregated(2, 3), plain(3)], closed=True)
    src = source(kinesis, executor, clock)
    await src.start(ExtendedSequenceNumber("2", 0))
    assert await drain(src) == ["2/1", "2/2", "3/0"]


async def test_start_again_repositions(executor, clock) -> None:
    kinesis = FakeKinesis(clock, [plain(s) for s in range(1, 6)])
    src = source(kinesis, executor, clock)
    await src.start(TRIM_HORIZON)
    await src.next_batch()
    await src.start(ExtendedSequenceNumber("1"))  # the child restarted from checkpoint 1
    batch = await src.next_batch()
    assert batch is not None and keys(batch.records) == ["2/0", "3/0"]  # AT 1 re-reads 1, then drops it


async def test_latest_starts_at_the_tip(executor, clock) -> None:
    kinesis = FakeKinesis(clock, [plain(1)])
    src = source(kinesis, executor, clock)
    await src.start(LATEST)
    batch = await src.next_batch()
    assert batch is not None and batch.records == ()


async def test_at_timestamp_uses_the_configured_instant(executor, clock) -> None:
    when = datetime(2024, 1, 1, tzinfo=UTC)
    kinesis = FakeKinesis(clock, [plain(1)])
    src = source(kinesis, executor, clock, at_timestamp=when)
    await src.start(ExtendedSequenceNumber("AT_TIMESTAMP"))
    await src.next_batch()
    assert kinesis.positions == [IteratorPosition(IteratorType.AT_TIMESTAMP, timestamp=when)]


async def test_throttling_backs_off_on_the_fake_clock_and_keeps_200ms_between_calls(executor, clock) -> None:
    kinesis = FakeKinesis(clock, [plain(1), plain(2)])
    kinesis.failures.extend([Throttled("slow"), Throttled("slow"), TransientNetwork("reset")])
    src = source(kinesis, executor, clock)
    await src.start(TRIM_HORIZON)
    batch = await src.next_batch()
    assert batch is not None and keys(batch.records) == ["1/0", "2/0"]
    assert src.stats.throttled == 2
    assert len(kinesis.call_times) == 4
    gaps = [b - a for a, b in zip(kinesis.call_times, kinesis.call_times[1:], strict=False)]
    assert all(gap >= 0.2 - 1e-9 for gap in gaps)
    assert kinesis.positions == [IteratorPosition(IteratorType.TRIM_HORIZON)]  # same iterator reused


async def test_throttling_beyond_the_policy_propagates(executor, clock) -> None:
    kinesis = FakeKinesis(clock, [plain(1)])
    kinesis.failures.extend(Throttled("slow") for _ in range(10))
    policy = RetryPolicy("test", max_attempts=3, deadline_s=60, initial_backoff_s=0.1, max_backoff_s=0.5)
    src = source(kinesis, executor, clock, retry=policy)
    await src.start(TRIM_HORIZON)
    with pytest.raises(Throttled):
        await src.next_batch()
    assert len(kinesis.call_times) == 3


async def test_expired_iterator_resumes_after_the_last_record_fetched_not_the_checkpoint(
    executor, clock
) -> None:
    kinesis = FakeKinesis(clock, [plain(s) for s in range(1, 8)])
    src = source(kinesis, executor, clock)
    await src.start(ExtendedSequenceNumber("1"))
    first = await src.next_batch()
    assert first is not None and keys(first.records) == ["2/0", "3/0"]
    kinesis.failures.append(IteratorExpired("expired"))
    second = await src.next_batch()
    assert second is not None and keys(second.records) == ["4/0", "5/0", "6/0"]
    assert kinesis.positions == [
        IteratorPosition(IteratorType.AT_SEQUENCE_NUMBER, "1"),
        IteratorPosition(IteratorType.AFTER_SEQUENCE_NUMBER, "3"),
    ]
    assert src.stats.iterator_refreshes == 1


async def test_expired_iterator_before_any_record_reuses_the_start_position(executor, clock) -> None:
    kinesis = FakeKinesis(clock, [plain(s) for s in range(1, 3)])
    kinesis.failures.append(IteratorExpired("expired"))
    src = source(kinesis, executor, clock)
    await src.start(ExtendedSequenceNumber("1"))
    batch = await src.next_batch()
    assert batch is not None and keys(batch.records) == ["2/0"]
    assert kinesis.positions == [IteratorPosition(IteratorType.AT_SEQUENCE_NUMBER, "1")] * 2


@pytest.mark.parametrize("style", ["aws", "kinesalite", "moto"])
async def test_closed_shard_ends_with_its_children_whatever_the_service_returns(
    executor, clock, style
) -> None:
    kinesis = FakeKinesis(clock, [plain(s) for s in range(1, 6)], closed=True)
    kinesis.end_style = style
    src = source(kinesis, executor, clock)
    await src.start(TRIM_HORIZON)
    assert await drain(src) == ["1/0", "2/0", "3/0", "4/0", "5/0"]
    assert src.child_shards == (LEFT, RIGHT)
    assert src.ended
    assert await src.next_batch() is None
    assert kinesis.list_calls == (0 if style == "aws" else 1)


async def test_the_last_records_come_before_the_end(executor, clock) -> None:
    kinesis = FakeKinesis(clock, [plain(1), plain(2)], closed=True)
    src = source(kinesis, executor, clock, max_records=10)
    await src.start(TRIM_HORIZON)
    batch = await src.next_batch()
    assert batch is not None and keys(batch.records) == ["1/0", "2/0"]
    assert src.child_shards == (LEFT, RIGHT)
    assert await src.next_batch() is None


async def test_moto_shard_closed_after_the_listing_we_were_given_does_not_end(executor, clock) -> None:
    kinesis = FakeKinesis(clock, [plain(1)], closed=True)
    kinesis.end_style = "moto"
    src = source(kinesis, executor, clock, shard=Shard(SHARD_ID))  # listed open when the lease was taken
    await src.start(TRIM_HORIZON)
    for _ in range(5):
        assert await src.next_batch() is not None
    assert kinesis.list_calls == 0


async def test_resource_not_found_is_shard_end_without_children(executor, clock) -> None:
    kinesis = FakeKinesis(clock, [plain(1)])
    kinesis.iterator_failures.append(ShardNotFound("gone"))
    src = source(kinesis, executor, clock)
    await src.start(TRIM_HORIZON)
    assert await src.next_batch() is None
    assert src.child_shards == ()


async def test_inconsistent_response_is_retried_with_the_same_iterator(executor, clock) -> None:
    kinesis = FakeKinesis(clock, [plain(1)])
    kinesis.extra_children = (LEFT,)  # an iterator *and* children
    policy = RetryPolicy("test", max_attempts=2, deadline_s=60, initial_backoff_s=0.1, max_backoff_s=0.1)
    src = source(kinesis, executor, clock, retry=policy)
    await src.start(TRIM_HORIZON)
    with pytest.raises(InconsistentResponse):
        await src.next_batch()
    kinesis.extra_children = ()
    batch = await src.next_batch()
    assert batch is not None and keys(batch.records) == ["1/0"]  # nothing was skipped
    assert src.stats.inconsistent_responses == 2


async def test_shard_end_checkpoint_reads_nothing(executor, clock) -> None:
    kinesis = FakeKinesis(clock, [plain(1)])
    src = source(kinesis, executor, clock)
    await src.start(SHARD_END)
    assert await src.next_batch() is None
    assert src.child_shards == ()
    assert kinesis.call_times == []


async def test_next_batch_before_start_is_a_bug(executor, clock) -> None:
    src = source(FakeKinesis(clock), executor, clock)
    with pytest.raises(RuntimeError, match="start"):
        await src.next_batch()


async def test_cancelled_read_loses_nothing(executor, clock) -> None:
    kinesis = FakeKinesis(clock, [plain(s) for s in range(1, 4)])
    src = source(kinesis, executor, clock)
    await src.start(TRIM_HORIZON)
    started, release = threading.Event(), threading.Event()
    kinesis.block = (started, release)
    task = asyncio.ensure_future(src.next_batch())
    assert await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
    task.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    batch = await src.next_batch()
    assert batch is not None and keys(batch.records) == ["1/0", "2/0", "3/0"]


def test_settings_validation() -> None:
    assert RetrievalSettings(idle_between_reads_s=0.1).effective_idle_s == 0.2
    for bad in ({"max_records": 0}, {"max_records": 10001}, {"idle_between_reads_s": -1}):
        with pytest.raises(ValueError, match=r"max_records|negative"):
            RetrievalSettings(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timezone"):
        RetrievalSettings(at_timestamp=datetime(2024, 1, 1))  # noqa: DTZ001
