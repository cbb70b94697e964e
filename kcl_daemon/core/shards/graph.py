"""The shard graph and the leases it calls for: shard sync (contract §6.2, §6.3) and shard end
(contract §6.4).

* :func:`hash_range_is_complete`: do shards cover 0..2^128-1 with no gap and no overlap?
* :func:`shards_at_initial_position`: ListShards' ``ShardFilter`` applied on our side, for services
  that ignore it (moto, kinesalite); a no-op on a list that AWS already filtered.
* :func:`leases_to_create`: the leases a shard sync creates. With an empty table (6.2) that is one
  lease per listed shard at the initial position. Otherwise (6.3) only open shards are considered:
  an open shard with no leased ancestry gets a lease at the initial position; an open *descendant*
  of a leased (or, from TRIM_HORIZON/AT_TIMESTAMP, to-be-leased) shard gets none, and the first
  missing level of its ancestry is leased instead, so that children never start before parents.
  Leases come back in creation order: starting sequence number, then shard id.
* :func:`child_leases_at_shard_end`: what the owner of an ended shard does about its children.
* :func:`parents_block`: a child waits while a parent lease exists that is not at SHARD_END.

Pure: shards and leases in, values out. Randomness (the 1-in-30 give-up at shard end) is injected.
"""

from __future__ import annotations

import enum
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import TYPE_CHECKING, Final

from kcl_daemon.core.leases.lease import MAX_HASH_KEY, Lease, lease_key_for
from kcl_daemon.core.leases.lease_codec import LEASE_ENTITY_TYPE
from kcl_daemon.core.sequence import TRIM_HORIZON, ExtendedSequenceNumber, Sentinel

if TYPE_CHECKING:
    from random import Random

INITIAL_POSITIONS: Final = frozenset({Sentinel.TRIM_HORIZON, Sentinel.LATEST, Sentinel.AT_TIMESTAMP})
GIVE_UP_ONE_IN: Final = 30  # Java ShutdownTask.RETRY_RANDOM_MAX_RANGE


class InconsistentShards(Exception):
    """Children of a still-open parent were listed: ListShards raced a reshard. Retry the sync later."""

    def __init__(self, shard_ids: Iterable[str]) -> None:
        self.shard_ids = frozenset(shard_ids)
        super().__init__(
            f"{len(self.shard_ids)} child shards of open parents are inconsistent "
            f"({' '.join(sorted(self.shard_ids))}); ListShards probably raced a reshard"
        )


@dataclass(frozen=True, slots=True)
class Shard:
    """One shard as ListShards describes it; hash keys and sequence numbers as integers."""

    shard_id: str
    parent_shard_id: str | None = None
    adjacent_parent_shard_id: str | None = None
    starting_hash_key: int = 0
    ending_hash_key: int = MAX_HASH_KEY
    starting_sequence_number: int = 0
    ending_sequence_number: int | None = None

    @property
    def is_open(self) -> bool:
        return self.ending_sequence_number is None

    @property
    def parent_shard_ids(self) -> tuple[str, ...]:
        return tuple(p for p in (self.parent_shard_id, self.adjacent_parent_shard_id) if p is not None)


@dataclass(frozen=True, slots=True)
class ChildShard:
    """One entry of the ``ChildShards`` list that GetRecords/SubscribeToShard return at shard end."""

    shard_id: str
    parent_shard_ids: tuple[str, ...]
    starting_hash_key: int
    ending_hash_key: int


def hash_range_is_complete(shards: Iterable[Shard]) -> bool:
    """Sorted by starting hash key: start at 0, end at 2^128-1, each start = previous end + 1."""
    ordered = sorted(shards, key=lambda shard: shard.starting_hash_key)
    if not ordered or ordered[0].starting_hash_key != 0 or ordered[-1].ending_hash_key != MAX_HASH_KEY:
        return False
    return all(nxt.starting_hash_key - prev.ending_hash_key == 1 for prev, nxt in pairwise(ordered))


