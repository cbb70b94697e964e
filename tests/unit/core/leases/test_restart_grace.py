"""The restart grace marked on the leases (issue 28): when a mark holds, and what every judge makes of it.

The leader's quiet/dead judgements and the assignor, and the 2.x taker, each given a lease whose owner
marked its restart grace, whatever the metrics said or did not say."""

from __future__ import annotations

from random import Random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.leader.assignor import CooperativeAssignor
from kcl_daemon.core.leader.decider import DeciderConfig, DeciderState, LeaseView, WorkerState, WorkerView
from kcl_daemon.core.leader.passes import (
    dead_workers,
    finished_lease_moves,
    quiet_workers,
    with_lease_graces,
)
from kcl_daemon.core.leases.expiry import LeaseObservations
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.restart_grace import (
    RESTART_ATTRIBUTE,
    RestartMark,
    grace_until,
    graced_leases,
    mark_attribute,
    read_mark,
    restarting_owners,
)
from kcl_daemon.core.leases.taker import TakerConfig, plan_takes
from kcl_daemon.core.sequence import TRIM_HORIZON

NOW = 1_800_000_000.0
KEPT = RestartMark("w1", 8, NOW + 30)


def marked(
    key: str = "shardId-0",
    owner: str | None = "w1",
    counter: int = 8,
    *,
    mark: RestartMark | None = KEPT,
    checkpoint_owner: str | None = None,
) -> Lease:
    extra = {} if mark is None else {RESTART_ATTRIBUTE: mark_attribute(mark)}
    return Lease(
        key,
        TRIM_HORIZON,
        lease_owner=owner,
        lease_counter=counter,
        checkpoint_owner=checkpoint_owner,
        extra=extra,
    )


@pytest.mark.parametrize(
    ("lease", "holds"),
    [
        (marked(), True),
        (marked(mark=None), False),  # no mark
        (marked(counter=9), False),  # written since (the owner back, a take, an assignment)
        (marked(owner="w2"), False),  # another owner now
        (marked(owner=None), False),  # released or evicted
        (marked(mark=RestartMark("w1", 8, NOW)), False),  # the grace has ended
        (marked(mark=RestartMark("w1", 8, NOW - 1)), False),
        (marked(checkpoint_owner="w2"), False),  # a hand-off under way: not a kept lease
    ],
    ids=["holds", "none", "written-since", "other-owner", "unowned", "ends-now", "ended", "hand-off"],
)
def test_when_a_mark_holds(lease: Lease, holds: bool) -> None:
    assert (grace_until(lease, NOW) is not None) is holds
    assert (lease.lease_key in graced_leases([lease], NOW)) is holds
    assert ("w1" in restarting_owners([lease], NOW)) is holds


@pytest.mark.parametrize(
    "raw",
    [
        {"S": "x"},
        {"M": {}},
        {"M": {"owner": {"S": ""}, "counter": {"N": "1"}, "until": {"N": "1"}}},
        {"M": {"owner": {"S": "w1"}, "counter": {"N": "one"}, "until": {"N": "1"}}},
        {"M": {"owner": {"N": "1"}, "counter": {"N": "1"}, "until": {"N": "NaN"}}},
        "garbage",
    ],
)
def test_a_mark_that_cannot_be_read_is_no_mark(raw: object) -> None:
    lease = Lease("k", TRIM_HORIZON, lease_owner="w1", lease_counter=1, extra={RESTART_ATTRIBUTE: raw})
    assert read_mark(lease) is None and grace_until(lease, 0.0) is None


@given(
    owner=st.text(min_size=1, max_size=20),
    counter=st.integers(min_value=0, max_value=2**53),
    until=st.floats(min_value=0, max_value=4e9),
)
def test_a_mark_reads_back_as_written(owner: str, counter: int, until: float) -> None:
    lease = marked(owner=owner, counter=counter, mark=RestartMark(owner, counter, until))
    back = read_mark(lease)
    assert back is not None and back.owner == owner and back.counter == counter
    assert until <= back.until_s <= until + 0.001 + 1e-6 * until  # milliseconds, rounded up


