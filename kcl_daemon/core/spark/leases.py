"""Decisions of the Spark source's lease bridge, over plain leases: pure, no I/O.

* :func:`stale_end_attributes`: publications on a lease item that no batch needs any more.
* :func:`lease_for_shard`: the lease the query creates for a shard it reads that has none (KCL's
  shape: parents and hash range from ListShards, the checkpoint the query starts the shard from).

* :func:`positions_from_leases`: a KCL checkpoint is a Spark position as it stands (sub-sequence
  exact); ``LATEST`` / ``AT_TIMESTAMP`` sentinels carry no position (the fallback applies).
* :func:`live_owners`: leases another worker renewed between two scans a failover time apart, or
  kept by its heartbeat (``leaseRenewal = PER_WORKER``: :func:`heartbeating`) meanwhile.
* :func:`checkpoints_to_write`: the positions of a committed offset that move a lease forward.
* :func:`children_of`: the ``ChildShards`` of a shard from a ListShards result (for child leases).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from kcl_daemon.core.leases.heartbeat import WorkerItem
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import LEASE_ENTITY_TYPE
from kcl_daemon.core.sequence import ExtendedSequenceNumber, Sentinel
from kcl_daemon.core.shards.graph import ChildShard, Shard
from kcl_daemon.core.spark.offsets import ShardPos, SourceOffset

#: Publications on lease items are attributes ``sparkEnd_<run>_<batch>``.
END_ATTRIBUTE_PREFIX: Final = "sparkEnd_"


def end_attribute(run: str, batch: int) -> str:
    """The lease-item attribute holding the publication of (run, batch)."""
    return f"{END_ATTRIBUTE_PREFIX}{run}_{batch}"


def stale_end_attributes(names: Iterable[str], run: str, keep_from: int) -> list[str]:
    """The publication attributes among ``names`` no batch of ``run`` needs: another run's, or a batch
    before ``keep_from``. Other attributes are never touched."""
    stale = []
    for name in names:
        if not name.startswith(END_ATTRIBUTE_PREFIX):
            continue
        owner, _, number = name[len(END_ATTRIBUTE_PREFIX) :].rpartition("_")
        if owner != run or not number.isdigit() or int(number) < keep_from:
            stale.append(name)
    return sorted(stale)


def positions_from_leases(
    leases: Iterable[Lease], stream_identifier: str | None = None
) -> dict[str, ShardPos]:
    """shard id -> position for every lease of the stream whose checkpoint is a position."""
    out: dict[str, ShardPos] = {}
    for lease in leases:
        if lease.stream != stream_identifier:
            continue
        seq = lease.checkpoint.sequence_number
        if seq in (Sentinel.LATEST, Sentinel.AT_TIMESTAMP):
            continue
        out[lease.shard_id] = ShardPos(lease.checkpoint)
    return out


@dataclass(frozen=True, slots=True)
class LiveLease:
    lease_key: str
    owner: str


def live_owners(
    before: Iterable[Lease], after: Iterable[Lease], me: str, heartbeats: frozenset[str] = frozenset()
) -> list[LiveLease]:
    """Leases held by another worker that renewed them (counter moved) between the two scans, or
    whose owner is in ``heartbeats`` (its heartbeat advanced meanwhile: it keeps its leases without
    renewing them, so they are not free)."""
    earlier = {lease.lease_key: lease for lease in before}
    live = []
    for lease in after:
        if lease.lease_owner is None or lease.lease_owner == me:
            continue
        old = earlier.get(lease.lease_key)
        if old is None or old.lease_counter != lease.lease_counter or lease.lease_owner in heartbeats:
            live.append(LiveLease(lease.lease_key, lease.lease_owner))
    return sorted(live, key=lambda live_lease: live_lease.lease_key)


def heartbeating(before: Iterable[WorkerItem], after: Iterable[WorkerItem]) -> frozenset[str]:
    """The workers whose per-worker heartbeat advanced between two reads of the heartbeat place (one
    first seen in the second read counts: it was written meanwhile)."""
    earlier = {item.worker_id: item.beat for item in before}
    return frozenset(
        item.worker_id
        for item in after
        if item.heartbeats and (item.worker_id not in earlier or earlier[item.worker_id] != item.beat)
    )


def checkpoints_to_write(
    offset: SourceOffset, written: Mapping[str, ExtendedSequenceNumber]
) -> dict[str, ExtendedSequenceNumber]:
    """shard id -> checkpoint for each shard of ``offset`` that is past what the table already has.

    Only real positions are written: a sequence number (with its sub-sequence) or SHARD_END.
    """
    out = {}
    for shard_id in sorted(offset.shards):
        checkpoint = offset.shards[shard_id].checkpoint
        if checkpoint.is_sentinel and not checkpoint.is_shard_end:
            continue
        known = written.get(shard_id)
        if known is None or checkpoint > known:
            out[shard_id] = checkpoint
    return out


def children_of(shard_id: str, shards: Iterable[Shard]) -> list[ChildShard]:
    """The listed shards that name ``shard_id`` as a parent, as GetRecords' ChildShards would."""
    return [
        ChildShard(s.shard_id, s.parent_shard_ids, s.starting_hash_key, s.ending_hash_key)
        for s in sorted(shards, key=lambda s: s.shard_id)
        if shard_id in s.parent_shard_ids
    ]


def is_ahead(lease_checkpoint: ExtendedSequenceNumber, pos: ShardPos) -> bool:
    """True when the table's checkpoint is past ``pos``: someone read further than this query."""
    if lease_checkpoint.sequence_number in (Sentinel.LATEST, Sentinel.AT_TIMESTAMP):
        return False
    if pos.checkpoint.sequence_number == Sentinel.AT_TIMESTAMP:
        return False
    return lease_checkpoint > pos.checkpoint


def lease_for_shard(shard: Shard, start: ShardPos) -> Lease:
    """A new single-stream lease for ``shard`` whose checkpoint is where the query starts it.

    A pinned ``LATEST`` or ``AT_TIMESTAMP`` start is written as the ``AT_TIMESTAMP`` sentinel, as KCL's
    shard sync writes its initial position: a worker that takes the lease over before the query
    checkpointed starts the shard from its own configured position.
    """
    return Lease(
        lease_key=shard.shard_id,
        checkpoint=start.checkpoint,
        parent_shard_ids=frozenset(shard.parent_shard_ids),
        starting_hash_key=shard.starting_hash_key,
        ending_hash_key=shard.ending_hash_key,
        entity_type=LEASE_ENTITY_TYPE,
    )
