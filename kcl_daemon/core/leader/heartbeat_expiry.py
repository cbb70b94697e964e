"""What the 3.x leader judges a lease's expiry by when the fleet renews per worker
(``leaseRenewal = PER_WORKER``, docs/leases.md). Pure.

The leader observes lease counters on its own clock (:class:`LeaseObservations`) and reassigns a lease
whose counter stood still for the failover time; a lease kept by its owner's heartbeat never moves its
counter, so the leader must read the heartbeats too (:mod:`kcl_daemon.core.leases.heartbeat`: a lease
is expired only when its counter *and* its owner's heartbeat both stood still). :func:`expiry_view`
returns the observations every leader rule reads (expired leases, the earliest due, dead and quiet
workers, the follower's fallback taker), with the heartbeats folded in when this worker renews per
worker; otherwise the counters alone, as Java's leader judges.
"""

from __future__ import annotations

from collections.abc import Iterable

from kcl_daemon.core.leases.expiry import LeaseObservations
from kcl_daemon.core.leases.heartbeat import HeartbeatObservations, vouched
from kcl_daemon.core.leases.lease import Lease


def expiry_view(
    leases: Iterable[Lease],
    observations: LeaseObservations,
    beats: HeartbeatObservations,
    *,
    per_worker: bool,
) -> LeaseObservations:
    """The observations the leader judges expiry by: ``observations`` (counters), vouched by the
    owners' heartbeats when ``per_worker``."""
    if not per_worker:
        return observations
    return vouched(leases, observations, beats)


def expired_leases(
    leases: Iterable[Lease],
    observations: LeaseObservations,
    beats: HeartbeatObservations,
    now: float,
    failover_s: float,
    *,
    per_worker: bool,
) -> frozenset[str]:
    """The owned leases the leader would reassign as expired at ``now``."""
    leases = list(leases)
    view = expiry_view(leases, observations, beats, per_worker=per_worker)
    return frozenset(
        lease.lease_key
        for lease in leases
        if lease.lease_owner is not None and view.is_expired(lease.lease_key, now, failover_s)
    )