@given(
    leases=st.lists(
        st.tuples(
            st.sampled_from(["w1", "w2", None]),
            st.integers(0, 3),  # counter now
            st.integers(0, 3),  # counter marked
            st.integers(-60, 60),  # grace end relative to NOW
        ),
        max_size=8,
    )
)
def test_restarting_owners_are_exactly_the_owners_of_holding_marks(
    leases: list[tuple[str | None, int, int, int]],
) -> None:
    built = [
        marked(f"k{i}", owner, counter, mark=RestartMark(owner or "w1", mark, NOW + until))
        for i, (owner, counter, mark, until) in enumerate(leases)
    ]
    owners = restarting_owners(built, NOW)
    expected = {owner for owner, counter, mark, until in leases if owner and counter == mark and until > 0}
    assert set(owners) == expected
    assert all(until > NOW for until in owners.values())


# --- the leader ------------------------------------------------------------------------------------


def test_a_worker_whose_leases_mark_its_grace_is_restarting_whatever_its_metrics_said() -> None:
    active = WorkerView("w1", zone="a", last_update=10.0)
    other = WorkerView("w2", zone="b")
    graced = with_lease_graces([active, other], {"w1": 130.0, "w3": 90.0})
    by_id = {w.worker_id: w for w in graced}
    assert by_id["w1"].state is WorkerState.RESTARTING and by_id["w1"].grace_until == 130.0
    assert by_id["w1"].zone == "a" and by_id["w1"].last_update == 10.0
    assert by_id["w2"] == other
    # no metrics item at all (withdrawn, or never read): added, restarting
    assert by_id["w3"].state is WorkerState.RESTARTING and by_id["w3"].grace_until == 90.0
    # a later grace declared in the metrics stands
    declared = WorkerView("w1", state=WorkerState.RESTARTING, grace_until=200.0)
    assert with_lease_graces([declared], {"w1": 130.0}) == [declared]


@given(
    expired=st.lists(st.booleans(), min_size=1, max_size=4),
    last_update=st.floats(0, 100),
    changed=st.floats(0, 100),
    now=st.floats(100, 200),
    judged_before=st.booleans(),
)
def test_a_restarting_worker_is_never_quiet_or_dead(
    expired: list[bool], last_update: float, changed: float, now: float, judged_before: bool
) -> None:
    """Whatever the leader observed of its leases and whenever it last read its metrics."""
    views = [LeaseView(f"k{i}", "w1", 1, expired=e) for i, e in enumerate(expired)]
    metrics_said = [WorkerView("w1", last_update=last_update), WorkerView("w2")]
    workers = with_lease_graces(metrics_said, {"w1": now + 10})
    last_change = {view.lease_key: changed for view in views}
    previous = {"w1": last_update + 1} if judged_before else {}
    assert "w1" not in dead_workers(views, workers, last_change, previous)
    assert "w1" not in quiet_workers(views, workers, last_change, now, 1.0)
    # and the assignor leaves its leases where they are
    decision = CooperativeAssignor().decide(views, workers, now, DeciderState(), DeciderConfig())
    assert decision.moves == ()


def test_without_the_lease_marks_the_same_worker_is_judged_and_loses_its_leases() -> None:
    """The race of issue 28: metrics read before the stop (ACTIVE), leases silent and expired."""
    views = [LeaseView("k0", "w1", 1, expired=True), LeaseView("k1", "w2", 1)]
    workers = [WorkerView("w1", last_update=10.0), WorkerView("w2", last_update=10.0)]
    last_change = {"k0": 20.0, "k1": 99.5}
    assert "w1" in dead_workers(views, workers, last_change, {})
    assert quiet_workers(views, workers, last_change, 100.0, 1.0) == {"w1"}
    graced = with_lease_graces(workers, {"w1": 130.0})
    assert dead_workers(views, graced, last_change, {}) == {}
    assert quiet_workers(views, graced, last_change, 100.0, 1.0) == frozenset()


