"""The lease timings, derived once from the failover time (contract §4.3, "Timing formulas")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.leases.keeping import KeepTimings
from kcl_daemon.core.leases.timings import EPSILON_S, MIN_DISCOVERY_S, LeaseTimings, renew_period_s

#: the columns: renewal, 2.x take, expiry passes, assignment interval, discovery, local-expiry margin,
#: a stolen lease's quiet time, and that time when renewing per worker
COLUMNS = ("renew", "take", "expiry", "interval", "discovery", "margin", "quiet", "per-worker quiet")


@pytest.mark.parametrize(
    ("failover_s", "expiry_check_s", "interval_s", "expected"),
    [
        # the contract's defaults: L = 10 s (per worker too, a stolen lease waits a renewal period)
        (10.0, None, None, (3.308333, 20.05, 1.0, 20.0, 1.0, 1.0, 3.358333, 3.358333)),
        # a short failover: expiry passes at L/10, the margin at 10 % of L
        (2.0, None, None, (0.641667, 4.05, 0.2, 4.0, 0.2, 0.2, 0.691667, 0.691667)),
        # expiry passes never under 50 ms; discovery then clamped to the expiry passes; per worker, two
        # expiry passes are longer than the renewal period
        (0.3, None, None, (0.075, 0.65, 0.05, 0.6, 0.05, 0.03, 0.125, 0.15)),
        # a configured expiry check slower than Java's discovery: Java's interval/2 - ε wins; per worker,
        # the steal waits two of those slow passes
        (10.0, 30.0, None, (3.308333, 20.05, 30.0, 20.0, 9.975, 1.0, 3.358333, 60.05)),
        # a tiny configured assignment interval: discovery never under 100 ms
        (10.0, 5.0, 0.1, (3.308333, 20.05, 5.0, 0.1, 0.1, 1.0, 3.358333, 10.05)),
        # a long failover: the margin stops at 1 s, the expiry passes at 1 s
        (60.0, None, None, (19.975, 120.05, 1.0, 120.0, 1.0, 1.0, 20.025, 20.025)),
    ],
)
def test_timings_follow_the_contract(
    failover_s: float, expiry_check_s: float | None, interval_s: float | None, expected: tuple[float, ...]
) -> None:
    t = LeaseTimings.from_failover(
        failover_s, expiry_check_s=expiry_check_s, assignment_interval_s=interval_s
    )
    got = (
        t.renew_every_s,
        t.take_every_s,
        t.expiry_check_s,
        t.assignment_interval_s,
        t.discovery_s,
        t.local_expiry_margin_s,
        t.steal_quiet_s,
        t.per_worker_steal_quiet_s,
    )
    assert dict(zip(COLUMNS, got, strict=True)) == pytest.approx(
        dict(zip(COLUMNS, expected, strict=True)), abs=1e-6
    )


@pytest.mark.parametrize("failover_s", [0.0, -1.0, 0.075, float("nan")])
def test_a_failover_that_leaves_no_renewal_period_is_refused(failover_s: float) -> None:
    with pytest.raises(ValueError, match="leaves no renewal period"):
        LeaseTimings.from_failover(failover_s)


def test_the_keeper_renews_on_the_same_period() -> None:
    assert KeepTimings.for_failover(10.0).renew_every_s == LeaseTimings.from_failover(10.0).renew_every_s


@given(
    failover_s=st.floats(min_value=0.1, max_value=3600.0),
    expiry_check_s=st.none() | st.floats(min_value=0.01, max_value=600.0),
    interval_s=st.none() | st.floats(min_value=0.01, max_value=7200.0),
)
def test_timing_invariants(failover_s: float, expiry_check_s: float | None, interval_s: float | None) -> None:
    t = LeaseTimings.from_failover(
        failover_s, expiry_check_s=expiry_check_s, assignment_interval_s=interval_s
    )
    # renewals come three times per failover, with Java's 25 ms to spare
    assert 0 < t.renew_every_s < failover_s / 3
    assert t.renew_every_s == renew_period_s(failover_s)
    assert t.take_every_s > 2 * failover_s
    # a held lease is given up before anyone may see it expire, by at most 1 s
    assert 0 < t.local_expiry_margin_s <= min(1.0, failover_s / 10) + 1e-12
    # a stolen lease waits out the victim's next renewal; renewing per worker, also two of its scans
    assert t.steal_quiet_s > t.renew_every_s
    assert t.per_worker_steal_quiet_s >= t.steal_quiet_s
    assert t.per_worker_steal_quiet_s > 2 * t.expiry_check_s
    # discovery: never faster than 100 ms (unless the expiry passes are), never slower than the expiry
    # passes, never slower than Java's
    assert t.discovery_s <= t.expiry_check_s
    assert t.discovery_s >= min(MIN_DISCOVERY_S, t.expiry_check_s)
    assert t.java_discovery_s == t.assignment_interval_s / 2 - EPSILON_S
    assert t.discovery_s <= max(t.java_discovery_s, MIN_DISCOVERY_S)
    if expiry_check_s is None:
        assert 0.05 <= t.expiry_check_s <= 1.0
    if interval_s is None:
        assert t.assignment_interval_s == 2 * failover_s


@pytest.mark.parametrize(
    ("failover_s", "expiry_check_s", "read_s"),
    [
        (10.0, None, 3.308333 / 2),  # half a renewal period: slower than the 1 s expiry passes
        (2.0, None, 0.641667 / 2),
        (0.3, None, 0.05),  # the expiry passes' 50 ms floor is the slower
        (10.0, 5.0, 5.0),  # a configured slow expiry check wins
    ],
)
def test_per_worker_passes_read_the_heartbeats_at_half_a_renewal_period(
    failover_s: float, expiry_check_s: float | None, read_s: float
) -> None:
    """Renewing per worker, a thief's quiet time is two heartbeat reads (the victim reads its notice
    at its next one), and a notice is kept for a full-run period."""
    t = LeaseTimings.from_failover(failover_s, expiry_check_s=expiry_check_s)
    assert t.heartbeat_read_s == pytest.approx(read_s, abs=1e-6)
    assert t.per_worker_steal_quiet_s == pytest.approx(2 * read_s + 2 * EPSILON_S, abs=1e-6)
    assert t.per_worker_steal_quiet_s >= t.steal_quiet_s
    assert t.steal_notice_keep_s == t.take_every_s > t.per_worker_steal_quiet_s
