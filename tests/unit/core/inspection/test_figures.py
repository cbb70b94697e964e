"""Fleet figures from one lease-table scan: unclaimed, expired, finished, per worker and zone, skew."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.inspection.figures import fleet_figures
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import ExtendedSequenceNumber


def lease(key: str, owner: str | None, checkpoint: str = "TRIM_HORIZON") -> Lease:
    return Lease(key, ExtendedSequenceNumber(checkpoint), lease_owner=owner, lease_counter=1)


def test_fleet_figures_count_unclaimed_expired_finished_and_skew() -> None:
    leases = [
        lease("s0", "zone-a-1"),
        lease("s1", "zone-a-1"),
        lease("s2", "zone-b-1"),
        lease("s3", None),
        lease("s4", "zone-b-2", "SHARD_END"),
    ]
    figures = fleet_figures(leases, expired_keys=frozenset({"s2", "s3"}), total_shards=5)
    assert (figures.total_leases, figures.unclaimed, figures.expired, figures.finished) == (5, 1, 1, 1)
    assert figures.per_worker == {"zone-a-1": 2, "zone-b-1": 1, "zone-b-2": 1}
    assert figures.per_zone == {"zone": 4}
    assert (figures.skew, figures.workers, figures.total_shards) == (1, 3, 5)


owners = st.lists(st.one_of(st.none(), st.sampled_from(["a-1", "a-2", "b-1"])), max_size=30)


@given(owners)
def test_fleet_figures_add_up(lease_owners: list[str | None]) -> None:
    figures = fleet_figures([lease(f"s{i}", owner) for i, owner in enumerate(lease_owners)])
    assert sum(figures.per_worker.values()) + figures.unclaimed == figures.total_leases == len(lease_owners)
    assert sum(figures.per_zone.values()) == sum(figures.per_worker.values())
    assert 0 <= figures.skew <= max(figures.per_worker.values(), default=0)
