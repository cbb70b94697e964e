"""The source's rows: a page taken whole equals it taken row by row; a page's bounds hold (pure)."""

from __future__ import annotations

import base64

from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.aws.kinesis import AnyRawRecord, RawRecord
from kcl_daemon.aws.records_page import EncodedRawRecord
from kcl_daemon.retrieval.deaggregate import Deaggregator
from kcl_daemon.spark.rows import Rows, held_bytes, page_facts, user_rows
from tests.support.spark_fakes import aggregate

payloads = st.lists(st.tuples(st.binary(max_size=40), st.text(min_size=1, max_size=8)), max_size=20)


def page(items: list[tuple[bytes, str]], *, encoded: bool) -> list[AnyRawRecord]:
    if encoded:
        return [
            EncodedRawRecord(base64.b64encode(data).decode(), key, str(100 + n), 1000 + n)
            for n, (data, key) in enumerate(items)
        ]
    return [RawRecord(data, key, str(100 + n), 1000 + n) for n, (data, key) in enumerate(items)]


def columns(rows: Rows) -> list[list[object]]:
    return [list(getattr(rows, name)) for name in Rows.__slots__]


@given(items=payloads, encoded=st.booleans())
def test_a_plain_page_taken_whole_is_the_page_taken_row_by_row(
    items: list[tuple[bytes, str]], encoded: bool
) -> None:
    raws = page(items, encoded=encoded)
    whole, by_row = Rows(), Rows()
    added = whole.add_plain(raws)
    for row in user_rows(None, raws):
        by_row.append(row)
    assert columns(whole) == columns(by_row)
    assert added == sum(held_bytes(row) for row in user_rows(None, raws))
    facts = page_facts(raws, True)
    assert facts.rows_bound == len(raws) and facts.held_bound >= added and facts.aggregates == 0
    if raws:
        assert facts.last_sequence == 100 + len(raws) - 1 and facts.latest_arrival_ms == 999 + len(raws)


@given(sizes=st.lists(st.integers(1, 30), min_size=1, max_size=4), encoded=st.booleans())
def test_the_bounds_of_a_page_of_aggregates_hold(sizes: list[int], encoded: bool) -> None:
    raws: list[AnyRawRecord] = [
        RawRecord(aggregate(n), "agg", str(10 + i), 1000) for i, n in enumerate(sizes)
    ]
    if encoded:
        raws = [
            EncodedRawRecord(base64.b64encode(r.data).decode(), "agg", r.sequence_number, 1000) for r in raws
        ]
    rows = list(user_rows(Deaggregator("shardId-0", 0, 2**128 - 1), raws))
    facts = page_facts(raws, True)
    assert facts.aggregates == len(sizes) and len(rows) == sum(sizes)
    assert facts.rows_bound >= len(rows) and facts.held_bound >= sum(map(held_bytes, rows))
    whole = page_facts(raws, False)
    assert whole.aggregates == 0 and whole.rows_bound == len(raws)  # not split: one row each


def test_rows_up_to_a_position_keep_the_rows_at_or_before_it() -> None:
    rows = Rows()
    for seq, sub in (("9", 0), ("10", 0), ("10", 1), ("100", 0)):  # numeric order, not text order
        rows.append((seq, int(seq), sub, "k", None, 0, b""))
    assert rows.up_to(10, 0).pairs() == [("9", 0), ("10", 0)]
