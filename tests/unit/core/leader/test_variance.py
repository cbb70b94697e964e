"""Java's variance-based decider (contract §5.2): table cases worked out by hand from it, and invariants."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcl_daemon.core.leader.decider import (
    DeciderConfig,
    DeciderState,
    LeaseView,
    Move,
    WorkerState,
    WorkerView,
)
from kcl_daemon.core.leader.variance import RUN_COUNTER, VarianceDecider, ema
from tests.support.hypothesis_profiles import examples

DEFAULT = DeciderConfig()
NOW = 1000.0


def key(n: int) -> str:
    return f"shardId-{n:012d}"


def leases(
    owners: list[str | None], tp: float | None = None, expired: frozenset[int] = frozenset()
) -> list[LeaseView]:
    return [
        LeaseView(key(i), o, lease_counter=5 + i, throughput_kbps=tp, expired=i in expired)
        for i, o in enumerate(owners)
    ]


def workers(*ids: str, cpu: dict[str, float] | None = None) -> list[WorkerView]:
    cpu = cpu or {}
    return [WorkerView(w, cpu_percent=cpu.get(w)) for w in ids]


def decide(
    ls: list[LeaseView],
    ws: list[WorkerView],
    config: DeciderConfig = DEFAULT,
    state: DeciderState | None = None,
    decider: VarianceDecider | None = None,
) -> tuple[list[Move], DeciderState]:
    d = (decider or VarianceDecider()).decide(ls, ws, NOW, state or DeciderState(), config)
    return list(d.moves), d.state


def owners_after(ls: list[LeaseView], moves: list[Move]) -> dict[str, str | None]:
    result = {lease.lease_key: lease.checkpoint_owner or lease.owner for lease in ls}
    for m in moves:
        result[m.lease_key] = m.to_worker
    return result


def test_ema_skips_failed_samples_and_seeds_with_the_first() -> None:
    assert ema([]) == 0.0
    assert ema([-1, -1]) == 0.0
    assert ema([10.0]) == 10.0
    assert ema([10.0, -1, 20.0], alpha=0.5) == 15.0
    assert ema([10.0, 20.0, 40.0], alpha=0.5) == 27.5


def test_cold_start_spreads_unowned_leases_round_robin() -> None:
    moves, state = decide(leases([None] * 8), workers("a", "b", "c", "d"))
    assert Counter(m.to_worker for m in moves) == {"a": 2, "b": 2, "c": 2, "d": 2}
    assert all(not m.graceful and m.from_worker is None for m in moves)
    assert state.values[RUN_COUNTER] == 1


def test_expired_lease_of_a_dead_worker_goes_to_the_least_utilised_worker() -> None:
    # a holds both live leases, b none; the dead worker's lease is expired and goes to b.
    ls = leases(["a", "a", "dead"], tp=10.0, expired=frozenset({2}))
    moves, _ = decide(ls, workers("a", "b"), decider=VarianceDecider(balancing_frequency=99))
    assert moves == [Move(key(2), 7, "dead", "b", graceful=False, reason="expired or unassigned")]


def test_expired_lease_whose_owner_is_chosen_stays_put() -> None:
    ls = leases(["a", "b", "b"], tp=10.0, expired=frozenset({0}))
    moves, _ = decide(ls, workers("a", "b"), decider=VarianceDecider(balancing_frequency=99))
    assert moves == []  # a has the most capacity and already owns it: nothing to write


def test_expired_pending_handoff_is_reassigned_even_to_its_actual_owner() -> None:
    ls = [
        LeaseView(key(0), "gone", 3, expired=True, throughput_kbps=1.0, checkpoint_owner="a"),
        LeaseView(key(1), "b", 4, throughput_kbps=1.0),
    ]
    moves, _ = decide(ls, workers("a", "b"), decider=VarianceDecider(balancing_frequency=99))
    assert moves == [Move(key(0), 3, "a", "a", graceful=False, reason="expired or unassigned")]


def test_pending_handoff_that_is_not_stuck_is_never_moved() -> None:
    ls = [
        LeaseView(key(i), "a", 1, throughput_kbps=10.0, checkpoint_owner="a" if i == 0 else None)
        for i in range(6)
    ]
    moves, _ = decide(ls, workers("a", "b"))
    assert key(0) not in {m.lease_key for m in moves}


def test_variance_balancing_worked_example() -> None:
    # 9 leases x 10 KB/s, target 30 KB/s per worker. T: a=200, b=66.7, c=33.3; avg 100, band 90..110.
    # Donor a: (200-100)/200 x 60 KB/s x 0.6 = 18 KB/s -> one 10 KB/s lease (18-10 > 0, 8-10 <= 0).
    # It goes to c (most capacity: (100-33.3)/33.3 = 2); c extrapolates to 66.7 <= 100.
    ls = leases(["a"] * 6 + ["b"] * 2 + ["c"], tp=10.0)
    moves, _ = decide(ls, workers("a", "b", "c"))
    assert len(moves) == 1
    (m,) = moves
    assert (m.from_worker, m.to_worker, m.graceful, m.reason) == ("a", "c", True, "variance balancing")


def test_balancing_runs_every_third_run_counting_from_the_first() -> None:
    ls = leases(["a"] * 6 + ["b"] * 2 + ["c"], tp=10.0)
    ws = workers("a", "b", "c")
    state = DeciderState()
    moved = []
    for _ in range(6):
        moves, state = decide(ls, ws, state=state)
        moved.append(len(moves))
    assert moved == [1, 0, 0, 1, 0, 0]


def test_nothing_moves_inside_the_threshold_band() -> None:
    # T: a=105, b=95: inside avg 100 +- 10 %.
    ls = [LeaseView(key(0), "a", 1, throughput_kbps=105.0), LeaseView(key(1), "b", 1, throughput_kbps=95.0)]
    moves, _ = decide(ls, workers("a", "b"))
    assert moves == []


def test_overshoot_takes_the_smallest_lease_only_when_allowed() -> None:
    # a: 30+40 = 70, b: 10 -> target 40; T a=175, b=25; avg 100. take = 70 x 75/175 x 0.6 = 18 < every lease.
    ls = [
        LeaseView(key(0), "a", 1, throughput_kbps=30.0),
        LeaseView(key(1), "a", 1, throughput_kbps=40.0),
        LeaseView(key(2), "b", 1, throughput_kbps=10.0),
    ]
    moves, _ = decide(ls, workers("a", "b"))
    assert [(m.lease_key, m.to_worker) for m in moves] == [(key(0), "b")]
    moves, _ = decide(ls, workers("a", "b"), config=DeciderConfig(allow_throughput_overshoot=False))
    assert moves == []


def test_cpu_donor_with_zero_throughput_gives_exactly_one_lease() -> None:
    # No throughput known: CPU a=90, b=10, avg 50 -> a donates one lease; b extrapolates 10 + 50/2 = 35.
    ls = leases(["a"] * 4)
    moves, _ = decide(ls, workers("a", "b", cpu={"a": 90.0, "b": 10.0}))
    assert [(m.from_worker, m.to_worker) for m in moves] == [("a", "b")]


def test_recipient_that_would_go_above_average_abandons_the_donor() -> None:
    # CPU a=80, b=40 (avg 60); a is a donor, but b would reach 40 + 60/1 = 100 > 60 with one more lease.
    ls = leases(["a"])
    moves, _ = decide(ls, workers("a", "b", cpu={"a": 80.0, "b": 40.0}))
    assert moves == []


def test_max_leases_for_worker_caps_assignment() -> None:
    moves, _ = decide(leases([None] * 10), workers("a", "b"), config=DeciderConfig(max_leases_for_worker=3))
    assert Counter(m.to_worker for m in moves) == {"a": 3, "b": 3}


def test_max_throughput_per_host_stops_a_worker_once_exceeded() -> None:
    config = DeciderConfig(max_throughput_per_host_kbps=25.0)
    moves, _ = decide(leases([None] * 8, tp=10.0), workers("a"), config=config)
    assert len(moves) == 3  # 0, 10, 20 are <= 25; at 30 it leaves the queue


def test_restarting_and_leaving_workers_get_nothing_and_keep_live_leases() -> None:
    ws = [
        WorkerView("a"),
        WorkerView("r", state=WorkerState.RESTARTING),
        WorkerView("l", state=WorkerState.LEAVING),
    ]
    ls = leases(["r", "l", None, None], tp=1.0)
    moves, _ = decide(ls, ws)
    assert {m.lease_key: m.to_worker for m in moves} == {key(2): "a", key(3): "a"}


def test_finished_leases_are_never_assigned() -> None:
    ls = [LeaseView(key(0), None, 1, finished=True), LeaseView(key(1), None, 1)]
    moves, _ = decide(ls, workers("a"))
    assert [m.lease_key for m in moves] == [key(1)]


def test_no_active_worker_means_no_moves() -> None:
    moves, _ = decide(leases([None, "x"]), [])
    assert moves == []


def test_same_seed_and_state_give_the_same_moves() -> None:
    ls = leases(["a"] * 20 + ["b"] * 2, tp=5.0)
    ws = workers("a", "b", "c")
    assert decide(ls, ws) == decide(ls, ws)


def test_balancing_frequency_must_be_positive() -> None:
    with pytest.raises(ValueError, match="balancing_frequency"):
        VarianceDecider(balancing_frequency=0)


# --- invariants -------------------------------------------------------------------------------------

_WORKER_IDS = [f"w{i}" for i in range(6)]


@st.composite
def fleets(draw: st.DrawFn) -> tuple[list[LeaseView], list[WorkerView], DeciderConfig]:
    n_workers = draw(st.integers(0, 6))
    ws = [
        WorkerView(
            _WORKER_IDS[i],
            cpu_percent=draw(st.none() | st.floats(0, 150)),
            state=draw(st.sampled_from([WorkerState.ACTIVE] * 4 + [WorkerState.RESTARTING])),
        )
        for i in range(n_workers)
    ]
    owner_pool: list[str | None] = [None, "dead", *_WORKER_IDS[:n_workers]]
    ls = []
    for i in range(draw(st.integers(0, 30))):
        owner = draw(st.sampled_from(owner_pool))
        ls.append(
            LeaseView(
                key(i),
                owner,
                lease_counter=draw(st.integers(0, 9)),
                expired=owner == "dead" or draw(st.booleans()),
                throughput_kbps=draw(st.none() | st.floats(0, 500)),
                finished=draw(st.booleans()) and draw(st.booleans()),
            )
        )
    config = DeciderConfig(
        max_leases_for_worker=draw(st.integers(1, 12)),
        rebalance_threshold_percent=draw(st.sampled_from([5.0, 10.0, 30.0])),
        allow_throughput_overshoot=draw(st.booleans()),
    )
    return ls, ws, config


@settings(max_examples=examples(200), deadline=None)
@given(fleets(), st.integers(0, 5))
def test_invariants(fleet: tuple[list[LeaseView], list[WorkerView], DeciderConfig], run: int) -> None:
    ls, ws, config = fleet
    state = DeciderState({RUN_COUNTER: float(run)})
    moves, _ = decide(ls, ws, config=config, state=state)
    by_key = {lease.lease_key: lease for lease in ls}
    active = {w.worker_id for w in ws if w.state is WorkerState.ACTIVE}
    # No lease twice; moves only to active workers; finished leases never move; counters as read.
    assert len({m.lease_key for m in moves}) == len(moves)
    assert all(m.to_worker in active for m in moves)
    assert all(not by_key[m.lease_key].finished for m in moves)
    assert all(m.lease_counter == by_key[m.lease_key].lease_counter for m in moves)
    # Nobody who receives a lease ends over maxLeasesForWorker.
    after = Counter(o for o in owners_after(ls, moves).values())
    for m in moves:
        assert after[m.to_worker] <= config.max_leases_for_worker
    # Priority: with enough free slots, every unowned or expired lease is placed (or kept by an active owner).
    before = Counter(lease.owner for lease in ls)
    free = sum(max(0, config.max_leases_for_worker - before[w]) for w in active)
    waiting = [lease for lease in ls if not lease.finished and (lease.expired or lease.owner is None)]
    if active and free >= len(waiting):
        owners = owners_after(ls, moves)
        assert all(owners[lease.lease_key] in active for lease in waiting)
