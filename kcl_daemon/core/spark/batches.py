"""Micro-batches the driver plans and executors end (offsets v2): the rules, as pure functions.

The driver writes into Spark's offset log, per shard, where a batch starts (an exact position: a
sequence number and sub-sequence, or a sentinel), whether the batch reads the shard and its row
budget. The executor task that reads the shard decides where its part of the batch ends (the budget,
the shard's tip, the shard's end or the AvailableNow cut-off) and publishes that end, first writer
wins, before it hands Spark a row. Planning the next batch turns the publications into exact starts.

JSON shape (v2), every dict in one fixed key order (Spark compares offsets as text)::

    {"batch": 7, "run": "3f9c0a1b2c4d",
     "shards": {"shardId-000000000000": {"from": {"seq": "4959…", "sub": 0}, "last": "tip",
                                         "max": 100000, "read": true}},
     "stream": "orders", "until": null, "v": 2}

``batch`` counts the source's batches within ``run`` (drawn when the query's first offset is made, so a
query on a fresh checkpoint never meets an older query's publications); ``last`` is why the shard's
last read stopped (:class:`Stop`, null before its first read); ``until`` is the AvailableNow cut-off
(epoch ms) the batch was planned under.

Planning batch n + 1 from the end offset of batch n (:func:`frontier`, then :func:`plan_next`):

1. Positions after batch n: the publication of every shard batch n read, ``from`` for the others
   (:func:`positions_after`; a read shard without a publication is :class:`EndMissing`).
2. New child shards are tracked at TRIM_HORIZON; a child is readable once its parents are at SHARD_END.
3. Per readable shard (:func:`decide`): read it without asking when its last read stopped on its
   budget, it was never read, or it is closed; ask Kinesis (one record after its end) when the last
   read reached the tip, or the cut-off of an earlier AvailableNow run; leave it when it stopped at
   this run's cut-off.
4. Nothing to read: no batch. Otherwise the row limit is split over the shards to read.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kcl_daemon.core.sequence import ExtendedSequenceNumber, InvalidSequenceNumber
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.spark.offsets import (
    VERSION as V1,
)
from kcl_daemon.core.spark.offsets import (
    BadOffset,
    JsonDict,
    ShardPos,
    SourceOffset,
    readable_shards,
    split_budget,
    track_new_shards,
)

VERSION: Final = 2
#: ``batch`` of a query's first offset: no batch has read anything yet.
BEFORE_FIRST: Final = -1


class Stop(enum.StrEnum):
    """Why a read of one shard stopped where it did."""

    BUDGET = "budget"  # the shard's budget (rows, or bytes held) was used up: more may follow at once
    TIP = "tip"  # the read reached the shard's tip (an empty or short page at MillisBehindLatest 0)
    CUTOFF = "cutoff"  # the next record arrived after the AvailableNow cut-off
    END = "end"  # the shard is closed and was read to its end


class Decision(enum.StrEnum):
    """What the planner does with a readable shard."""

    READ = "read"  # read it in the next batch without asking Kinesis
    PROBE = "probe"  # ask for one record after its end first
    WAIT = "wait"  # nothing to read under this cut-off


class EndMissing(BadOffset):
    """A shard a batch read has no publication: the store lost it (restored, edited, expired)."""


@dataclass(frozen=True, slots=True)
class ShardEntry:
    """One shard in a batch's offset: where the batch starts on it, and whether and how much it reads."""

    start: ShardPos
    last: Stop | None
    max_rows: int
    read: bool

    def to_json(self) -> JsonDict:
        return {
            "from": self.start.to_json(),
            "last": None if self.last is None else str(self.last),
            "max": self.max_rows,
            "read": self.read,
        }

    @classmethod
    def from_json(cls, shard_id: str, data: object) -> ShardEntry:
        if not isinstance(data, Mapping):
            raise BadOffset(f"shard {shard_id}: entry {data!r} is not an object")
        last, max_rows, read = data.get("last"), data.get("max"), data.get("read")
        if not isinstance(max_rows, int) or not isinstance(read, bool) or max_rows < 0:
            raise BadOffset(f"shard {shard_id}: entry {dict(data)!r} is malformed")
        try:
            stop = None if last is None else Stop(str(last))
        except ValueError:
            raise BadOffset(f"shard {shard_id}: unknown stop reason {last!r}") from None
        return cls(ShardPos.from_json(shard_id, data.get("from")), stop, max_rows, read)


