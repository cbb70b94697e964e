"""The lease timings, each derived once from the failover time (contract §4.3, "Timing formulas").

Pure. ``L`` is ``failoverTimeMillis`` in seconds and ``ε`` Java's ``epsilonMillis`` (25 ms). Every
place that keeps, takes, discovers or judges a lease (the keeper, the coordinator, the 3.x worker's
discovery, the simulator, the checkpoint tool, the Spark lease bridge) reads its periods from one
:class:`LeaseTimings`, so none of them can drift from the others:

* renewal period ``L/3 - ε`` (Java's renewer, fixed rate);
* the 2.x taker's full run every ``(L + ε) x 2``;
* kcl-daemon's expiry passes between full runs: ``leaseExpiryCheckIntervalMillis``, else
  ``min(1 s, L/10)`` but at least 50 ms (:func:`~kcl_daemon.core.leases.expiry.expiry_interval_for`);
* the 3.x assignment period: ``leaseAssignmentIntervalMillis``, else ``2 x L``;
* the 3.x lease discovery: Java's ``interval/2 - ε``, at least 100 ms, and no slower than the expiry
  passes (a KEYS_ONLY query of one key, so a worker starts a lease moved to it within about a second);
* a held lease is lost by our own clock ``min(10 % of L, 1 s)`` before anyone may see it expire
  (:func:`~kcl_daemon.core.leases.expiry.local_expiry_margin_s`);
* a stolen lease delivers nothing for one renewal period plus ``2 ε`` (the victim's next renewal has
  failed by then);
* renewing per worker (``leaseRenewal = PER_WORKER``), the passes between full runs read the heartbeats
  every ``max(expiry passes, renewal period / 2)`` (a heartbeat stands still long enough to matter only
  after a whole failover, and a renewal period holds at most two such reads), and a stolen lease
  delivers nothing for two of those reads plus ``2 ε``: no renewal write fails there, the victim learns
  of the steal from the thief's notice in the thief's heartbeat item (written right after the steal),
  at its next heartbeat read, whose own time the second read covers. The thief keeps a notice for one
  full-run period, by when the victim's own full run has scanned the table anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kcl_daemon.core.leases.expiry import expiry_interval_for, local_expiry_margin_s

#: Java's ``epsilonMillis``, in seconds
EPSILON_S: Final = 0.025
#: the 3.x discovery query never runs more often than this
MIN_DISCOVERY_S: Final = 0.1


@dataclass(frozen=True, slots=True)
class LeaseTimings:
    """The periods of one worker's lease loops (seconds); build it with :meth:`from_failover`."""

    failover_s: float
    renew_every_s: float
    take_every_s: float
    expiry_check_s: float
    assignment_interval_s: float
    #: a Java 3.x worker's lease discovery period, ``interval/2 - ε``
    java_discovery_s: float
    #: this daemon's: Java's, at least 100 ms, no slower than the expiry passes
    discovery_s: float
    local_expiry_margin_s: float
    #: how long a stolen lease delivers nothing: until the victim's next renewal has failed
    steal_quiet_s: float
    #: renewing per worker: how often a pass between full runs reads the heartbeats
    heartbeat_read_s: float
    #: the same when renewing per worker: until the victim's next heartbeat read has shown it the
    #: thief's steal notice
    per_worker_steal_quiet_s: float
    #: renewing per worker: how long a thief keeps a steal notice in its heartbeat item
    steal_notice_keep_s: float

    @classmethod
    def from_failover(
        cls,
        failover_s: float,
        *,
        expiry_check_s: float | None = None,
        assignment_interval_s: float | None = None,
    ) -> LeaseTimings:
        """The timings for ``failover_s``; ``expiry_check_s`` and ``assignment_interval_s`` are the
        configured values (``leaseExpiryCheckIntervalMillis``, ``leaseAssignmentIntervalMillis``), None
        when unset. Raises :class:`ValueError` for a failover time that leaves no renewal period."""
        renew = renew_period_s(failover_s)
        expiry = expiry_check_s if expiry_check_s is not None else expiry_interval_for(failover_s)
        interval = (
            assignment_interval_s
            if assignment_interval_s is not None
            else assignment_interval_for(failover_s)
        )
        heartbeat_read = heartbeat_read_period_s(renew, expiry)
        take_every = (failover_s + EPSILON_S) * 2
        return cls(
            failover_s=failover_s,
            renew_every_s=renew,
            take_every_s=take_every,
            expiry_check_s=expiry,
            assignment_interval_s=interval,
            java_discovery_s=interval / 2 - EPSILON_S,
            discovery_s=discovery_period_s(interval, expiry),
            local_expiry_margin_s=local_expiry_margin_s(failover_s),
            steal_quiet_s=renew + 2 * EPSILON_S,
            heartbeat_read_s=heartbeat_read,
            per_worker_steal_quiet_s=2 * heartbeat_read + 2 * EPSILON_S,
            steal_notice_keep_s=take_every,
        )


