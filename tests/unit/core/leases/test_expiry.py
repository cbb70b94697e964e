"""Local expiry: counter observations on the observer's monotonic clock (contract §4.3)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.leases.expiry import MAX_ABS_AGE_S, NEVER_CHANGED, CounterObservation, LeaseObservations
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import TRIM_HORIZON

L = 10.0  # failoverTimeMillis = 10000


def lease(key: str, counter: int, owner: str | None = None) -> Lease:
    return Lease(key, TRIM_HORIZON, lease_owner=owner, lease_counter=counter)


def test_new_unowned_lease_counts_as_changed_at_time_zero() -> None:
    obs = LeaseObservations().observe([lease("a", 0)], now=5.0)
    assert obs.get("a") == CounterObservation(0, NEVER_CHANGED)
    assert obs.is_expired("a", 5.0, L)
    assert obs.is_very_old("a", 5.0, L)  # even 5 s after the clock's origin
    assert math.isinf(obs.age("a", 5.0))


def test_new_owned_lease_counts_as_renewed_at_scan_time() -> None:
    obs = LeaseObservations().observe([lease("a", 7, "w1")], now=100.0)
    assert obs.get("a") == CounterObservation(7, 100.0)
    assert not obs.is_expired("a", 100.0, L)
    assert not obs.is_expired("a", 110.0, L)  # age == L is not expired: strictly greater
    assert obs.is_expired("a", 110.001, L)
    assert not obs.is_very_old("a", 130.0, L)
    assert obs.is_very_old("a", 130.001, L)


@pytest.mark.parametrize(
    ("scans", "now", "expired"),
    [
        # (time, counter) per scan of an owned lease; expiry checked at `now`
        ([(0.0, 1), (5.0, 2), (20.0, 3)], 29.0, False),  # renewed between scans
        ([(0.0, 1), (5.0, 2), (20.0, 2)], 15.1, True),  # unchanged since 5 s
        ([(0.0, 1), (5.0, 2), (20.0, 2)], 15.0, False),
        ([(0.0, 1), (30.0, 1), (60.0, 1)], 60.0, True),  # never changed after first sight at 0
        ([(0.0, 1), (30.0, 1), (31.0, 2)], 40.0, False),  # a change revives it
    ],
)
def test_counter_changes_drive_expiry(scans: list[tuple[float, int]], now: float, expired: bool) -> None:
    obs = LeaseObservations()
    for at, counter in scans:
        obs = obs.observe([lease("a", counter, "w1")], now=at)
    assert obs.is_expired("a", now, L) is expired


def test_owner_change_without_counter_change_is_not_a_renewal() -> None:
    obs = LeaseObservations().observe([lease("a", 3, "w1")], now=0.0)
    obs = obs.observe([lease("a", 3, "w2")], now=20.0)
    assert obs.get("a") == CounterObservation(3, 0.0)


def test_unowned_lease_seen_before_keeps_its_observation() -> None:
    obs = LeaseObservations().observe([lease("a", 3, "w1")], now=0.0)
    obs = obs.observe([lease("a", 4)], now=20.0)  # evicted: counter bumped, owner removed
    assert obs.get("a") == CounterObservation(4, 20.0)


def test_leases_missing_from_a_scan_are_forgotten() -> None:
    obs = LeaseObservations().observe([lease("a", 1, "w"), lease("b", 1, "w")], now=0.0)
    obs = obs.observe([lease("b", 1, "w")], now=1.0)
    assert obs.get("a") is None
    assert obs.is_expired("a", 1.0, L)  # never observed: expired
    assert set(obs.entries) == {"b"}


def test_record_write_marks_our_own_take_or_renew() -> None:
    obs = LeaseObservations().observe([lease("a", 0)], now=0.0)
    obs = obs.record_write("a", 1, now=3.0)
    assert obs.get("a") == CounterObservation(1, 3.0)
    assert not obs.is_expired("a", 12.0, L)
    # The next scan shows the counter we wrote: no change, the write time is kept.
    assert obs.observe([lease("a", 1, "me")], now=20.0).get("a") == CounterObservation(1, 3.0)


def test_absurd_ages_count_as_expired() -> None:
    obs = LeaseObservations().observe([lease("a", 1, "w")], now=MAX_ABS_AGE_S + 100.0)
    assert obs.is_expired("a", 50.0, L)  # clock went backwards by more than a year
    assert not obs.is_expired("a", MAX_ABS_AGE_S + 99.0, L)  # slightly backwards: not expired


def test_observations_are_immutable_values() -> None:
    first = LeaseObservations().observe([lease("a", 1, "w")], now=0.0)
    second = first.observe([lease("a", 2, "w")], now=5.0)
    assert first.get("a") == CounterObservation(1, 0.0)
    assert second.get("a") == CounterObservation(2, 5.0)
    with pytest.raises(TypeError):
        first.entries["b"] = CounterObservation(0, 0.0)  # type: ignore[index]


@given(
    st.lists(st.tuples(st.floats(0, 1e6), st.integers(0, 5)), min_size=1, max_size=20),
    st.floats(0, 1e6),
)
def test_expiry_matches_the_definition(scans: list[tuple[float, int]], extra: float) -> None:
    """Expired iff no counter change was observed within the failover time before `now`."""
    scans = sorted(scans)
    obs = LeaseObservations()
    last_change = scans[0][0]
    previous = None
    for at, counter in scans:
        obs = obs.observe([lease("a", counter, "w")], now=at)
        if previous is not None and counter != previous:
            last_change = at
        previous = counter
    now = scans[-1][0] + extra
    assert obs.is_expired("a", now, L) is (now - last_change > L)


def test_a_held_lease_is_lost_by_our_clock_a_margin_before_anyone_may_see_it_expire() -> None:
    from kcl_daemon.core.leases.expiry import held_lease_deadline, local_expiry_margin_s

    assert held_lease_deadline(100.0, 10.0) == pytest.approx(109.0)
    assert held_lease_deadline(100.0, 3.0) == pytest.approx(102.7)
    assert held_lease_deadline(0.0, 60.0) == pytest.approx(59.0)
    for failover in (0.5, 3.0, 10.0, 600.0):
        assert 0 < local_expiry_margin_s(failover) < failover


@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 9), st.floats(0, 100)),
        max_size=12,
    )
)
def test_record_writes_is_record_write_for_each_in_turn(writes: list[tuple[str, int, float]]) -> None:
    """The coordinator folds its own writes in at once (the last of each lease): the same table."""
    seen = LeaseObservations().observe([Lease("a", TRIM_HORIZON, "w", 4), Lease("d", TRIM_HORIZON)], 1.0)
    one_by_one = seen
    for key, counter, at in writes:
        one_by_one = one_by_one.record_write(key, counter, at)
    folded = seen.record_writes({key: CounterObservation(counter, at) for key, counter, at in writes})
    assert dict(folded.entries) == dict(one_by_one.entries)