def shards_at_initial_position(shards: Sequence[Shard], initial_position: Sentinel) -> list[Shard]:
    """The shards an empty-table sync starts from, as ListShards' ``ShardFilter`` would return them.

    ``LATEST``: the open shards. ``TRIM_HORIZON`` and ``AT_TIMESTAMP``: the oldest listed generation,
    i.e. shards none of whose parents is listed (their descendants get leases at shard end). Without
    timestamps on shards, AT_TIMESTAMP can only start from that oldest generation: earlier, never later.
    """
    if initial_position is Sentinel.LATEST:
        return [shard for shard in shards if shard.is_open]
    listed = {shard.shard_id for shard in shards}
    return [shard for shard in shards if not any(p in listed for p in shard.parent_shard_ids)]


def _checkpoint_for(initial_position: Sentinel) -> ExtendedSequenceNumber:
    if initial_position not in INITIAL_POSITIONS:
        raise ValueError(f"{initial_position} is not an initial position")
    return ExtendedSequenceNumber(initial_position)


def _new_lease(
    shard_id: str,
    checkpoint: ExtendedSequenceNumber,
    parent_shard_ids: Iterable[str],
    starting_hash_key: int,
    ending_hash_key: int,
    stream_identifier: str | None,
) -> Lease:
    return Lease(
        lease_key=lease_key_for(shard_id, stream_identifier),
        checkpoint=checkpoint,
        parent_shard_ids=frozenset(parent_shard_ids),
        starting_hash_key=starting_hash_key,
        ending_hash_key=ending_hash_key,
        entity_type=LEASE_ENTITY_TYPE,
        stream_identifier=stream_identifier,
        stream_shard_id=None if stream_identifier is None else shard_id,
    )


def _lease_for_shard(shard: Shard, checkpoint: ExtendedSequenceNumber, stream: str | None) -> Lease:
    # Java newKCLLease: parents straight from the shard, even ones that are no longer listed.
    return _new_lease(
        shard.shard_id,
        checkpoint,
        shard.parent_shard_ids,
        shard.starting_hash_key,
        shard.ending_hash_key,
        stream,
    )


def inconsistent_shard_ids(shards: Iterable[Shard]) -> frozenset[str]:
    """Listed children of listed parents that are still open (Java ``findInconsistentShardIds``)."""
    by_id = {shard.shard_id: shard for shard in shards}
    return frozenset(
        shard.shard_id
        for shard in by_id.values()
        for parent in shard.parent_shard_ids
        if parent in by_id and by_id[parent].is_open
    )


