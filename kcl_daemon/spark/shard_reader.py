"""Read one shard from a position with GetRecords, by the daemon's rules.

One loop serves every reader of the Spark source, so they agree record for record:

* an executor **deciding** where its part of a batch ends reads from the batch's start until its budget
  (rows, or the bytes its rows hold),
  the shard's tip (an empty or short page at ``millisBehindLatest == 0``), the shard's end, or the first
  record that arrived after the AvailableNow cut-off (``readMode=driver``: the driver's probe, with a
  call cap);
* a **replay** (a retried task, the replay after a restart, ``readMode=driver``'s executors) reads from
  the same start up to and including a known end (``stop_at``).

A read that stops at the tip has looked at every record it fetched: its end moves past records it
dropped (a KPL aggregate whose user records hash outside the shard, records at or before the start), so
a shard whose newest record is dropped does not look new again and again. ``head`` is a first page some
other call already fetched (the planner's one-record probe): the read starts with it instead of calling.

Reads start where the daemon would (:func:`iterator_position_for` + :func:`records_after`: at the
checkpoint's sequence number, dropping user records at or before it), KPL aggregates are split by the
daemon's :class:`Deaggregator`, calls are paced per shard (:mod:`kcl_daemon.core.shards.read_pacing`) and
retried under the named ``GET_RECORDS`` policy, re-getting an expired iterator after the last record
fetched. Never logs payloads.

**Whole pages.** A page whose bounds (:func:`~kcl_daemon.spark.rows.page_facts`: last sequence number,
latest arrival, upper bounds of its rows and held bytes) show that none of its rows can end the read
(:func:`~kcl_daemon.core.spark.whole_pages.page_within_stops`: not the known end, not past the cut-off,
no budget that may fill) and that holds no KPL aggregate or record at or before the start is added
whole, column by column; any other page goes row by row. Both give the same rows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kcl_daemon.aws.kinesis import GetRecordsResult, Kinesis
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.core.shards.iterator import IteratorPosition, iterator_position_for, refresh_position
from kcl_daemon.core.shards.read_pacing import seconds_until_next_read
from kcl_daemon.core.spark.offsets import AT_SHARD_END, ShardPos, after
from kcl_daemon.core.spark.whole_pages import ReadState, page_within_stops
from kcl_daemon.errors import IteratorExpired, KclError, ShardNotFound
from kcl_daemon.retrieval.deaggregate import Deaggregator
from kcl_daemon.retry import GET_RECORDS
from kcl_daemon.spark.rows import Rows, held_bytes, page_facts, user_rows

logger = logging.getLogger(__name__)


class DataLoss(KclError):
    """Records the batch planned to read are gone (trimmed, or the shard vanished)."""


@dataclass(frozen=True, slots=True)
class ReadLimits:
    max_records: int | None = None  # None: no limit (the executor reads to the planned end)
    max_calls: int | None = None
    get_records_limit: int = 10_000
    min_interval_s: float = 0.2
    cutoff_ms: int | None = None  # stop before the first record that arrived after this (AvailableNow)
    max_bytes: int | None = None  # stop once the rows taken hold this much (rows.held_bytes)


@dataclass(frozen=True, slots=True)
class Resume:
    """An iterator pointing right after a read's end, and when its shard was last called: the next
    read from that end goes on with it (one GetRecords call, no GetShardIterator, pacing kept)."""

    iterator: str
    last_call: float | None


@dataclass(slots=True)
class ShardRead:
    end: ShardPos
    records: Rows = field(default_factory=Rows)
    millis_behind_latest: int | None = None
    calls: int = 0
    at_tip: bool = False
    resume: Resume | None = None  # set when every record fetched was taken (the iterator is exact)
    cut: bool = False  # stopped before a record that arrived after the cut-off
    full: bool = False  # stopped because the rows taken reached ``max_bytes``
    held_bytes: int = 0  # rows.held_bytes of the rows taken (counted when ``max_bytes`` is set)


@dataclass(slots=True)
class _Cursor:
    kinesis: Kinesis
    stream: str
    shard_id: str
    start: IteratorPosition
    interval_s: float
    sleep: Callable[[float], None]
    monotonic: Callable[[], float]
    iterator: str | None = None
    last_fetched: str | None = None
    last_call: float | None = None

    def fetch(self, limit: int) -> GetRecordsResult:
        for attempt in GET_RECORDS.retrying(sleep=self.sleep, monotonic=self.monotonic):
            with attempt:
                wait = seconds_until_next_read(self.monotonic(), self.last_call, self.interval_s)
                if wait > 0:
                    self.sleep(wait)
                if self.iterator is None:
                    position = refresh_position(self.last_fetched, self.start)
                    self.iterator = self.kinesis.get_shard_iterator(self.stream, self.shard_id, position)
                self.last_call = self.monotonic()
                try:
                    result = self.kinesis.get_records(self.iterator, limit)
                except IteratorExpired:
                    self.iterator = None
                    raise
                if result.records:
                    self.last_fetched = result.records[-1].sequence_number
                self.iterator = result.next_iterator
                return result
        raise AssertionError("unreachable: the retry policy re-raises the last error")  # pragma: no cover


def timestamp_of(pos: ShardPos) -> datetime | None:
    if pos.timestamp_ms is None:
        return None
    return datetime.fromtimestamp(pos.timestamp_ms / 1000, tz=UTC)


def read_shard(
    kinesis: Kinesis,
    stream: str,
    shard_id: str,
    start: ShardPos,
    *,
    stop_at: ShardPos | None = None,
    limits: ReadLimits,
    deaggregate: bool = True,
    hash_range: tuple[int, int] = (0, 2**128 - 1),
    fail_on_data_loss: bool = True,
    closed: bool = False,
    resume: Resume | None = None,
    head: GetRecordsResult | None = None,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> ShardRead:
    """Read ``shard_id`` after ``start`` (see the module docstring); ``stop_at`` is a known end.

    ``closed``: the shard is known to be closed, so an empty page is not its tip (emulators and the
    service can answer empty pages before the one without a next iterator); the read goes on to the
    end, within ``max_calls``. ``head``: the first page, fetched by someone else from ``start`` with
    ``Limit`` 1 (``resume`` then holds its next iterator). Raises :class:`DataLoss` (when
    ``fail_on_data_loss``) if the read cannot reach ``stop_at`` or the first record is later than the
    numeric start, i.e. records were trimmed before they were read.
    """
    result = ShardRead(end=start)
    if start.is_shard_end:
        return result
    cursor = _Cursor(
        kinesis,
        stream,
        shard_id,
        iterator_position_for(start.checkpoint, timestamp=timestamp_of(start)),
        limits.min_interval_s,
        sleep,
        monotonic,
        iterator=None if resume is None else resume.iterator,
        last_call=None if resume is None else resume.last_call,
    )
    deaggregator = Deaggregator(shard_id, *hash_range) if deaggregate else None
    stop_esn = None if stop_at is None or stop_at.is_shard_end else stop_at.checkpoint
    stop_seq = None if stop_esn is None else int(stop_esn.sequence_number)
    stop_key = None if stop_esn is None else (int(stop_esn.sequence_number), stop_esn.sub_sequence_number)
    start_key = (
        None
        if start.checkpoint.is_sentinel
        else (int(start.checkpoint.sequence_number), start.checkpoint.sub_sequence_number)
    )
    going_to_end = closed or (stop_at is not None and stop_at.is_shard_end)
    last_taken: tuple[str, int] | None = None  # (sequence number, sub-sequence) of the last row taken
    held = 0  # rows.held_bytes of the rows taken, counted when limits.max_bytes is set
    first_page = resume is None  # a resumed iterator (or a head, fetched AFTER the start) starts after it
    last_fetched: str | None = None
    done = False

    def lost(why: str) -> ShardRead:
        message = f"shard {shard_id} of stream {stream}: {why}"
        if fail_on_data_loss:
            raise DataLoss(message + " (set failOnDataLoss=false to skip it)")
        logger.warning("%s; skipping it (failOnDataLoss=false)", message)
        return result

    while not done:
        if limits.max_calls is not None and result.calls >= limits.max_calls:
            break
        if limits.max_records is not None and len(result.records) >= limits.max_records:
            break  # the budget is full: another call would only fetch records past it
        call_limit = limits.get_records_limit
        if limits.max_records is not None:  # never fetch records past the budget (each is >= 1 row)
            call_limit = max(1, min(call_limit, limits.max_records - len(result.records)))
        if limits.max_bytes is not None and held:  # nor many past the bytes budget, rows as big as so far
            room = (limits.max_bytes - held) * len(result.records) // held + 1
            call_limit = max(1, min(call_limit, room))
        if head is not None:
            page, head, call_limit = head, None, 1
            if page.next_iterator is not None:
                cursor.iterator = page.next_iterator
        else:
            try:
                page = cursor.fetch(call_limit)
            except ShardNotFound:
                if stop_at is None or stop_at.is_shard_end:
                    result.end = AT_SHARD_END
                    return result
                return lost("the shard is gone before the planned end was read")
            result.calls += 1
        result.millis_behind_latest = page.millis_behind_latest
        if page.records:
            last_fetched = page.records[-1].sequence_number
            cursor.last_fetched = last_fetched
        if first_page and page.records and not start.checkpoint.is_sentinel:
            first_page = False
            if int(page.records[0].sequence_number) > int(start.checkpoint.sequence_number):
                lost(
                    f"records after {start.checkpoint} were trimmed before they were read "
                    f"(the first one left is {page.records[0].sequence_number})"
                )
        rows = result.records
        facts = page_facts(page.records, deaggregator is not None)
        state = ReadState(
            rows=len(rows),
            held=held,
            stop_sequence=stop_seq,
            cutoff_ms=limits.cutoff_ms,
            max_records=limits.max_records,
            max_bytes=limits.max_bytes,
        )
        if (
            page.records
            and not facts.aggregates
            and (start_key is None or int(page.records[0].sequence_number) > start_key[0])
            and page_within_stops(facts, state)
        ):
            added = rows.add_plain(page.records)  # every record a row, none ends the read
            if limits.max_bytes is not None:
                held += added
            last_taken = (page.records[-1].sequence_number, 0)
        else:
            for row in user_rows(deaggregator, page.records):
                key = (row[1], row[2])
                if start_key is not None and key <= start_key:
                    continue  # the daemon's rule: read AT the checkpoint, drop what it covers
                if stop_key is not None and key > stop_key:
                    done = True
                    break
                if limits.cutoff_ms is not None and row[5] > limits.cutoff_ms:
                    result.cut = done = True
                    break
                if limits.max_records is not None and len(rows) >= limits.max_records:
                    done = True
                    break
                rows.append(row)
                last_taken = (row[0], row[2])
                if stop_key is not None and key == stop_key:
                    done = True
                    break
                if limits.max_bytes is not None:
                    held += held_bytes(row)
                    if held >= limits.max_bytes:
                        result.full = done = True
                        break
        if last_taken is not None:
            result.end = after(*last_taken)
        if done:
            break
        if stop_seq is not None and last_fetched is not None and int(last_fetched) >= stop_seq:
            # the known end was fetched but dropped (its aggregate hashes outside the shard): done
            result.end = stop_at  # type: ignore[assignment]
            break
        if page.next_iterator is None:
            result.end = AT_SHARD_END  # closed, and every record of it was taken
            break
        caught_up = page.millis_behind_latest in (0, None) and not going_to_end
        if caught_up and not page.records:
            result.at_tip = True
            if stop_esn is not None:
                return lost(f"the shard's tip was reached before the planned end {stop_esn}")
            break
        if caught_up and stop_at is None and len(page.records) < call_limit:
            result.at_tip = True  # a short page at the tip: another call now would come back empty
            break
    result.held_bytes = held
    if stop_at is not None and stop_at.is_shard_end and not result.end.is_shard_end:
        return lost("the planned shard end was not reached")
    if result.at_tip and last_fetched is not None and not result.end.is_shard_end:
        past = ExtendedSequenceNumber(last_fetched, 0)
        if past > result.end.checkpoint:
            result.end = after(last_fetched, 0)  # every fetched record was looked at: move past drops
    if not done and cursor.iterator is not None and not result.end.is_shard_end:
        result.resume = Resume(cursor.iterator, cursor.last_call)  # every record fetched was taken
    return result
