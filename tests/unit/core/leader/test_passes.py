"""The leader's passes (kcl_daemon.core.leader.passes): when to scan, what an expiry pass may move,
finished leases of gone workers, and the assignor's rule that a worker with an expired lease gets none."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.leader.assignor import CooperativeAssignor
from kcl_daemon.core.leader.decider import (
    DeciderConfig,
    DeciderState,
    LeaseView,
    Move,
    WorkerState,
    WorkerView,
)
from kcl_daemon.core.leader.passes import (
    PassKind,
    dead_workers,
    earliest_due,
    expiry_moves,
    finished_lease_moves,
    must_place,
    next_balance_at,
    next_pass_at,
    plan_pass,
    quiet_workers,
    still_arriving,
)
from kcl_daemon.core.leases.expiry import DUE_EPSILON_S, LeaseObservations, expiry_interval_for
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import TRIM_HORIZON


@pytest.mark.parametrize(
    ("failover_s", "interval_s"), [(10.0, 1.0), (3.0, 0.3), (1.0, 0.1), (60.0, 1.0), (0.1, 0.05)]
)
def test_the_expiry_interval_is_a_tenth_of_the_failover_at_most_a_second(
    failover_s: float, interval_s: float
) -> None:
    assert expiry_interval_for(failover_s) == pytest.approx(interval_s)


@pytest.mark.parametrize(
    ("leading", "due_in", "suspicious", "kind"),
    [
        (True, 0.0, False, PassKind.BALANCE),
        (True, -5.0, False, PassKind.BALANCE),
        (True, 5.0, False, PassKind.EXPIRY),
        (False, 5.0, True, PassKind.OBSERVE),
        (False, 5.0, False, None),
        (False, 0.0, False, None),
    ],
)
def test_plan_pass(leading: bool, due_in: float, suspicious: bool, kind: PassKind | None) -> None:
    assert plan_pass(100.0, leading=leading, balance_due_at=100.0 + due_in, suspicious=suspicious) is kind


def _move(reason: str, graceful: bool = True) -> Move:
    return Move("s1", 3, "a", "b", graceful, reason)


@pytest.mark.parametrize(
    ("applied", "due_in"),
    [
        ((), 20.0),  # nothing moved: the interval
        ((_move("over target"),), 5.0),  # count hand-offs: catch up half a failover later
        ((_move("worker leaving"),), 5.0),
        ((_move("load"),), 20.0),  # load moves wait for the next metrics
        ((_move("unassigned or expired", graceful=False),), 20.0),  # placed at once already
    ],
)
def test_a_round_that_handed_off_by_count_is_followed_by_a_catch_up_round(
    applied: tuple[Move, ...], due_in: float
) -> None:
    assert next_balance_at(100.0, 20.0, 10.0, applied) == pytest.approx(100.0 + due_in)


@pytest.mark.parametrize(
    ("leading", "balance_in", "due_in", "wake_in"),
    [
        (True, 20.0, None, 1.0),  # the expiry interval
        (True, 0.5, None, 0.5),  # a balance round sooner
        (True, 20.0, 0.2, 0.2),  # a lease comes due sooner
        (True, 20.0, -1.0, 1.0),  # already due: the next pass handles it
        (False, 0.5, 0.2, 1.0),  # a follower: only the interval
    ],
)
def test_next_pass_at(leading: bool, balance_in: float, due_in: float | None, wake_in: float) -> None:
    due = None if due_in is None else 100.0 + due_in
    wake = next_pass_at(
        100.0, leading=leading, balance_due_at=100.0 + balance_in, earliest_due=due, interval_s=1.0
    )
    assert wake == pytest.approx(100.0 + wake_in)


def test_earliest_due_is_the_first_owned_lease_to_expire_as_seen() -> None:
    leases = [
        Lease("a", TRIM_HORIZON, lease_owner="w1", lease_counter=3),
        Lease("b", TRIM_HORIZON, lease_owner="w2", lease_counter=8),
        Lease("c", TRIM_HORIZON, lease_counter=1),  # unowned: nothing to expire
    ]
    seen = LeaseObservations().observe(leases, 10.0)
    seen = seen.observe([Lease("a", TRIM_HORIZON, lease_owner="w1", lease_counter=4), *leases[1:]], 12.0)
    assert earliest_due(leases, seen, 10.0, 12.5) == pytest.approx(20.0 + DUE_EPSILON_S)  # b, seen at 10
    assert earliest_due(leases, seen, 10.0, 21.0) == pytest.approx(22.0 + DUE_EPSILON_S)  # b expired


VIEWS = [
    LeaseView("live", "w1", 5),
    LeaseView("free", None, 2),
    LeaseView("expired", "dead", 9, expired=True),
    LeaseView("stuck", "w2", 4, expired=True, checkpoint_owner="w1"),  # a hand-off stuck past its time
    LeaseView("done", "dead", 3, expired=True, finished=True),
]


def test_an_expiry_pass_places_only_unowned_and_expired_leases_with_plain_assignments() -> None:
    assert must_place(VIEWS) == {"free", "expired", "stuck"}
    moves = [
        Move("live", 5, "w1", "w2", graceful=True, reason="load"),
        Move("free", 2, None, "w2", graceful=False),
        Move("expired", 9, "dead", "w1", graceful=False),
        Move("stuck", 4, "w2", "w1", graceful=False),
    ]
    assert [m.lease_key for m in expiry_moves(moves, VIEWS)] == ["free", "expired", "stuck"]


def test_a_finished_lease_of_a_gone_worker_goes_to_the_least_loaded_live_worker() -> None:
    workers = [WorkerView("w1"), WorkerView("w2")]
    views = [
        *VIEWS,
        LeaseView("w2-done", "w2", 1, finished=True),  # its owner lives: it cleans it up itself
        LeaseView("orphan", None, 1, finished=True),  # released by a worker that stopped
        LeaseView("unseen", "w9", 1, finished=True),  # an owner not seen yet, not expired: wait
    ]
    moves = finished_lease_moves(views, workers)
    assert [(m.lease_key, m.to_worker, m.graceful) for m in moves] == [
        ("done", "w1", False),
        ("orphan", "w2", False),
    ]
    assert finished_lease_moves(views, []) == []


@given(st.lists(st.booleans(), min_size=1, max_size=8), st.integers(0, 3))
def test_a_worker_owning_an_expired_lease_is_given_nothing(expired: list[bool], free: int) -> None:
    """The investigation saw a dead worker's expired lease given back to it, and hand-offs to it: a worker
    with any expired lease (not in a hand-off) receives no lease until it publishes newer metrics."""
    views = [LeaseView(f"s{i}", "sick", 3, expired=e) for i, e in enumerate(expired)]
    views += [LeaseView(f"f{i}", None, 1) for i in range(free)]
    views += [LeaseView("h", "ok", 1)]
    workers = [WorkerView("sick", last_update=5.0), WorkerView("ok", last_update=5.0)]
    decision = CooperativeAssignor().decide(views, workers, 100.0, DeciderState(), DeciderConfig())
    if any(expired):
        assert all(m.to_worker != "sick" for m in decision.moves)


@pytest.mark.parametrize(
    ("metrics_at", "changed_at", "state", "previous", "dead"),
    [
        (100.0, 150.0, WorkerState.ACTIVE, None, True),  # nothing published since its lease stopped changing
        (160.0, 150.0, WorkerState.ACTIVE, None, False),  # published since: back from a restart, adopting
        (100.0, 150.0, WorkerState.RESTARTING, None, False),  # its grace decides, not this rule
        (100.0, None, WorkerState.ACTIVE, None, True),  # never seen to change
    ],
)
def test_dead_workers(
    metrics_at: float, changed_at: float | None, state: WorkerState, previous: float | None, dead: bool
) -> None:
    views = [LeaseView("s0", "w", 3, expired=True), LeaseView("s1", "ok", 3)]
    workers = [WorkerView("w", state=state, last_update=metrics_at), WorkerView("ok", last_update=metrics_at)]
    last_change = {} if changed_at is None else {"s0": changed_at}
    assert ("w" in dead_workers(views, workers, last_change, {})) is dead


def test_a_dead_worker_stays_dead_until_it_publishes_newer_metrics() -> None:
    workers = [WorkerView("w", last_update=100.0)]
    judged = dead_workers([LeaseView("s0", "w", 3, expired=True)], workers, {"s0": 150.0}, {})
    assert judged == {"w": 100.0}
    assert dead_workers([], workers, {}, judged) == judged  # its leases went elsewhere: still dead
    assert dead_workers([], [WorkerView("w", last_update=130.0)], {}, judged) == {}  # it published again
    handing = [LeaseView("s0", "w", 3, expired=True, checkpoint_owner="w")]
    assert dead_workers(handing, workers, {"s0": 150.0}, {}) == {}  # a hand-off is the leader's own timer


def test_a_worker_whose_every_lease_stood_for_half_a_failover_is_quiet() -> None:
    views = [
        LeaseView("a1", "a", 1),
        LeaseView("a2", "a", 1),
        LeaseView("b1", "b", 1),
        LeaseView("c1", "c", 1),
        LeaseView("d1", "d", 1, finished=True),
        LeaseView("u", None, 1),
    ]
    workers = [
        WorkerView("a"),
        WorkerView("b"),
        WorkerView("c", state=WorkerState.RESTARTING),
        WorkerView("d"),
        WorkerView("e"),
    ]
    changed = {"a1": 94.0, "a2": 99.0, "b1": 94.0, "c1": 80.0, "d1": 10.0}
    # a renewed one lease lately; b renewed nothing for 6 s; c restarts (keeps without renewing); d owns
    # only a finished lease; e owns nothing
    assert quiet_workers(views, workers, changed, 100.0, 5.0) == {"b"}
    # a pending hand-off counts for the worker serving it (it renews it), not for its destination
    moving = [LeaseView("m", "e", 1, checkpoint_owner="b")]
    assert quiet_workers(moving, workers, {"m": 80.0}, 100.0, 5.0) == {"b"}


@pytest.mark.parametrize(
    ("arrived_at", "now", "arriving"),
    [
        (None, 100.0, False),  # never seen changing owner: plain expiry
        (100.0, 100.0, True),
        (100.0, 112.0, True),  # past one failover: a Java worker may not have discovered it yet
        (100.0, 120.0, True),  # Java's leader would look again only now
        (100.0, 120.5, False),
    ],
)
def test_a_lease_moved_to_a_java_worker_is_not_expired_for_two_failovers(
    arrived_at: float | None, now: float, arriving: bool
) -> None:
    assert still_arriving(arrived_at, now, 10.0) is arriving
