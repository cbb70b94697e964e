"""When a shard read may take a GetRecords page whole instead of checking each row against its stops.

A read of the Spark source (``kcl_daemon.spark.shard_reader``) stops on a row: the known end of a
replay (``stop_at``), the first record past the AvailableNow cut-off, or the row that fills the row or
bytes budget. :func:`page_within_stops` says, from bounds taken before the page becomes rows (its last
sequence number, its latest arrival, upper bounds of its rows and of the bytes they hold), that no row
of the page can do any of that: the page is then added column by column, which gives the same rows as
the per-row loop in a fraction of its time. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PageFacts:
    """What a read knows of a page before it turns it into rows."""

    records: int  # Kinesis records on the page
    last_sequence: int | None  # of the last record (None: an empty page)
    latest_arrival_ms: int | None  # the latest ApproximateArrivalTimestamp on the page
    rows_bound: int  # at most this many rows come out of the page (KPL aggregates split)
    held_bound: int  # the rows of the page hold at most this many bytes (rows.held_bytes)
    aggregates: int = 0  # KPL aggregates to split (0: every record is one row)


@dataclass(frozen=True, slots=True)
class ReadState:
    """Where a read stands before it turns the page into rows, and its stop rules."""

    rows: int  # rows taken so far
    held: int  # bytes they hold
    stop_sequence: int | None = None  # the known end's sequence number (a replay)
    cutoff_ms: int | None = None
    max_records: int | None = None
    max_bytes: int | None = None


def page_within_stops(page: PageFacts, state: ReadState) -> bool:
    """No row of the page can end the read: not the known end, not past the cut-off, and neither
    budget can fill on it."""
    stop, last = state.stop_sequence, page.last_sequence
    if stop is not None and last is not None and last >= stop:
        return False  # the known end is on this page
    cutoff, latest = state.cutoff_ms, page.latest_arrival_ms
    if cutoff is not None and latest is not None and latest > cutoff:
        return False  # the cut-off falls on this page
    if state.max_records is not None and state.rows + page.rows_bound >= state.max_records:
        return False  # the row budget may fill on this page
    return state.max_bytes is None or state.held + page.held_bound < state.max_bytes