def test_a_restarting_workers_finished_lease_waits_for_it_and_it_receives_none() -> None:
    views = [
        LeaseView("k0", "w1", 1, expired=True, finished=True),
        LeaseView("k1", "w9", 1, expired=True, finished=True),  # a gone worker's: cleaned up elsewhere
    ]
    workers = with_lease_graces([WorkerView("w1"), WorkerView("w2")], {"w1": 130.0})
    moves = finished_lease_moves(views, workers)
    assert [(m.lease_key, m.to_worker) for m in moves] == [("k1", "w2")]


# --- the 2.x taker ---------------------------------------------------------------------------------


def _observed(leases: list[Lease], since: float, now: float) -> LeaseObservations:
    return LeaseObservations().observe(leases, since).observe(leases, now)


def test_another_workers_kept_leases_are_neither_taken_stolen_nor_evicted() -> None:
    kept = [marked(f"k{i}", "w1", 5, mark=RestartMark("w1", 5, NOW + 30)) for i in range(3)]
    mine = [Lease(f"m{i}", TRIM_HORIZON, lease_owner="me", lease_counter=1) for i in range(1)]
    leases = kept + mine
    config = TakerConfig(failover_s=2.0, evict_after_s=0.1)
    observations = _observed(leases, 0.0, 100.0)  # every counter stood still for 50 failovers
    graced = graced_leases(leases, NOW)
    plan = plan_takes(leases, observations, "me", 100.0, config, Random(1), graced=graced)
    assert {t.lease_key for t in (*plan.all, *plan.evictions)} <= {"m0"}
    assert plan.lease_counts["w1"] == 3
    # without the marks they are expired, very old, and taken
    bare = plan_takes(leases, observations, "me", 100.0, config, Random(1))
    assert {t.lease_key for t in bare.all} & {"k0", "k1", "k2"}


def test_the_owner_back_from_its_restart_takes_its_kept_leases_at_once() -> None:
    kept = [marked(f"k{i}", "me", 5, mark=RestartMark("me", 5, NOW + 30)) for i in range(2)]
    other = [Lease(f"o{i}", TRIM_HORIZON, lease_owner="w2", lease_counter=3) for i in range(2)]
    leases = kept + other
    observations = LeaseObservations().observe(leases, 100.0)  # just started: nothing expired yet
    plan = plan_takes(
        leases,
        observations,
        "me",
        100.0,
        TakerConfig(failover_s=2.0),
        Random(1),
        graced=graced_leases(leases, NOW),
    )
    assert sorted(t.lease_key for t in plan.takes) == ["k0", "k1"] and plan.steals == ()


@given(
    marks=st.lists(st.booleans(), min_size=1, max_size=6),
    mine=st.integers(0, 3),
    seed=st.integers(0, 100),
    steals=st.booleans(),
)
def test_the_taker_never_plans_to_move_a_lease_waiting_for_another_worker(
    marks: list[bool], mine: int, seed: int, steals: bool
) -> None:
    waiting = [
        marked(f"k{i}", "w1", 5, mark=RestartMark("w1", 5 if holds else 4, NOW + 30))
        for i, holds in enumerate(marks)
    ]
    held = [Lease(f"m{i}", TRIM_HORIZON, lease_owner="me", lease_counter=1) for i in range(mine)]
    leases = waiting + held
    graced = graced_leases(leases, NOW)
    observations = _observed(leases, 0.0, 100.0)
    plan = plan_takes(
        leases,
        observations,
        "me",
        100.0,
        TakerConfig(failover_s=2.0, evict_after_s=0.1),
        Random(seed),
        steals=steals,
        graced=graced,
    )
    moved = {t.lease_key for t in (*plan.all, *plan.evictions)}
    assert not moved & graced.keys()