@dataclass(frozen=True, slots=True)
class BatchOffset:
    """The end offset of one batch (what Spark logs before the batch runs)."""

    stream: str
    run: str
    batch: int
    shards: Mapping[str, ShardEntry]
    until_ms: int | None = None

    @property
    def read_shards(self) -> tuple[str, ...]:
        return tuple(shard for shard in sorted(self.shards) if self.shards[shard].read)

    def to_json(self) -> JsonDict:
        return {
            "batch": self.batch,
            "run": self.run,
            "shards": {shard: self.shards[shard].to_json() for shard in sorted(self.shards)},
            "stream": self.stream,
            "until": self.until_ms,
            "v": VERSION,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> BatchOffset:
        if data.get("v") != VERSION:
            raise BadOffset(f"offset version {data.get('v')!r} is not {VERSION}")
        stream, run, batch, shards, until = (
            data.get("stream"),
            data.get("run"),
            data.get("batch"),
            data.get("shards"),
            data.get("until"),
        )
        if (
            not isinstance(stream, str)
            or not isinstance(run, str)
            or not isinstance(batch, int)
            or not isinstance(shards, Mapping)
            or not (until is None or isinstance(until, int))
        ):
            raise BadOffset("offset has no stream, run, batch or shards, or a malformed cut-off")
        entries = {str(k): ShardEntry.from_json(str(k), v) for k, v in shards.items()}
        return cls(stream, run, batch, entries, until)


def parse_offset(data: Mapping[str, object]) -> BatchOffset | SourceOffset:
    """An offset of either version: v2 (executor reads) or v1 (driver reads, and older checkpoints)."""
    version = data.get("v")
    if version == VERSION:
        return BatchOffset.from_json(data)
    if version == V1:
        return SourceOffset.from_json(data)
    raise BadOffset(
        f"offset version {version!r} is neither {V1} nor {VERSION}: was it written by this source?"
    )


def first_offset(start: SourceOffset, run: str) -> BatchOffset:
    """A query's offset before its first batch: a new query's start positions, or a v1 checkpoint's
    last end positions when a query moves from driver reads to executor reads (nothing read yet)."""
    return BatchOffset(
        start.stream,
        run,
        BEFORE_FIRST,
        {shard: ShardEntry(start.shards[shard], None, 0, False) for shard in sorted(start.shards)},
        None,
    )


@dataclass(frozen=True, slots=True)
class PublishedEnd:
    """Where a shard's part of one batch ended (``end``: every record at or before it was read), why,
    and how many rows the read yielded."""

    end: ShardPos
    reason: Stop
    rows: int

    def to_json(self) -> str:
        return json.dumps(
            {
                "reason": str(self.reason),
                "rows": self.rows,
                "seq": self.end.checkpoint.sequence_number,
                "sub": self.end.checkpoint.sub_sequence_number,
                "ts": self.end.timestamp_ms,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> PublishedEnd:
        try:
            data = json.loads(text)
            seq, sub, ts = str(data["seq"]), int(data["sub"]), data.get("ts")
            position = ShardPos(ExtendedSequenceNumber(seq, sub), None if ts is None else int(ts))
            return cls(position, Stop(str(data["reason"])), int(data["rows"]))
        except (ValueError, KeyError, TypeError, InvalidSequenceNumber) as exc:
            raise BadOffset(f"publication {text!r} is malformed: {exc}") from None


def end_reason(*, shard_end: bool, rows: int, max_rows: int, cut: bool, full: bool = False) -> Stop:
    """Why a read stopped: the shard's end, else its budget (``max_rows``, or ``full``: the bytes it may
    hold), else the cut-off, else the tip."""
    if shard_end:
        return Stop.END
    if rows >= max_rows or full:
        return Stop.BUDGET
    if cut:
        return Stop.CUTOFF
    return Stop.TIP


def positions_after(
    offset: BatchOffset, ends: Mapping[str, PublishedEnd]
) -> dict[str, tuple[ShardPos, Stop | None]]:
    """Each shard's position after the batch ``offset`` ended, and why its last read stopped.

    Raises :class:`EndMissing` naming the run, the batch and every shard the batch read without a
    publication in ``ends``.
    """
    missing = [shard for shard in offset.read_shards if shard not in ends]
    if missing:
        raise EndMissing(
            f"batch {offset.batch} of run {offset.run} read shard(s) {', '.join(missing)} but their "
            "ends are not in the store: start the query with a new checkpointLocation"
        )
    out: dict[str, tuple[ShardPos, Stop | None]] = {}
    for shard in sorted(offset.shards):
        entry = offset.shards[shard]
        if entry.read:
            published = ends[shard]
            out[shard] = (published.end, published.reason)
        else:
            out[shard] = (entry.start, entry.last)
    return out


def committed_offset(offset: BatchOffset, ends: Mapping[str, PublishedEnd]) -> SourceOffset:
    """The positions after batch ``offset``: what the lease checkpoints say once Spark committed it."""
    return SourceOffset(offset.stream, {s: pos for s, (pos, _) in positions_after(offset, ends).items()})


def decide(
    last: Stop | None, previous_until_ms: int | None, until_ms: int | None, *, closed: bool = False
) -> Decision:
    """What to do with a readable shard whose last read stopped for ``last``.

    ``previous_until_ms`` is the cut-off the last batch ran under, ``until_ms`` the current one. A
    ``closed`` shard (ListShards gives it an ending sequence number) that is not at SHARD_END yet is
    read without asking: GetRecords can answer a closed shard with empty pages before the one that
    ends it, so only a read walks it to its end.
    """
    if last is None or last is Stop.BUDGET:
        return Decision.READ
    if last is Stop.CUTOFF and until_ms is not None and previous_until_ms == until_ms:
        return Decision.WAIT  # the next record arrived after this very cut-off
    return Decision.READ if closed else Decision.PROBE


@dataclass(frozen=True, slots=True)
class Frontier:
    """Where every tracked shard stands after the previous batch, and what planning needs to ask."""

    previous: BatchOffset
    positions: Mapping[str, ShardPos]
    last: Mapping[str, Stop | None]
    decisions: Mapping[str, Decision]  # readable shards only

    @property
    def to_probe(self) -> tuple[str, ...]:
        return tuple(s for s in sorted(self.decisions) if self.decisions[s] is Decision.PROBE)


def frontier(
    previous: BatchOffset,
    ends: Mapping[str, PublishedEnd],
    shards: Sequence[Shard],
    until_ms: int | None,
) -> Frontier:
    """Steps 1 to 3 of the module docstring: positions, new children, and what to do per shard."""
    settled = positions_after(previous, ends)
    after = SourceOffset(previous.stream, {shard: pos for shard, (pos, _) in settled.items()})
    tracked = track_new_shards(after, shards)
    last = {shard: settled[shard][1] if shard in settled else None for shard in tracked.shards}
    closed = {shard.shard_id for shard in shards if not shard.is_open}
    decisions = {
        shard: decide(last[shard], previous.until_ms, until_ms, closed=shard in closed)
        for shard in readable_shards(after, tracked, shards)
    }
    return Frontier(previous, dict(tracked.shards), last, decisions)


def plan_next(
    front: Frontier,
    news: Mapping[str, bool],
    *,
    max_rows: int | None,
    per_shard_cap: int,
    until_ms: int | None,
) -> BatchOffset | None:
    """The next batch's offset, or None when there is nothing to read (Spark plans no batch).

    ``news``: for each probed shard, whether Kinesis has a record after its end (before the cut-off).
    """
    to_read = [
        shard
        for shard in sorted(front.decisions)
        if front.decisions[shard] is Decision.READ
        or (front.decisions[shard] is Decision.PROBE and news.get(shard, False))
    ]
    budget = {
        shard: rows
        for shard, rows in split_budget(
            max_rows, per_shard_cap, to_read, rotate=front.previous.batch + 1
        ).items()
        if rows > 0
    }
    if not budget:
        return None
    previous = front.previous
    return BatchOffset(
        previous.stream,
        previous.run,
        previous.batch + 1,
        {
            shard: ShardEntry(
                front.positions[shard], front.last[shard], budget.get(shard, 0), shard in budget
            )
            for shard in sorted(front.positions)
        },
        until_ms,
    )


def batches_to_prune(committed_batch: int, keep: int = 2) -> Iterable[int]:
    """Batches whose publications can go once ``committed_batch`` is committed: all but the last
    ``keep`` (the one the lease checkpoints come from, and the one before it for a late listener)."""
    newest_dropped = committed_batch - keep
    return range(max(0, newest_dropped - 1), newest_dropped + 1) if newest_dropped >= 0 else ()
