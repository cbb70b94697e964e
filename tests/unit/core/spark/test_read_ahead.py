"""When a shard read fetches its next page ahead: every stop reason says no (pure)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.spark.read_ahead import PageFacts, ReadState, next_limit, page_within_stops, reads_on

#: A full page of 100 plain records in the middle of a shard, far from every budget.
PAGE = PageFacts(
    records=100,
    asked=100,
    has_next=True,
    millis_behind_latest=5000,
    last_sequence=200,
    latest_arrival_ms=1000,
    rows_bound=100,
    held_bound=50_000,
)
STATE = ReadState(rows=0, held=0, calls=1, going_to_end=False, max_records=1000, max_bytes=10**6)


def test_a_full_page_far_from_every_stop_reads_on() -> None:
    assert reads_on(PAGE, STATE)
    assert page_within_stops(PAGE, STATE)


@pytest.mark.parametrize(
    ("page", "state", "why"),
    [
        (replace(PAGE, has_next=False), STATE, "the shard's end"),
        (replace(PAGE, records=0, millis_behind_latest=0), STATE, "an empty page at the tip"),
        (replace(PAGE, records=40, millis_behind_latest=0), STATE, "a short page at the tip"),
        (replace(PAGE, records=40, millis_behind_latest=None), STATE, "no millisBehindLatest: the tip"),
        (PAGE, replace(STATE, stop_sequence=150), "the known end is on the page"),
        (PAGE, replace(STATE, stop_sequence=200), "the known end is the page's last record"),
        (PAGE, replace(STATE, cutoff_ms=999), "a record arrived after the cut-off"),
        (PAGE, replace(STATE, rows=900), "the row budget may fill on the page"),
        (replace(PAGE, rows_bound=5000), STATE, "the page's aggregates may fill the row budget"),
        (PAGE, replace(STATE, held=950_001), "the bytes budget may fill on the page"),
        (PAGE, replace(STATE, calls=3, max_calls=3), "the call cap"),
    ],
)
def test_no_read_ahead_when_the_page_may_end_the_read(page: PageFacts, state: ReadState, why: str) -> None:
    assert not reads_on(page, state), why


def test_pages_at_the_tip_read_on_when_the_read_must_go_further() -> None:
    short = replace(PAGE, records=40, millis_behind_latest=0)
    assert reads_on(short, replace(STATE, stop_sequence=500))  # a replay: its end is further on
    assert reads_on(short, replace(STATE, going_to_end=True))  # a closed shard read to its end
    empty = replace(PAGE, records=0, millis_behind_latest=0, last_sequence=None, latest_arrival_ms=None)
    assert reads_on(empty, replace(STATE, going_to_end=True))
    assert reads_on(empty, replace(STATE, stop_at_shard_end=True))


def test_the_limit_ahead_never_asks_past_the_budgets() -> None:
    assert next_limit(PAGE, STATE, 10_000) == 900  # the rows left
    assert next_limit(PAGE, replace(STATE, max_records=None), 10_000) == 1901  # room at 500 bytes a row
    assert next_limit(PAGE, replace(STATE, max_bytes=None, max_records=None), 10_000) == 10_000


@given(
    rows=st.integers(0, 2000),
    held=st.integers(0, 2 * 10**6),
    bound=st.integers(0, 2000),
    held_bound=st.integers(0, 10**6),
)
def test_a_page_taken_whole_never_crosses_a_budget(rows: int, held: int, bound: int, held_bound: int) -> None:
    page = replace(PAGE, rows_bound=bound, held_bound=held_bound)
    state = replace(STATE, rows=rows, held=held)
    if page_within_stops(page, state):
        assert rows + bound < 1000 and held + held_bound < 10**6
        assert next_limit(page, state, 10_000) >= 1