def renew_period_s(failover_s: float) -> float:
    """Java's renewal period, ``L/3 - ε``. Raises :class:`ValueError` for a failover time that leaves
    none."""
    if not failover_s > 3 * EPSILON_S:
        raise ValueError(f"failover time {failover_s!r}s leaves no renewal period (L/3 - 25 ms)")
    return failover_s / 3 - EPSILON_S


def heartbeat_read_period_s(renew_every_s: float, expiry_check_s: float) -> float:
    """Renewing per worker: how often the passes between full runs read the heartbeats, ``max(expiry
    passes, renewal period / 2)``. A lease kept by a heartbeat can only expire once the heartbeat has
    stood still a whole failover; reading it at half its period adds at most that much to a takeover."""
    return max(expiry_check_s, renew_every_s / 2)


def assignment_interval_for(failover_s: float) -> float:
    """The 3.x leader's default assignment interval: twice the failover time (contract §4.3)."""
    return 2 * failover_s


def discovery_period_s(assignment_interval_s: float, expiry_check_s: float) -> float:
    """How often a 3.x worker looks for leases assigned to it: Java's ``interval/2 - ε``, at least
    :data:`MIN_DISCOVERY_S`, and no slower than the expiry passes."""
    return min(max(assignment_interval_s / 2 - EPSILON_S, MIN_DISCOVERY_S), expiry_check_s)


@dataclass(frozen=True, slots=True)
class KeepTimings:
    failover_s: float
    renew_every_s: float
    hedge_after_s: float
    give_up_after_s: float
    release_wait_s: float = 4.0

    @classmethod
    def for_failover(cls, failover_s: float, *, attempt_timeout_s: float | None = None) -> KeepTimings:
        """Java's renewal period (:attr:`LeaseTimings.renew_every_s`); hedging at half an attempt's
        timeout."""
        timeout = attempt_timeout_s if attempt_timeout_s is not None else attempt_timeout_for(failover_s)
        return cls(
            failover_s=failover_s,
            renew_every_s=LeaseTimings.from_failover(failover_s).renew_every_s,
            hedge_after_s=timeout / 2,
            give_up_after_s=failover_s,
        )


def attempt_timeout_for(failover_s: float) -> float:
    """How long one attempt may take (the keeper's read and connect timeouts): ``min(1 s, failover / 6)``,
    so that several attempts fit between a renewal and the deadline, but not under ``min(0.5 s,
    failover / 4)``: at a failover of 2 s a third of a second timed out most renewals of a loaded
    moto_server, whose hedged twins then loaded it more."""
    return max(min(1.0, failover_s / 6), min(0.5, failover_s / 4), 0.05)


#: A batch is sent only with at least this much of the lease's time left (or the batch's own duration).
MIN_DELIVERY_GUARD_S: Final = 0.2


def may_deliver(until: float, now: float, expected_batch_s: float, failover_s: float) -> bool:
    """Whether a batch expected to take ``expected_batch_s`` may be sent to the child at ``now``, the
    lease being deliverable ``until``: the batch should end before the lease could be anyone else's
    (the guard is the batch's expected duration, at least 0.2 s and at most a renewal period)."""
    guard = min(max(expected_batch_s, MIN_DELIVERY_GUARD_S), renew_period_s(failover_s))
    return now + guard < until
