"""Renewing per worker: which taker passes read the lease table, expiry by the heartbeat alone, and the
steal notices (kcl_daemon.core.leases.lease_reads)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.leases.expiry import DUE_EPSILON_S, LeaseObservations
from kcl_daemon.core.leases.heartbeat import (
    HeartbeatObservations,
    RenewalMode,
    WorkerItem,
    heartbeat_write,
    vouched,
)
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_reads import (
    NOTICES,
    LastScan,
    StealNotice,
    fleet_change,
    judged,
    lease_scan_reason,
    live_notices,
    notice_write,
    noticed_losses,
    scan_due_at,
    steal_notices,
)
from kcl_daemon.core.sequence import TRIM_HORIZON

L = 10.0
PW = RenewalMode.PER_WORKER


def lease(key: str, counter: int, owner: str | None = None) -> Lease:
    return Lease(key, TRIM_HORIZON, lease_owner=owner, lease_counter=counter)


def beating(worker: str, beat: int = 1, mode: RenewalMode = PW) -> WorkerItem:
    return WorkerItem(worker, beat, mode, kcl_daemon=True)


def beats_at(**beat_at: float) -> HeartbeatObservations:
    """Each worker's heartbeat as last seen to advance at the given time."""
    seen = HeartbeatObservations()
    for worker, at in beat_at.items():
        seen = seen.record_beat(beating(worker), at)
    return seen


# -- which pass reads the lease table ---------------------------------------------------------------

LAST = LastScan(at=100.0, leases=(lease("s-1", 3, "w-b"),))


@pytest.mark.parametrize(
    ("per_worker", "full", "last", "due_at", "now", "expected"),
    [
        (False, False, LAST, None, 101.0, "renewing per lease"),
        (True, False, None, None, 101.0, "no lease scan yet"),
        (True, True, LAST, None, 101.0, "a full run"),
        (True, False, LastScan(100.0, (), in_motion=True), None, 101.0, "the last scan's plan"),
        (True, False, LAST, 101.0, 101.0, "may have come due"),
        (True, False, LAST, 101.0, 100.9, None),  # not yet due: the heartbeats alone
        (True, False, LAST, None, 500.0, None),  # nothing can come due
    ],
)
def test_a_pass_scans_the_lease_table_only_when_needed(
    per_worker: bool,
    full: bool,
    last: LastScan | None,
    due_at: float | None,
    now: float,
    expected: str | None,
) -> None:
    reason = lease_scan_reason(per_worker=per_worker, full=full, last=last, due_at=due_at, now=now)
    assert (reason is None) is (expected is None)
    if expected is not None:
        assert reason is not None and expected in reason


def test_a_scan_comes_due_when_a_leases_owner_heartbeat_has_stood_still_a_failover() -> None:
    leases = (lease("s-1", 3, "w-b"), lease("s-2", 5, "w-c"))
    observations = LeaseObservations().observe(leases, 90.0)
    beats = beats_at(**{"w-a": 99.0, "w-b": 98.0, "w-c": 99.5})
    last = LastScan(100.0, leases)
    due = scan_due_at(judged(leases, observations, beats), beats, last, "w-a", L)
    assert due == pytest.approx(98.0 + L + DUE_EPSILON_S)  # w-b's, the first; never this worker's own


def test_a_heartbeat_of_a_worker_without_leases_in_the_last_scan_comes_due_too() -> None:
    """It may have taken a lease since the scan (a new worker's first steal)."""
    beats = beats_at(**{"w-new": 105.0})
    due = scan_due_at(LeaseObservations(), beats, LastScan(100.0, ()), "w-a", L)
    assert due == pytest.approx(105.0 + L + DUE_EPSILON_S)


def test_what_was_due_at_the_last_scan_brings_no_scan_again() -> None:
    """A lease expired at the last scan (left to a worker under its target) and a heartbeat that had
    stood still a failover by then were judged on that scan."""
    leases = (lease("s-1", 3, "w-dead"),)
    beats = beats_at(**{"w-dead": 50.0})
    observations = LeaseObservations().observe(leases, 40.0)
    assert scan_due_at(judged(leases, observations, beats), beats, LastScan(100.0, leases), "w-a", L) is None


def test_eviction_comes_due_after_its_grace() -> None:
    leases = (lease("s-1", 3, "w-dead"),)
    beats = beats_at(**{"w-dead": 85.0})
    observations = LeaseObservations().observe(leases, 80.0)
    effective = judged(leases, observations, beats)
    # expired at 95 (before the scan at 100): only its eviction, half a pass on, is still to come
    due = scan_due_at(
        effective, HeartbeatObservations(), LastScan(100.0, leases), "w-a", L, evict_after_s=20.0
    )
    assert due == pytest.approx(85.0 + L + 20.0 + DUE_EPSILON_S)


# -- expiry by the heartbeat alone --------------------------------------------------------------------


def test_a_checkpoint_seen_late_does_not_postpone_a_dead_owners_takeover() -> None:
    """The counter moved (a checkpoint) before the owner's last heartbeat, but this worker first saw it
    at a later scan: the heartbeat alone times the lease; the counters' rule would wait a failover
    from that scan."""
    before, after = lease("s-1", 3, "w-b"), lease("s-1", 4, "w-b")
    observations = LeaseObservations().observe([before], 0.0).observe([after], 15.0)
    beats = beats_at(**{"w-b": 9.0})
    assert judged([after], observations, beats).is_expired("s-1", 19.1, L)
    assert not vouched([after], observations, beats).is_expired("s-1", 19.1, L)


