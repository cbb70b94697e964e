"""The shard reader's whole pages over an in-memory Kinesis: a read that adds pages column by column
yields, ends, fetches and calls exactly what the row-by-row read does, whatever stops it."""

from __future__ import annotations

from typing import Any

import pytest

from kcl_daemon.aws.kinesis import RawRecord
from kcl_daemon.core.spark.offsets import AT_TRIM_HORIZON, ShardPos, after
from kcl_daemon.spark import shard_reader
from kcl_daemon.spark.rows import Rows, held_bytes, user_rows
from kcl_daemon.spark.shard_reader import ReadLimits, ShardRead, read_shard
from tests.support.spark_fakes import FakeKinesis, aggregate, plain


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


def summary(result: ShardRead, kinesis: FakeKinesis) -> tuple[object, ...]:
    resume = None if result.resume is None else result.resume.iterator
    return (
        result.records.pairs(),
        result.records.data,
        result.end,
        result.at_tip,
        result.cut,
        result.full,
        result.held_bytes,
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
    "a closed shard": ({"closed": True}, plain(*range(1, 12))),
}


@pytest.mark.parametrize("case", CASES)
def test_whole_pages_give_what_the_row_by_row_read_gives(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    kwargs, records = CASES[case]
    closed = kwargs.get("closed", False)
    by_row = FakeKinesis(list(records), closed=closed)
    with monkeypatch.context() as patch:
        patch.setattr(shard_reader, "page_within_stops", lambda page, state: False)
        expected = summary(read(by_row, **kwargs), by_row)
    whole: list[int] = []
    add_plain = Rows.add_plain

    def counted(rows: Rows, raws: Any) -> int:
        whole.append(len(raws))
        return add_plain(rows, raws)

    monkeypatch.setattr(Rows, "add_plain", counted)
    kinesis = FakeKinesis(list(records), closed=closed)
    assert summary(read(kinesis, **kwargs), kinesis) == expected
    assert whole  # the pages that end nothing were taken whole


def test_a_replay_of_a_decided_batch_yields_the_same_rows() -> None:
    decided = read(FakeKinesis(plain(*range(1, 40))), limits=ReadLimits(max_calls=50, max_records=17))
    replay = read(FakeKinesis(plain(*range(1, 40))), stop_at=decided.end, limits=ReadLimits())
    assert replay.records.pairs() == decided.records.pairs() and replay.end == decided.end == after("17")
