"""Turn ``--to AT_TIMESTAMP --timestamp T`` into a checkpoint for one shard, through the stream.

A checkpoint names the last record *processed*, so "start at T" needs the record just before the first
one at or after T:

1. the first record at or after T: ``GetShardIterator AT_TIMESTAMP T`` and ``GetRecords Limit=1``
   (following a few empty pages, which Kinesis may answer on sparse shards);
2. the record before it: read forward from ``AT_TIMESTAMP T - d`` until that first record, for d = 1 s,
   2 s, 4 s, ... until a record before it turns up or d passes the stream's retention period (then
   nothing comes before it and the checkpoint is ``TRIM_HORIZON``, which starts at it);
3. a KPL aggregate before it is de-aggregated, so the checkpoint covers all its user records.

No record at or after T (T is after the last record): the checkpoint is the shard's last record, so
the next record put is the first processed. An empty shard: ``TRIM_HORIZON``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from kcl_daemon.aws.kinesis import AnyRawRecord, Kinesis
from kcl_daemon.checkpoint_tool.plan import Positioned, checkpoint_before
from kcl_daemon.core.sequence import TRIM_HORIZON, ExtendedSequenceNumber
from kcl_daemon.core.shards.iterator import IteratorPosition, IteratorType
from kcl_daemon.retrieval.deaggregate import MAGIC, Deaggregator
from kcl_daemon.retry import KINESIS

logger = logging.getLogger(__name__)

PAGE = 1000
MAX_PAGES = 200
EMPTY_PAGES = 5


@dataclass(frozen=True, slots=True)
class Resolved:
    checkpoint: ExtendedSequenceNumber
    #: the first record the fleet will process afterwards (None: the next one put)
    first_sequence_number: str | None
    note: str


def _page_from(kinesis: Kinesis, stream: str, shard_id: str, at: datetime) -> str:
    position = IteratorPosition(IteratorType.AT_TIMESTAMP, timestamp=at)
    return KINESIS.call(kinesis.get_shard_iterator, stream, shard_id, position)


def first_at_or_after(kinesis: Kinesis, stream: str, shard_id: str, at: datetime) -> str | None:
    """The sequence number of the first record at or after ``at``; None if there is none yet."""
    iterator: str | None = _page_from(kinesis, stream, shard_id, at)
    for _ in range(EMPTY_PAGES):
        if iterator is None:
            return None
        page = KINESIS.call(kinesis.get_records, iterator, 1)
        if page.records:
            return page.records[0].sequence_number
        if not page.millis_behind_latest:
            return None
        iterator = page.next_iterator
    return None


def _positioned(shard_id: str, records: Sequence[AnyRawRecord]) -> list[Positioned]:
    out = []
    for record in records:
        last_sub = 0
        if record.data.startswith(MAGIC):
            user = Deaggregator(shard_id).deaggregate([record])
            last_sub = max((r.sub_sequence_number for r in user), default=0)
        out.append(Positioned(record.sequence_number, last_sub))
    return out


def _read_until(
    kinesis: Kinesis, stream: str, shard_id: str, start: datetime, stop_at: str | None
) -> list[Positioned]:
    """Records from ``start`` up to (not including) ``stop_at``, or to the end of the shard."""
    iterator: str | None = _page_from(kinesis, stream, shard_id, start)
    found: list[Positioned] = []
    limit = None if stop_at is None else int(stop_at)
    for _ in range(MAX_PAGES):
        if iterator is None:
            break
        page = KINESIS.call(kinesis.get_records, iterator, PAGE)
        for record in _positioned(shard_id, page.records):
            if limit is not None and int(record.sequence_number) >= limit:
                return found
            found.append(record)
        if not page.records and not page.millis_behind_latest:
            break
        iterator = page.next_iterator
    return found


def resolve_at_timestamp(
    kinesis: Kinesis, stream: str, shard_id: str, at: datetime, *, retention_s: float
) -> Resolved:
    first = first_at_or_after(kinesis, stream, shard_id, at)
    back = timedelta(seconds=1)
    while True:
        records = _read_until(kinesis, stream, shard_id, at - back, first)
        checkpoint = checkpoint_before(records, first)
        if checkpoint is not None:
            where = f"record {first}" if first else "the next record put"
            return Resolved(checkpoint, first, f"{at.isoformat()}: starts at {where}")
        if back.total_seconds() >= retention_s:
            if first is None:
                return Resolved(TRIM_HORIZON, None, f"{at.isoformat()}: the shard is empty")
            return Resolved(TRIM_HORIZON, first, f"{at.isoformat()}: record {first} is the oldest one")
        back *= 2