@pytest.mark.parametrize(
    "item",
    [
        WorkerItem("w-b", 4, RenewalMode.PER_LEASE, kcl_daemon=True),  # it fell back
        WorkerItem("w-b", None, None, metrics=True),  # no heartbeat at all
    ],
)
def test_an_owner_not_heartbeating_per_worker_is_timed_by_its_counter_too(item: WorkerItem) -> None:
    current = lease("s-1", 7, "w-b")
    observations = LeaseObservations().observe([current], 15.0)
    beats = beats_at(**{"w-b": 9.0}).observe([item], 9.5)
    assert not judged([current], observations, beats).is_expired("s-1", 20.0, L)


def test_a_vanished_heartbeat_is_timed_by_its_counter_too() -> None:
    current = lease("s-1", 7, "w-b")
    observations = LeaseObservations().observe([current], 15.0)
    beats = beats_at(**{"w-b": 9.0}).observe([], 12.0)
    assert not judged([current], observations, beats).is_expired("s-1", 20.0, L)


@given(
    counter_at=st.floats(0, 100),
    beat_at=st.floats(0, 100),
    now=st.floats(0, 300),
)
def test_judged_never_keeps_a_lease_longer_than_its_heartbeat(
    counter_at: float, beat_at: float, now: float
) -> None:
    """Renewing per worker, a heartbeating owner's lease expires exactly when its heartbeat has stood
    still a failover (never later because of its counter, never sooner)."""
    current = lease("s-1", 2, "w-b")
    observations = LeaseObservations().observe([current], counter_at)
    beats = beats_at(**{"w-b": beat_at})
    expired = judged([current], observations, beats).is_expired("s-1", now, L)
    assert expired is (now - beat_at > L)


# -- the fleet's items ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        ([beating("w-a", 2), beating("w-b", 9)], None),  # heartbeats advance: no change
        ([beating("w-a", 2), beating("w-b", 9), beating("w-c")], "w-c appeared"),
        ([beating("w-a", 2)], "w-b vanished"),
        ([beating("w-a", 2), beating("w-b", 9, RenewalMode.PER_LEASE)], "w-b changed its kind"),
        (
            [beating("w-a", 2), WorkerItem("w-b", 9, PW, metrics=True, kcl_daemon=True)],
            "w-b changed its kind",
        ),
    ],
)
def test_the_fleet_changes_when_an_item_comes_goes_or_changes_its_kind(
    after: list[WorkerItem], expected: str | None
) -> None:
    before = HeartbeatObservations().observe([beating("w-a"), beating("w-b", 8)], 0.0)
    change = fleet_change(before, before.observe(after, 1.0))
    assert change == (None if expected is None else f"worker item {expected}")


# -- steal notices --------------------------------------------------------------------------------


def _item(worker: str, notices: dict[str, object]) -> dict[str, object]:
    return {"wid": {"S": worker}, NOTICES: {"M": notices}}


@pytest.mark.parametrize(
    ("held", "notices", "lost"),
    [
        ({"s-1": 4}, {"s-1": {"N": "5"}}, ["s-1"]),  # stolen: the steal wrote counter + 1
        ({"s-1": 5}, {"s-1": {"N": "5"}}, ["s-1"]),  # at the counter held (two writes on one counter)
        ({"s-1": 6}, {"s-1": {"N": "5"}}, []),  # taken back since: an old notice
        ({"s-2": 4}, {"s-1": {"N": "5"}}, []),  # not held here
        ({"s-1": 4}, {"s-1": {"N": "x"}}, []),  # unreadable: left out
    ],
)
def test_a_steal_notice_tells_the_victim(
    held: dict[str, int], notices: dict[str, object], lost: list[str]
) -> None:
    leases = {key: lease(key, counter, "w-a") for key, counter in held.items()}
    found = noticed_losses(leases, [_item("w-b", notices)], "w-a")
    assert [key for key, _ in found] == lost
    assert all("w-b stole it" in why for _, why in found)


def test_a_workers_own_notices_are_not_its_losses() -> None:
    assert noticed_losses({"s-1": lease("s-1", 4, "w-a")}, [_item("w-a", {"s-1": {"N": "5"}})], "w-a") == []


def test_notices_are_written_with_the_heartbeat_and_removed_when_none_is_left() -> None:
    beat = heartbeat_write("w-a", PW)
    written = notice_write(beat, {"s-2": StealNotice(7, 1.0), "s-1": StealNotice(3, 2.0)})
    assert written.update == f"{beat.update}, #notices = :notices"
    assert written.values[":notices"] == {"M": {"s-1": {"N": "3"}, "s-2": {"N": "7"}}}
    assert written.names["#notices"] == NOTICES and written.condition == beat.condition
    removed = notice_write(beat, {})
    assert removed.update == f"{beat.update} REMOVE #notices" and ":notices" not in removed.values
    assert steal_notices(_item("w-a", written.values[":notices"]["M"])) == {"s-1": 3, "s-2": 7}  # type: ignore[arg-type]


@given(st.dictionaries(st.text(min_size=1, max_size=5), st.floats(0, 100), max_size=6), st.floats(0, 200))
def test_notices_are_kept_for_their_time_only(ats: dict[str, float], now: float) -> None:
    notices = {key: StealNotice(1, at) for key, at in ats.items()}
    kept = live_notices(notices, now, 20.05)
    assert set(kept) == {key for key, at in ats.items() if now - at < 20.05}
