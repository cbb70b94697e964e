"""The shard reader's call ahead over an in-memory Kinesis: it fetches exactly what a read without it
fetches, keeps the pacing, surfaces its errors where the read takes its page, and ends with the read."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from kcl_daemon.aws.kinesis import GetRecordsResult, RawRecord
from kcl_daemon.core.shards.iterator import IteratorPosition, IteratorType
from kcl_daemon.core.spark.offsets import AT_SHARD_END, AT_TRIM_HORIZON, ShardPos, after
from kcl_daemon.errors import AwsError, ShardNotFound, Throttled
from kcl_daemon.spark import shard_reader
from kcl_daemon.spark.rows import held_bytes, user_rows
from kcl_daemon.spark.shard_reader import DataLoss, ReadLimits, ShardRead, read_shard
from tests.support.spark_fakes import FakeKinesis, aggregate, plain

AHEAD = "spark-read-ahead"


@dataclass
class WatchedKinesis(FakeKinesis):
    """FakeKinesis that notes which thread made each GetRecords call and at what time, and fails the
    calls at given iterator positions (each error once)."""

    clock: SyncClock | None = None
    fail_at: dict[int, Exception] = field(default_factory=dict)
    callers: list[str] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)

    def get_records(self, iterator: str, limit: int) -> GetRecordsResult:
        self.callers.append(threading.current_thread().name)
        if self.clock is not None:
            self.starts.append(self.clock.monotonic())
        error = self.fail_at.pop(int(iterator), None)
        if error is not None:
            raise error
        return super().get_records(iterator, limit)

    @property
    def ahead(self) -> int:
        return sum(name.startswith(AHEAD) for name in self.callers)


class SyncClock:
    """Time that moves only when a thread sleeps (the read and its call ahead share it)."""

    def __init__(self) -> None:
        self.now = 0.0
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        with self._lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


def read(kinesis: FakeKinesis, start: ShardPos = AT_TRIM_HORIZON, **kwargs: Any) -> ShardRead:
    kwargs.setdefault("limits", ReadLimits(max_calls=50))
    return read_shard(
        kinesis,  # type: ignore[arg-type]
        "stream",
        "shardId-0",
        start,
        sleep=lambda s: None,
        monotonic=lambda: 0.0,
        **kwargs,
    )


def serial(monkeypatch: pytest.MonkeyPatch, kinesis: FakeKinesis, **kwargs: Any) -> ShardRead:
    with monkeypatch.context() as patch:
        patch.setattr(shard_reader, "reads_on", lambda page, state: False)
        return read(kinesis, **kwargs)


def summary(result: ShardRead, kinesis: WatchedKinesis) -> tuple[object, ...]:
    resume = None if result.resume is None else result.resume.iterator
    return (
        result.records.pairs(),
        result.end,
        result.at_tip,
        result.cut,
        result.full,
        resume,
        kinesis.fetched,
        kinesis.calls,
    )


PER_ROW = held_bytes(next(user_rows(None, plain(1))))
LATE = plain(*range(1, 10), arrival=100) + plain(*range(10, 19), arrival=900)
KPL = [*plain(1, 2, 3), RawRecord(aggregate(5), "agg", "4", 1000), *plain(*range(5, 20))]
CASES: dict[str, tuple[dict[str, Any], list[RawRecord]]] = {
    "to the tip": ({}, plain(*range(1, 30))),
    "a short page at the tip": ({}, plain(*range(1, 11))),
    "the row budget": ({"limits": ReadLimits(max_calls=50, max_records=10)}, plain(*range(1, 30))),
    "the bytes budget": ({"limits": ReadLimits(max_calls=50, max_bytes=PER_ROW * 8)}, plain(*range(1, 30))),
    "the cut-off": ({"limits": ReadLimits(max_calls=50, cutoff_ms=500)}, LATE),
    "the call cap": ({"limits": ReadLimits(max_calls=4)}, plain(*range(1, 30))),
    "a known end": ({"stop_at": after("14"), "limits": ReadLimits()}, plain(*range(1, 30))),
    "from a checkpoint": ({"start": after("5")}, plain(*range(1, 30))),
    "KPL aggregates": ({"limits": ReadLimits(max_calls=50, max_records=12)}, KPL),
}


@pytest.mark.parametrize("case", CASES)
def test_reading_ahead_fetches_and_yields_what_a_read_without_it_does(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kwargs, records = CASES[case]
    without = WatchedKinesis(list(records))
    expected = summary(serial(monkeypatch, without, **kwargs), without)
    kinesis = WatchedKinesis(list(records))
    assert summary(read(kinesis, **kwargs), kinesis) == expected
    assert without.ahead == 0 and kinesis.ahead > 0  # the calls after a page that ends nothing ran ahead


def test_a_closed_shard_is_read_ahead_to_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    kinesis = WatchedKinesis(plain(*range(1, 12)), closed=True)
    done = read(kinesis, closed=True)
    assert done.end == AT_SHARD_END and len(done.records) == 11 and kinesis.ahead > 0
    without = WatchedKinesis(plain(*range(1, 12)), closed=True)
    assert serial(monkeypatch, without, closed=True).end == AT_SHARD_END
    assert (kinesis.calls, kinesis.fetched) == (without.calls, without.fetched)


def test_a_replay_of_a_decided_batch_yields_the_same_rows() -> None:
    kinesis = WatchedKinesis(plain(*range(1, 40)))
    decided = read(kinesis, limits=ReadLimits(max_calls=50, max_records=17))
    replay = read(WatchedKinesis(plain(*range(1, 40))), stop_at=decided.end, limits=ReadLimits())
    assert replay.records.pairs() == decided.records.pairs() and replay.end == decided.end == after("17")


def test_calls_ahead_keep_the_pacing_between_call_starts() -> None:
    clock = SyncClock()
    kinesis = WatchedKinesis(plain(*range(1, 30)), clock=clock)
    read_shard(
        kinesis,  # type: ignore[arg-type]
        "stream",
        "shardId-0",
        AT_TRIM_HORIZON,
        limits=ReadLimits(max_calls=50, min_interval_s=0.5),
        sleep=clock.sleep,
        monotonic=clock.monotonic,
    )
    assert kinesis.ahead > 0
    gaps = [later - earlier for earlier, later in zip(kinesis.starts, kinesis.starts[1:], strict=False)]
    assert gaps and min(gaps) >= 0.5


def test_an_iterator_expired_in_a_call_ahead_is_refreshed_after_the_last_record_fetched() -> None:
    kinesis = WatchedKinesis(plain(*range(1, 13)), expire_once_at=6)  # the third call, made ahead
    result = read(kinesis)
    assert result.records.sequence_numbers == [str(s) for s in range(1, 13)]
    assert IteratorPosition(IteratorType.AFTER_SEQUENCE_NUMBER, "6") in kinesis.iterators
    assert kinesis.callers[2].startswith(AHEAD)


def test_a_call_ahead_is_retried_under_the_read_policy() -> None:
    kinesis = WatchedKinesis(plain(*range(1, 13)), fail_at={6: Throttled("slow down")})
    result = read(kinesis)
    assert result.records.sequence_numbers == [str(s) for s in range(1, 13)]
    assert kinesis.callers[2].startswith(AHEAD) and kinesis.callers[3].startswith(AHEAD)


def test_the_error_of_a_call_ahead_surfaces_where_the_read_takes_its_page() -> None:
    with pytest.raises(AwsError, match="denied"):
        read(WatchedKinesis(plain(*range(1, 13)), fail_at={6: AwsError("access denied")}))
    gone = read(WatchedKinesis(plain(*range(1, 13)), fail_at={6: ShardNotFound("gone")}))
    assert gone.end == AT_SHARD_END and gone.records.sequence_numbers == [str(s) for s in range(1, 7)]
    with pytest.raises(DataLoss, match="gone before the planned end"):
        read(
            WatchedKinesis(plain(*range(1, 13)), fail_at={6: ShardNotFound("gone")}),
            stop_at=after("10"),
            limits=ReadLimits(),
        )


def test_a_read_that_fails_cancels_its_call_ahead_and_leaves_no_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def fail(*_: object) -> bool:
        raise RuntimeError("the task failed")

    monkeypatch.setattr(shard_reader, "page_within_stops", fail)  # right after the call ahead starts
    kinesis = WatchedKinesis(plain(*range(1, 13)))
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="the task failed"):
        read_shard(
            kinesis,  # type: ignore[arg-type]
            "stream",
            "shardId-0",
            AT_TRIM_HORIZON,
            limits=ReadLimits(max_calls=50, min_interval_s=60.0),  # the call ahead waits for its turn
        )
    assert time.monotonic() - started < 10  # the wait was cut short, not sat out
    assert kinesis.calls == 1  # the call ahead was never made
    assert not [t for t in threading.enumerate() if t.name.startswith(AHEAD)]