class _NonEmptyTableSync:
    """contract §6.3 (Java ``NonEmptyLeaseTableSynchronizer``): memoized descendant detection.

    The traversal is iterative so that a long chain of reshards cannot exhaust Python's stack.
    """

    def __init__(
        self,
        by_id: dict[str, Shard],
        leased: frozenset[str],
        initial_position: Sentinel,
        stream: str | None,
    ) -> None:
        self.by_id = by_id
        self.leased = leased
        self.initial = _checkpoint_for(initial_position)
        self.from_oldest = initial_position in (Sentinel.TRIM_HORIZON, Sentinel.AT_TIMESTAMP)
        self.stream = stream
        self.is_descendant: dict[str, bool] = {}
        self.should_create: set[str] = set()
        self.new_leases: dict[str, Lease] = {}

    def _present_parents(self, shard_id: str) -> list[str]:
        return sorted({p for p in self.by_id[shard_id].parent_shard_ids if p in self.by_id})

    def descendant(self, shard_id: str) -> bool:
        pending = [shard_id]
        while pending:
            current = pending[-1]
            if current in self.is_descendant:
                pending.pop()
            elif current in self.leased:
                self.is_descendant[current] = True  # base case: it has a lease
                pending.pop()
            else:
                unevaluated = [p for p in self._present_parents(current) if p not in self.is_descendant]
                if unevaluated:
                    pending.extend(unevaluated)
                else:
                    self.is_descendant[current] = self._decide(current)
                    pending.pop()
        return self.is_descendant[shard_id]

    def _decide(self, shard_id: str) -> bool:
        """Every listed parent of ``shard_id`` is decided; decide it, leasing missing parents if needed."""
        parents = self._present_parents(shard_id)
        descendant_parents = {p for p in parents if self.is_descendant[p] or p in self.should_create}
        if not descendant_parents:
            if self.from_oldest:
                self.should_create.add(shard_id)
            return False
        for parent in parents:
            if parent in self.leased:
                continue
            # Lease a parent that is marked "should create", or the other half of a merge whose
            # history is not covered (a parent that is itself not a descendant).
            if parent not in self.new_leases and (
                parent in self.should_create or parent not in descendant_parents
            ):
                self.new_leases[parent] = _lease_for_shard(self.by_id[parent], self.initial, self.stream)
            if parent in self.new_leases:
                checkpoint = (
                    TRIM_HORIZON
                    if parent in descendant_parents and self.initial.sequence_number != Sentinel.AT_TIMESTAMP
                    else self.initial
                )
                self.new_leases[parent] = replace(self.new_leases[parent], checkpoint=checkpoint)
        return True

    def run(self, shards: Sequence[Shard], inconsistent: frozenset[str]) -> None:
        for shard in shards:
            shard_id = shard.shard_id
            if not shard.is_open or shard_id in self.leased or shard_id in inconsistent:
                continue
            if not self.descendant(shard_id):
                self.new_leases[shard_id] = _lease_for_shard(shard, self.initial, self.stream)
            # An open descendant gets its lease when its parents reach SHARD_END (contract §6.4).


def leases_to_create(
    shards: Sequence[Shard],
    existing_leases: Iterable[Lease],
    initial_position: Sentinel,
    *,
    empty_table: bool,
    ignore_unexpected_child_shards: bool,
    stream_identifier: str | None = None,
) -> list[Lease]:
    """The new leases of one shard sync, in creation order (contract §6.2, §6.3).

    ``shards`` is the ListShards result: filtered at the initial position for an empty table, the full
    list otherwise. Raises :class:`InconsistentShards` when a listed child has a listed open parent,
    unless ``ignore_unexpected_child_shards`` (then those children are skipped). In multi-stream mode,
    pass the stream's serialized identifier; only that stream's leases count.
    """
    checkpoint = _checkpoint_for(initial_position)
    by_id: dict[str, Shard] = {}
    for shard in shards:
        if shard.shard_id in by_id:
            raise ValueError(f"shard {shard.shard_id} is listed twice")
        by_id[shard.shard_id] = shard
    inconsistent = inconsistent_shard_ids(shards)
    if inconsistent and not ignore_unexpected_child_shards:
        raise InconsistentShards(inconsistent)

    if empty_table:
        new_leases = {
            shard.shard_id: _lease_for_shard(shard, checkpoint, stream_identifier) for shard in shards
        }
    else:
        leased = frozenset(
            lease.shard_id
            for lease in existing_leases
            if stream_identifier is None or lease.stream == stream_identifier
        )
        sync = _NonEmptyTableSync(by_id, leased, initial_position, stream_identifier)
        sync.run(shards, inconsistent)
        new_leases = sync.new_leases

    return [
        new_leases[shard_id]
        for shard_id in sorted(new_leases, key=lambda sid: (by_id[sid].starting_sequence_number, sid))
    ]


class ShardEndAction(enum.StrEnum):
    PROCEED = "proceed"  # create the listed child leases, record childShardIds, checkpoint SHARD_END
    BACKOFF = "backoff"  # keep the lease, retry after taskBackoffTimeMillis
    DROP_LEASE = "drop_lease"  # give up: drop the lease locally and send leaseLost to the child


