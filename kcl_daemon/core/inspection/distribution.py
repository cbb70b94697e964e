"""How a lease table's work is spread: the report behind `kcl-daemon leases` (contract §10.2).

Clusters: a worker id's cluster is the part before its first separator (``-`` by default), so workers
``zone-a-host1`` and ``zone-a-host2`` count towards cluster ``zone``; pass a different separator or a
custom function to group differently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import ExtendedSequenceNumber


def cluster_of(worker_id: str, separator: str = "-") -> str:
    head, sep, _ = worker_id.partition(separator)
    return head if sep and head else worker_id


@dataclass(frozen=True, slots=True)
class LeaseRow:
    lease_key: str
    owner: str | None
    counter: int
    checkpoint: ExtendedSequenceNumber
    parents: tuple[str, ...]
    expired: bool | None  # None: expiry was not checked


@dataclass(frozen=True, slots=True)
class Distribution:
    rows: tuple[LeaseRow, ...]
    per_worker: tuple[tuple[str, int], ...]  # most loaded first
    per_cluster: tuple[tuple[str, int], ...]
    unclaimed: tuple[str, ...]
    expired: tuple[str, ...] | None  # None: expiry was not checked (it needs two scans)
    finished: tuple[str, ...]  # checkpoint SHARD_END, waiting for cleanup
    shards_without_lease: tuple[str, ...] | None  # None: the shard list was not available


def summarize(
    leases: Iterable[Lease],
    *,
    expired_keys: frozenset[str] | None = None,
    shard_ids: Iterable[str] | None = None,
    cluster: Callable[[str], str] = cluster_of,
) -> Distribution:
    ordered = sorted(leases, key=lambda lease: lease.lease_key)
    rows = tuple(
        LeaseRow(
            lease.lease_key,
            lease.lease_owner,
            lease.lease_counter,
            lease.checkpoint,
            tuple(sorted(lease.parent_shard_ids)),
            None if expired_keys is None else lease.lease_key in expired_keys,
        )
        for lease in ordered
    )
    owners = Counter(lease.lease_owner for lease in ordered if lease.lease_owner is not None)
    clusters: Counter[str] = Counter()
    for owner, count in owners.items():
        clusters[cluster(owner)] += count
    # plain shard ids, and lease keys for several streams (their shards are listed by lease key)
    leased_shards = {lease.shard_id for lease in ordered} | {lease.lease_key for lease in ordered}
    return Distribution(
        rows=rows,
        per_worker=tuple(sorted(owners.items(), key=lambda item: (-item[1], item[0]))),
        per_cluster=tuple(sorted(clusters.items(), key=lambda item: (-item[1], item[0]))),
        unclaimed=tuple(lease.lease_key for lease in ordered if lease.lease_owner is None),
        expired=None if expired_keys is None else tuple(row.lease_key for row in rows if row.expired),
        finished=tuple(lease.lease_key for lease in ordered if lease.is_shard_end),
        shards_without_lease=(None if shard_ids is None else tuple(sorted(set(shard_ids) - leased_shards))),
    )
