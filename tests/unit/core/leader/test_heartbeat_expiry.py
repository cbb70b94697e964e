"""The 3.x leader's expiry with per-worker renewal: a lease is reassigned as expired only when its
counter and its owner's heartbeat both stood still (counters alone without ``PER_WORKER``)."""

from __future__ import annotations

import pytest

from kcl_daemon.core.leader.heartbeat_expiry import expired_leases
from kcl_daemon.core.leases.expiry import LeaseObservations
from kcl_daemon.core.leases.heartbeat import HeartbeatObservations, RenewalMode, WorkerItem
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import TRIM_HORIZON

L = 10.0
PW = RenewalMode.PER_WORKER


def _run(
    leases: list[Lease],
    scans: list[tuple[float, dict[str, int], list[WorkerItem]]],
    now: float,
    per_worker: bool,
) -> frozenset[str]:
    """``scans``: (time, counters by lease key, worker items) the leader saw, in order."""
    observations, beats = LeaseObservations(), HeartbeatObservations()
    for t, counters, items in scans:
        seen = [Lease(x.lease_key, TRIM_HORIZON, lease_owner=x.lease_owner,
                      lease_counter=counters[x.lease_key]) for x in leases]  # fmt: skip
        observations, beats = observations.observe(seen, t), beats.observe(items, t)
    return expired_leases(leases, observations, beats, now, L, per_worker=per_worker)


def _beat(worker: str, n: int, mode: RenewalMode = PW) -> WorkerItem:
    return WorkerItem(worker, beat=n, mode=mode, kcl_daemon=True)


A = [Lease("a", TRIM_HORIZON, lease_owner="w1", lease_counter=1)]
B = [Lease("b", TRIM_HORIZON, lease_owner="w2", lease_counter=1)]
FREE = [Lease("f", TRIM_HORIZON, lease_counter=1)]


@pytest.mark.parametrize(
    ("leases", "scans", "now", "per_worker", "expired"),
    [
        # counter still, the owner's heartbeat advancing: kept
        (A, [(0, {"a": 1}, [_beat("w1", 1)]), (15, {"a": 1}, [_beat("w1", 2)])], 20.0, True, set()),
        # ... but a leader judging counters alone (Java's rule, PER_LEASE) reassigns it
        (A, [(0, {"a": 1}, [_beat("w1", 1)]), (15, {"a": 1}, [_beat("w1", 2)])], 20.0, False, {"a"}),
        # both still for more than the failover: expired
        (A, [(0, {"a": 1}, [_beat("w1", 1)]), (5, {"a": 1}, [_beat("w1", 2)])], 15.1, True, {"a"}),
        (A, [(0, {"a": 1}, [_beat("w1", 1)]), (5, {"a": 1}, [_beat("w1", 2)])], 15.0, True, set()),
        # an owner renewing per lease (no heartbeat): its counter alone
        (A, [(0, {"a": 1}, []), (9, {"a": 2}, [])], 18.0, True, set()),
        (A, [(0, {"a": 1}, []), (9, {"a": 2}, [])], 19.1, True, {"a"}),
        # another worker's heartbeat vouches for nothing of w2's
        (B, [(0, {"b": 1}, [_beat("w1", 1)]), (15, {"b": 1}, [_beat("w1", 2)])], 15.0, True, {"b"}),
        # a heartbeat withdrawn after a fall-back stands still from its last advance
        (A, [(0, {"a": 1}, [_beat("w1", 1)]), (4, {"a": 1}, [_beat("w1", 2)]), (6, {"a": 1}, [])],
         14.1, True, {"a"}),
        # a heartbeat turned PER_LEASE vouches no longer: the counter (moved at 8) keeps it
        (A, [(0, {"a": 1}, [_beat("w1", 1)]), (8, {"a": 2}, [_beat("w1", 2, RenewalMode.PER_LEASE)])],
         17.0, True, set()),
        # an unowned lease is never "expired": it is simply free
        (FREE, [(0, {"f": 1}, []), (30, {"f": 1}, [])], 40.0, True, set()),
    ],
)  # fmt: skip
def test_the_leader_reassigns_a_lease_only_when_counter_and_heartbeat_stood_still(
    leases: list[Lease],
    scans: list[tuple[float, dict[str, int], list[WorkerItem]]],
    now: float,
    per_worker: bool,
    expired: set[str],
) -> None:
    assert _run(leases, scans, now, per_worker) == expired