@dataclass(frozen=True, slots=True)
class ShardEndDecision:
    action: ShardEndAction
    leases_to_create: tuple[Lease, ...]
    child_shard_ids: frozenset[str]
    reason: str


def child_leases_at_shard_end(
    parent_lease: Lease,
    child_shards: Sequence[ChildShard],
    *,
    existing_lease_keys: Container[str],
    rng: Random,
) -> ShardEndDecision:
    """contract §6.4 step 1, for the worker that holds ``parent_lease`` when its shard ends.

    ``existing_lease_keys`` must answer for the merge parents' and the children's lease keys (the
    shell reads them, as Java does, right before). An empty ``child_shards`` (stream or shard gone)
    proceeds with nothing to create. A merge (exactly one child) needs two listed parents whose leases
    are both present or both absent; otherwise back off, giving up one time in 30.
    """
    stream = parent_lease.stream
    child_ids = frozenset(child.shard_id for child in child_shards)
    if len(child_shards) == 1:
        child = child_shards[0]
        if len(child.parent_shard_ids) != 2:
            return ShardEndDecision(
                ShardEndAction.DROP_LEASE,
                (),
                child_ids,
                f"only child shard {child.shard_id} of {parent_lease.lease_key} does not list two parents",
            )
        present = [lease_key_for(p, stream) in existing_lease_keys for p in child.parent_shard_ids]
        if present[0] != present[1]:
            parents = ", ".join(
                f"{p} {'leased' if here else 'not leased'}"
                for p, here in zip(child.parent_shard_ids, present, strict=True)
            )
            why = (
                f"merge child {child.shard_id} has partial parent information in the lease table ({parents})"
            )
            if rng.randrange(GIVE_UP_ONE_IN) == 0:
                return ShardEndDecision(
                    ShardEndAction.DROP_LEASE, (), child_ids, f"{why}; giving up the lease"
                )
            return ShardEndDecision(ShardEndAction.BACKOFF, (), child_ids, f"{why}; deferring child lease")

    to_create: list[Lease] = []
    for child in child_shards:
        if not child.parent_shard_ids:
            return ShardEndDecision(
                ShardEndAction.DROP_LEASE,
                (),
                child_ids,
                f"child shard {child.shard_id} of {parent_lease.lease_key} lists no parent shards",
            )
        if lease_key_for(child.shard_id, stream) in existing_lease_keys:
            continue
        to_create.append(
            _new_lease(
                child.shard_id,
                TRIM_HORIZON,
                child.parent_shard_ids,
                child.starting_hash_key,
                child.ending_hash_key,
                stream,
            )
        )
    if not child_shards:
        reason = "no child shards (shard or stream gone): nothing to create"
    else:
        reason = f"creating {len(to_create)} of {len(child_shards)} child leases"
    return ShardEndDecision(ShardEndAction.PROCEED, tuple(to_create), child_ids, reason)


@dataclass(frozen=True, slots=True)
class ParentBlock:
    """Whether a child shard must keep waiting for its parents (Java ``BlockOnParentShardTask``)."""

    blocked: bool
    blocking_parents: tuple[str, ...]
    reason: str


def parents_block(child_lease: Lease, parent_leases: Iterable[Lease]) -> ParentBlock:
    """Blocked while any parent lease exists with a checkpoint other than SHARD_END.

    ``parent_leases`` are the parent leases that exist (missing ones do not block); any other leases
    passed in are ignored.
    """
    found = {lease.lease_key: lease for lease in parent_leases}
    stream = child_lease.stream
    blocking = tuple(
        parent
        for parent in sorted(child_lease.parent_shard_ids)
        if (lease := found.get(lease_key_for(parent, stream))) is not None and not lease.is_shard_end
    )
    if blocking:
        return ParentBlock(True, blocking, f"parent leases not at SHARD_END yet: {', '.join(blocking)}")
    if not child_lease.parent_shard_ids:
        return ParentBlock(False, (), "no parent shards")
    return ParentBlock(False, (), "every parent lease is at SHARD_END or already deleted")
