"""When a shard read takes a page whole: no row of it may end the read (pure)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.spark.whole_pages import PageFacts, ReadState, page_within_stops

#: A page of 100 plain records in the middle of a shard, far from every budget.
PAGE = PageFacts(records=100, last_sequence=200, latest_arrival_ms=1000, rows_bound=100, held_bound=50_000)
STATE = ReadState(rows=0, held=0, max_records=1000, max_bytes=10**6)


def test_a_page_far_from_every_stop_is_taken_whole() -> None:
    assert page_within_stops(PAGE, STATE)
    assert page_within_stops(PAGE, replace(STATE, stop_sequence=201, cutoff_ms=1000))


@pytest.mark.parametrize(
    ("page", "state", "why"),
    [
        (PAGE, replace(STATE, stop_sequence=150), "the known end is on the page"),
        (PAGE, replace(STATE, stop_sequence=200), "the known end is the page's last record"),
        (PAGE, replace(STATE, cutoff_ms=999), "a record arrived after the cut-off"),
        (PAGE, replace(STATE, rows=900), "the row budget may fill on the page"),
        (replace(PAGE, rows_bound=5000), STATE, "the page's aggregates may fill the row budget"),
        (PAGE, replace(STATE, held=950_001), "the bytes budget may fill on the page"),
    ],
)
def test_a_page_that_may_end_the_read_goes_row_by_row(page: PageFacts, state: ReadState, why: str) -> None:
    assert not page_within_stops(page, state), why


@given(
    rows=st.integers(0, 2000),
    held=st.integers(0, 2 * 10**6),
    bound=st.integers(0, 2000),
    held_bound=st.integers(0, 10**6),
)
def test_a_page_taken_whole_never_crosses_a_budget(rows: int, held: int, bound: int, held_bound: int) -> None:
    page = replace(PAGE, rows_bound=bound, held_bound=held_bound)
    state = replace(STATE, rows=rows, held=held)
    assert page_within_stops(page, state) == (rows + bound < 1000 and held + held_bound < 10**6)
