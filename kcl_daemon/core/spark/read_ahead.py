"""When a shard read may fetch its next GetRecords page while it still turns the current one into rows.

A read of the Spark source (``kcl_daemon.spark.shard_reader``) stops after a page for one of these
reasons: the page holds the known end (``stop_at``) or the first record past the AvailableNow cut-off;
its rows fill the row or bytes budget; the call cap is reached; the shard is closed and read to its end
(no next iterator); or it is the shard's tip (an empty page, or a page shorter than asked for, at
``millisBehindLatest`` 0). Fetching the next page ahead is only worth it when none of these can happen,
whatever the rows of the current page turn out to be: :func:`reads_on` answers that from bounds taken
before the page is turned into rows (upper bounds of its rows and of the bytes they hold, the latest
arrival on it, its last sequence number). A "yes" is then certain, so a page fetched ahead is always
one the read would have asked for next: the records fetched stay the records delivered. The same
answer says the page may be taken whole, without checking each row against the stop rules. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PageFacts:
    """What a read knows of a page before it turns it into rows."""

    records: int  # Kinesis records on the page
    asked: int  # the Limit the page was fetched with
    has_next: bool  # a next iterator came back (no: the shard is closed and read to its end)
    millis_behind_latest: int | None
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
    calls: int  # GetRecords calls made, the page's included
    going_to_end: bool  # the shard is known to be closed and the read goes on to its end
    stop_sequence: int | None = None  # the known end's sequence number (a replay)
    stop_at_shard_end: bool = False  # the known end is the shard's end
    cutoff_ms: int | None = None
    max_records: int | None = None
    max_bytes: int | None = None
    max_calls: int | None = None


def page_within_stops(page: PageFacts, state: ReadState) -> bool:
    """Every row of the page is taken and none of them ends the read (no per-row check needed)."""
    stop, last = state.stop_sequence, page.last_sequence
    if stop is not None and last is not None and last >= stop:
        return False  # the known end is on this page
    cutoff, latest = state.cutoff_ms, page.latest_arrival_ms
    if cutoff is not None and latest is not None and latest > cutoff:
        return False  # the cut-off falls on this page
    if state.max_records is not None and state.rows + page.rows_bound >= state.max_records:
        return False  # the row budget may fill on this page
    return state.max_bytes is None or state.held + page.held_bound < state.max_bytes


def reads_on(page: PageFacts, state: ReadState) -> bool:
    """The read certainly asks for another page after this one (see the module docstring)."""
    if not page.has_next:
        return False  # the shard's end
    if state.max_calls is not None and state.calls >= state.max_calls:
        return False
    known_end = state.stop_sequence is not None or state.stop_at_shard_end
    caught_up = page.millis_behind_latest in (0, None) and not (state.going_to_end or state.stop_at_shard_end)
    if caught_up and (page.records == 0 or (not known_end and page.records < page.asked)):
        return False  # the tip
    return page_within_stops(page, state)


def next_limit(page: PageFacts, state: ReadState, get_records_limit: int) -> int:
    """The Limit of the call after this page, as the read would compute it once the page's rows are in
    (taking the bounds for them: never more records than the budgets can still take)."""
    limit = get_records_limit
    rows = state.rows + page.rows_bound
    held = state.held + page.held_bound
    if state.max_records is not None:
        limit = max(1, min(limit, state.max_records - rows))
    if state.max_bytes is not None and held:
        room = (state.max_bytes - held) * rows // held + 1
        limit = max(1, min(limit, room))
    return limit
