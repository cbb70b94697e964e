"""Fleet figures from one lease-table scan: what an operator alarms on (contract §10.3).

Pure: leases in, numbers out. ``total_leases`` counts every lease (finished ones too, until cleanup);
``unclaimed`` counts leases without an owner, ``expired`` the owned ones whose counter has not moved for
the failover time (as the scanning worker sees it), ``finished`` those at SHARD_END. Per worker and per
zone (the part of the worker id before the separator, as ``kcl-daemon leases`` groups them) count owned
leases; ``skew`` is the most minus the fewest leases of any worker that owns one (0 with one worker).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kcl_daemon.core.inspection.distribution import cluster_of
from kcl_daemon.core.leases.lease import Lease


@dataclass(frozen=True, slots=True)
class FleetFigures:
    total_leases: int
    unclaimed: int
    expired: int
    finished: int
    total_shards: int | None  # None: the shard list is not known (yet)
    per_worker: Mapping[str, int] = field(default_factory=dict)
    per_zone: Mapping[str, int] = field(default_factory=dict)

    @property
    def skew(self) -> int:
        counts = list(self.per_worker.values())
        return max(counts) - min(counts) if counts else 0

    @property
    def workers(self) -> int:
        return len(self.per_worker)


def fleet_figures(
    leases: Iterable[Lease],
    *,
    expired_keys: frozenset[str] = frozenset(),
    total_shards: int | None = None,
    zone_of: Callable[[str], str] = cluster_of,
) -> FleetFigures:
    listed = list(leases)
    owners = Counter(lease.lease_owner for lease in listed if lease.lease_owner is not None)
    zones: Counter[str] = Counter()
    for owner, count in owners.items():
        zones[zone_of(owner)] += count
    return FleetFigures(
        total_leases=len(listed),
        unclaimed=sum(1 for lease in listed if lease.lease_owner is None),
        expired=sum(
            1 for lease in listed if lease.lease_owner is not None and lease.lease_key in expired_keys
        ),
        finished=sum(1 for lease in listed if lease.is_shard_end),
        total_shards=total_shards,
        per_worker=dict(sorted(owners.items())),
        per_zone=dict(sorted(zones.items())),
    )
