"""Where a Spark query stands on each shard, and the driver-read mode's offsets (v1) with their rules.

A shard's position has the meaning of a KCL checkpoint: every user record at or before it was read.
It is an :class:`ExtendedSequenceNumber` (a sequence number with its KPL sub-sequence, or one of
``TRIM_HORIZON``, ``AT_TIMESTAMP`` (with its epoch-millisecond timestamp) and ``SHARD_END``), so it
maps 1:1 onto the lease table's ``checkpoint`` + ``checkpointSubSequenceNumber``, and reading resumes by
the daemon's own rule (:func:`kcl_daemon.core.shards.iterator.iterator_position_for` + ``records_after``).

JSON shape (v1)::

    {"shards": {"shardId-000000000000": {"seq": "4959...", "sub": 0}, ...}, "stream": "name", "v": 1}

Spark stores the string verbatim and compares offsets *as strings*, so every dict here is built in one
fixed key order: the same offset always serialises to the same text.

Parent-before-child across micro-batches: a shard is readable only when none of its parents is tracked
at a position other than ``SHARD_END`` in the batch's *start* offset. Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kcl_daemon.core.sequence import (
    SHARD_END,
    TRIM_HORIZON,
    ExtendedSequenceNumber,
    InvalidSequenceNumber,
    Sentinel,
)
from kcl_daemon.core.shards.graph import Shard, shards_at_initial_position

VERSION: Final = 1


class StartKind(enum.StrEnum):
    TRIM_HORIZON = "TRIM_HORIZON"
    LATEST = "LATEST"
    AT_TIMESTAMP = "AT_TIMESTAMP"
    LEASE_TABLE = "leaseTable"


@dataclass(frozen=True, slots=True)
class StartingPosition:
    """Where a new query starts (option ``startingPosition``)."""

    kind: StartKind
    timestamp_ms: int | None = None  # AT_TIMESTAMP only


FROM_TRIM_HORIZON: Final = StartingPosition(StartKind.TRIM_HORIZON)
JsonDict = dict[str, object]


class BadOffset(ValueError):
    """An offset Spark handed back that this source did not write (or a newer version wrote)."""


@dataclass(frozen=True, slots=True)
class ShardPos:
    """Everything at or before ``checkpoint`` has been read (``timestamp_ms`` for AT_TIMESTAMP)."""

    checkpoint: ExtendedSequenceNumber
    timestamp_ms: int | None = None

    @property
    def is_shard_end(self) -> bool:
        return self.checkpoint.is_shard_end

    def to_json(self) -> JsonDict:
        out: JsonDict = {"seq": self.checkpoint.sequence_number, "sub": self.checkpoint.sub_sequence_number}
        if self.timestamp_ms is not None:
            out["ts"] = self.timestamp_ms
        return out

    @classmethod
    def from_json(cls, shard_id: str, data: object) -> ShardPos:
        if not isinstance(data, Mapping):
            raise BadOffset(f"shard {shard_id}: position {data!r} is not an object")
        seq, sub, ts = data.get("seq"), data.get("sub", 0), data.get("ts")
        if not isinstance(seq, str) or not isinstance(sub, int) or not (ts is None or isinstance(ts, int)):
            raise BadOffset(f"shard {shard_id}: position {dict(data)!r} is malformed")
        try:
            checkpoint = ExtendedSequenceNumber(seq, sub)
        except InvalidSequenceNumber as exc:
            raise BadOffset(f"shard {shard_id}: {exc}") from None
        if (seq == Sentinel.AT_TIMESTAMP) != (ts is not None):
            raise BadOffset(f"shard {shard_id}: AT_TIMESTAMP and ts go together")
        return cls(checkpoint, ts)


AT_TRIM_HORIZON: Final = ShardPos(TRIM_HORIZON)
AT_SHARD_END: Final = ShardPos(SHARD_END)


def at_timestamp(timestamp_ms: int) -> ShardPos:
    return ShardPos(ExtendedSequenceNumber(Sentinel.AT_TIMESTAMP), timestamp_ms)


def after(sequence_number: str, sub_sequence_number: int = 0) -> ShardPos:
    return ShardPos(ExtendedSequenceNumber(sequence_number, sub_sequence_number))


@dataclass(frozen=True, slots=True)
class SourceOffset:
    stream: str
    shards: Mapping[str, ShardPos]

    def to_json(self) -> JsonDict:
        return {
            "shards": {shard: self.shards[shard].to_json() for shard in sorted(self.shards)},
            "stream": self.stream,
            "v": VERSION,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> SourceOffset:
        if data.get("v") != VERSION:
            raise BadOffset(
                f"offset version {data.get('v')!r} is not {VERSION}: was it written by this source?"
            )
        stream, shards = data.get("stream"), data.get("shards")
        if not isinstance(stream, str) or not isinstance(shards, Mapping):
            raise BadOffset("offset has no stream name or no shards")
        return cls(stream, {str(k): ShardPos.from_json(str(k), v) for k, v in shards.items()})

    def position(self, shard_id: str) -> ShardPos:
        """Where a shard stands; a shard not tracked yet (a new child) starts at TRIM_HORIZON."""
        return self.shards.get(shard_id, AT_TRIM_HORIZON)


def _start_for(start: StartingPosition, now_ms: int) -> ShardPos:
    if start.kind is StartKind.TRIM_HORIZON:
        return AT_TRIM_HORIZON
    if start.kind is StartKind.AT_TIMESTAMP:
        assert start.timestamp_ms is not None
        return at_timestamp(start.timestamp_ms)
    if start.kind is StartKind.LATEST:
        return at_timestamp(now_ms)  # pinned once: initialOffset() is called more than once
    raise ValueError(f"{start.kind} is not a stream position")


def initial_offset(
    stream: str,
    shards: Sequence[Shard],
    start: StartingPosition,
    now_ms: int,
    *,
    lease_positions: Mapping[str, ShardPos] | None = None,
    fallback: StartingPosition = FROM_TRIM_HORIZON,
) -> SourceOffset:
    """The offset a new query starts from.

    TRIM_HORIZON / AT_TIMESTAMP: every listed shard (children wait for parents). LATEST: the open
    shards, at ``now_ms`` (pinned, so both of Spark's initialOffset() calls agree). leaseTable: each
    leased shard at its checkpoint; an unleased shard with a leased ancestor at TRIM_HORIZON (KCL would
    create its lease at the parent's shard end); any other shard at ``fallback``.
    """
    if start.kind is not StartKind.LEASE_TABLE:
        initial = Sentinel.LATEST if start.kind is StartKind.LATEST else Sentinel.TRIM_HORIZON
        chosen = shards_at_initial_position(shards, initial) if initial is Sentinel.LATEST else shards
        pos = _start_for(start, now_ms)
        return SourceOffset(stream, {s.shard_id: pos for s in chosen})
    leases = lease_positions or {}
    by_id = {s.shard_id: s for s in shards}
    positions: dict[str, ShardPos] = {}

    def has_leased_ancestor(shard_id: str) -> bool:
        seen: set[str] = set()
        pending = list(by_id[shard_id].parent_shard_ids) if shard_id in by_id else []
        while pending:
            parent = pending.pop()
            if parent in leases:
                return True
            if parent in by_id and parent not in seen:
                seen.add(parent)
                pending.extend(by_id[parent].parent_shard_ids)
        return False

    fallback_shards = shards_at_initial_position(
        [s for s in shards if not has_leased_ancestor(s.shard_id) and s.shard_id not in leases],
        Sentinel.LATEST if fallback.kind is StartKind.LATEST else Sentinel.TRIM_HORIZON,
    )
    fallback_ids = {s.shard_id for s in fallback_shards}
    for shard in shards:
        shard_id = shard.shard_id
        if shard_id in leases:
            positions[shard_id] = leases[shard_id]
        elif has_leased_ancestor(shard_id):
            positions[shard_id] = AT_TRIM_HORIZON
        elif shard_id in fallback_ids:
            positions[shard_id] = _start_for(fallback, now_ms)
    # Leases of shards no longer listed (trimmed) are kept only while they have something to say.
    for shard_id, pos in leases.items():
        if shard_id not in positions and not pos.is_shard_end:
            positions[shard_id] = pos
    return SourceOffset(stream, positions)


def track_new_shards(offset: SourceOffset, shards: Iterable[Shard]) -> SourceOffset:
    """``offset`` plus the listed shards that descend from tracked ones (at TRIM_HORIZON), minus
    finished shards that are no longer listed (trimmed: nothing waits on them any more)."""
    listed = {s.shard_id: s for s in shards}
    positions = dict(offset.shards)
    changed = True
    while changed:  # a child of a new child (two reshards between listings) is tracked too
        changed = False
        for shard_id, shard in listed.items():
            if shard_id not in positions and any(p in positions for p in shard.parent_shard_ids):
                positions[shard_id] = AT_TRIM_HORIZON
                changed = True
    for shard_id in [s for s, pos in positions.items() if pos.is_shard_end and s not in listed]:
        del positions[shard_id]
    return SourceOffset(offset.stream, positions)


def readable_shards(start: SourceOffset, tracked: SourceOffset, shards: Iterable[Shard]) -> list[str]:
    """Tracked shards not at SHARD_END none of whose parents is unfinished in ``start``, sorted."""
    parents = {s.shard_id: s.parent_shard_ids for s in shards}
    out = []
    for shard_id, pos in tracked.shards.items():
        if pos.is_shard_end:
            continue
        blocked = any(
            p in start.shards and not start.shards[p].is_shard_end for p in parents.get(shard_id, ())
        )
        if not blocked:
            out.append(shard_id)
    return sorted(out)


def split_budget(
    max_rows: int | None, per_shard_cap: int, shard_ids: Sequence[str], *, rotate: int = 0
) -> dict[str, int]:
    """Each readable shard's share of one batch's row limit (``None``: only the per-shard cap).

    The limit is split evenly; the remainder goes to the shards from position ``rotate`` on (modulo
    their number), so a limit smaller than the number of shards does not starve the same shards batch
    after batch. A share is never above ``per_shard_cap``; a shard whose share is 0 waits for a later
    batch.
    """
    if not shard_ids:
        return {}
    if max_rows is None:
        return dict.fromkeys(shard_ids, per_shard_cap)
    count = len(shard_ids)
    base, remainder = divmod(max_rows, count)
    first = rotate % count
    return {
        shard: min(per_shard_cap, base + (1 if (index - first) % count < remainder else 0))
        for index, shard in enumerate(shard_ids)
    }


@dataclass(frozen=True, slots=True)
class ShardRange:
    """One shard's part of a micro-batch: the records after ``start`` up to and including ``end``."""

    shard_id: str
    start: ShardPos
    end: ShardPos
    starting_hash_key: int
    ending_hash_key: int


def shard_ranges(start: SourceOffset, end: SourceOffset, shards: Mapping[str, Shard]) -> list[ShardRange]:
    """The shards whose position moved between ``start`` and ``end``, in shard-id order.

    A shard that only appeared in ``end`` at TRIM_HORIZON (discovered, not read yet) has no range.
    """
    ranges = []
    for shard_id in sorted(end.shards):
        before, after_ = start.position(shard_id), end.shards[shard_id]
        if before == after_:
            continue
        shard = shards.get(shard_id)
        ranges.append(
            ShardRange(
                shard_id,
                before,
                after_,
                0 if shard is None else shard.starting_hash_key,
                (2**128 - 1) if shard is None else shard.ending_hash_key,
            )
        )
    return ranges


def group_ranges(ranges: Sequence[ShardRange], shards_per_task: int) -> list[tuple[ShardRange, ...]]:
    """Consecutive groups of at most ``shards_per_task`` ranges: one Spark task each."""
    if shards_per_task < 1:
        raise ValueError("shards_per_task must be at least 1")
    return [tuple(ranges[i : i + shards_per_task]) for i in range(0, len(ranges), shards_per_task)]
