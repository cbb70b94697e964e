"""Does a GetRecords response mean the shard has ended? (contract §6.4, adapted to what emulators return)

:func:`judge_response` decides from the response facts plus what ListShards says about the shard:

1. A next iterator and no child shards: keep reading (``CONTINUE``) - except when ListShards says the
   shard is closed, the response is empty and the reader has already fetched the shard's ending
   sequence number (or the shard is closed with an ending sequence number below its starting one,
   i.e. it never held a record). Then the shard is over: no record can follow its ending sequence
   number. On AWS the next call would return the null iterator; **moto never does** (its closed
   shards hand out iterators forever), so this is how a closed shard ends there.
2. No next iterator and child shards that each list their parents: ``SHARD_END`` with those children
   (the AWS contract).
3. A next iterator *and* child shards, or a child that lists no parent: ``INVALID``; the reader backs
   off and reads again with the same iterator (as the Java KCL does).
4. No next iterator and no child shards (**kinesalite** always answers this way, it never returns
   ``ChildShards``): ask ListShards first (``LIST_SHARDS``). Then: the shard is not listed any more
   -> ``SHARD_END`` without children (like ``ResourceNotFoundException``, contract §6.6); the shard is
   closed -> ``SHARD_END`` with the listed shards that name it as a parent; the shard is still listed
   as open -> ``INVALID``.

Whenever the verdict needs ListShards and the caller has not looked yet (``listed_children is None``)
the verdict is ``LIST_SHARDS``; the caller lists, then judges the same response again.

Pure: facts in, a verdict out.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kcl_daemon.core.shards.graph import ChildShard, Shard


class ReadOutcome(enum.StrEnum):
    CONTINUE = "continue"  # deliver the records, keep reading with the next iterator
    SHARD_END = "shard_end"  # deliver the records, then report the end and the children
    INVALID = "invalid"  # deliver nothing; back off and read again with the same iterator
    LIST_SHARDS = "list_shards"  # call ListShards, then judge the same response again


@dataclass(frozen=True, slots=True)
class ReadVerdict:
    outcome: ReadOutcome
    reason: str
    child_shards: tuple[ChildShard, ...] = ()


@dataclass(frozen=True, slots=True)
class ResponseFacts:
    """What :func:`judge_response` needs from one GetRecords response."""

    has_next_iterator: bool
    child_shards: tuple[ChildShard, ...]
    record_count: int


def children_of(shard_id: str, shards: Iterable[Shard]) -> tuple[ChildShard, ...]:
    """The listed shards that name ``shard_id`` as a parent, as ``ChildShard`` entries, by shard id."""
    return tuple(
        ChildShard(
            shard_id=shard.shard_id,
            parent_shard_ids=shard.parent_shard_ids,
            starting_hash_key=shard.starting_hash_key,
            ending_hash_key=shard.ending_hash_key,
        )
        for shard in sorted(shards, key=lambda s: s.shard_id)
        if shard_id in shard.parent_shard_ids
    )


def _read_past_end(shard: Shard, last_fetched: int | None) -> bool:
    end = shard.ending_sequence_number
    if end is None:
        return False
    if end < shard.starting_sequence_number:
        return True  # closed before it ever held a record
    return last_fetched is not None and last_fetched >= end


def judge_response(
    facts: ResponseFacts,
    *,
    shard: Shard | None,
    last_fetched: int | None,
    listed_children: Sequence[ChildShard] | None,
) -> ReadVerdict:
    """The verdict on one GetRecords response (see the module rules).

    ``shard`` is what ListShards last said about the shard being read (``None``: not listed any more),
    ``last_fetched`` the largest sequence number fetched so far including this response, and
    ``listed_children`` the shards ListShards lists as its children (``None``: not looked up yet).
    """
    children = facts.child_shards
    if facts.has_next_iterator:
        if children:
            return ReadVerdict(ReadOutcome.INVALID, "a next iterator together with child shards")
        if facts.record_count == 0 and shard is not None and _read_past_end(shard, last_fetched):
            if listed_children is None:
                return ReadVerdict(ReadOutcome.LIST_SHARDS, "closed shard read to its ending sequence number")
            return ReadVerdict(
                ReadOutcome.SHARD_END,
                "closed shard read to its ending sequence number, but the service still hands out "
                "iterators (moto); children from ListShards",
                tuple(listed_children),
            )
        return ReadVerdict(ReadOutcome.CONTINUE, "more to read")
    if children:
        orphans = [child.shard_id for child in children if not child.parent_shard_ids]
        if orphans:
            return ReadVerdict(ReadOutcome.INVALID, f"child shards without parents: {', '.join(orphans)}")
        return ReadVerdict(ReadOutcome.SHARD_END, "no next iterator; child shards returned", children)
    if listed_children is None:
        return ReadVerdict(ReadOutcome.LIST_SHARDS, "no next iterator and no child shards")
    if shard is None:
        return ReadVerdict(ReadOutcome.SHARD_END, "no next iterator and the shard is not listed any more")
    if not shard.is_open:
        return ReadVerdict(
            ReadOutcome.SHARD_END,
            "no next iterator and no child shards (kinesalite); children from ListShards",
            tuple(listed_children),
        )
    return ReadVerdict(ReadOutcome.INVALID, "no next iterator, no child shards, and the shard is listed open")
