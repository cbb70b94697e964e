"""The project's assignor: table cases for each property of the issue, and Hypothesis invariants."""

from __future__ import annotations

import math
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from kcl_daemon.core.leader.assignor import CooperativeAssignor, Slot, apportion
from kcl_daemon.core.leader.decider import (
    DeciderConfig,
    DeciderState,
    LeaseView,
    Move,
    WorkerState,
    WorkerView,
)
from tests.support.hypothesis_profiles import examples

CONFIG = DeciderConfig(max_handoffs_per_worker=2)
NOW = 1000.0


def key(n: int) -> str:
    return f"shardId-{n:012d}"


def table(owners: dict[str, str | None], tp: dict[str, float] | None = None) -> list[LeaseView]:
    tp = tp or {}
    return [LeaseView(k, o, 7, throughput_kbps=tp.get(k)) for k, o in sorted(owners.items())]


def apply(owners: dict[str, str | None], moves: tuple[Move, ...]) -> None:
    for m in moves:
        owners[m.lease_key] = m.to_worker


def converge(
    owners: dict[str, str | None],
    workers: list[WorkerView],
    config: DeciderConfig = CONFIG,
    rounds: int = 10,
    tp: dict[str, float] | None = None,
) -> list[int]:
    """Run rounds (moves applied at once), returning the number of moves per round."""
    state = DeciderState()
    per_round = []
    for _ in range(rounds):
        d = CooperativeAssignor().decide(table(owners, tp), workers, NOW, state, config)
        state = d.state
        apply(owners, d.moves)
        per_round.append(len(d.moves))
    return per_round


def test_apportion_is_proportional_sticky_and_capped() -> None:
    slots = [Slot("a", 1, 99, 5), Slot("b", 1, 99, 0), Slot("c", 1, 99, 2)]
    assert apportion(7, slots) == {"a": 3, "b": 2, "c": 2}  # a already holds more: it keeps the extra one
    assert apportion(9, [Slot("a", 2, 99, 0), Slot("b", 1, 99, 0)]) == {"a": 6, "b": 3}
    assert apportion(10, [Slot("a", 1, 2, 0), Slot("b", 1, 99, 0)]) == {"a": 2, "b": 8}
    assert apportion(10, [Slot("a", 1, 2, 0), Slot("b", 1, 3, 0)]) == {"a": 2, "b": 3}
    assert apportion(5, [Slot("a", 0, 9, 0), Slot("b", 0, 9, 0)]) in ({"a": 3, "b": 2}, {"a": 2, "b": 3})


def test_seed_000_ends_250_250_in_two_rounds_with_the_lower_bound_of_moves() -> None:
    owners: dict[str, str | None] = {key(i): f"c1-w{i % 100}" for i in range(500)}
    workers = [WorkerView(f"c{c}-w{i}", zone=f"c{c}") for c in (1, 2) for i in range(100)]
    per_round = converge(owners, workers, rounds=4)
    assert per_round[2:] == [0, 0] and sum(per_round) == 250
    assert Counter(o.split("-")[0] for o in owners.values() if o) == {"c1": 250, "c2": 250}
    assert set(Counter(owners.values()).values()) == {2, 3}


def test_unowned_leases_are_placed_in_the_same_round_whatever_the_handoff_limit() -> None:
    owners: dict[str, str | None] = {key(i): None for i in range(30)}
    d = CooperativeAssignor().decide(
        table(owners), [WorkerView("a"), WorkerView("b")], NOW, DeciderState(), CONFIG
    )
    assert len(d.moves) == 30 and not any(m.graceful for m in d.moves)
    assert Counter(m.to_worker for m in d.moves) == {"a": 15, "b": 15}


def test_hand_offs_per_source_worker_are_bounded() -> None:
    owners: dict[str, str | None] = {key(i): "a" for i in range(12)}
    workers = [WorkerView(w) for w in "abcd"]
    d = CooperativeAssignor().decide(table(owners), workers, NOW, DeciderState(), CONFIG)
    assert len(d.moves) == 2 and all(m.graceful and m.from_worker == "a" for m in d.moves)
    assert converge(owners, workers)[:5] == [2, 2, 2, 2, 1]
    assert sorted(Counter(owners.values()).values()) == [3, 3, 3, 3]


def test_nothing_moves_inside_the_balance_band() -> None:
    owners: dict[str, str | None] = {key(i): "abc"[i % 3] for i in range(10)}  # 4/3/3
    assert converge(owners, [WorkerView(w) for w in "abc"], rounds=3) == [0, 0, 0]


def test_a_worker_restarting_within_its_grace_keeps_its_leases() -> None:
    owners: dict[str, str | None] = {key(i): "ab"[i % 2] for i in range(6)}
    leases = [LeaseView(k, o, 1, expired=o == "a") for k, o in sorted(owners.items())]
    waiting = [WorkerView("a", state=WorkerState.RESTARTING, grace_until=NOW + 1), WorkerView("b")]
    assert CooperativeAssignor().decide(leases, waiting, NOW, DeciderState(), CONFIG).moves == ()
    # Back in time: ACTIVE again and renewing: nothing moves.
    back = [WorkerView("a"), WorkerView("b")]
    fresh = [LeaseView(k, o, 2) for k, o in sorted(owners.items())]
    assert CooperativeAssignor().decide(fresh, back, NOW, DeciderState(), CONFIG).moves == ()
    # Grace over: its expired leases are spread, without hand-off.
    late = [WorkerView("a", state=WorkerState.RESTARTING, grace_until=NOW), WorkerView("b"), WorkerView("c")]
    moves = CooperativeAssignor().decide(leases, late, NOW, DeciderState(), CONFIG).moves
    assert {m.lease_key for m in moves} == {lease.lease_key for lease in leases if lease.owner == "a"}
    assert Counter(m.to_worker for m in moves) == {"c": 3} and not any(m.graceful for m in moves)


def test_a_worker_back_within_its_grace_keeps_leases_it_has_not_renewed_yet() -> None:
    leases = [LeaseView(key(i), "ab"[i % 2], 1, expired=i % 2 == 0) for i in range(6)]
    waiting = [WorkerView("a", state=WorkerState.RESTARTING, grace_until=NOW + 30), WorkerView("b")]
    state = CooperativeAssignor().decide(leases, waiting, NOW, DeciderState(), CONFIG).state
    back = [WorkerView("a", last_update=NOW + 5), WorkerView("b")]
    assert CooperativeAssignor().decide(leases, back, NOW + 5, state, CONFIG).moves == ()
    # Still not renewed once its grace is over: a is suspect, its leases go.
    moves = CooperativeAssignor().decide(leases, back, NOW + 31, state, CONFIG).moves
    assert {m.to_worker for m in moves} == {"b"} and len(moves) == 3


def test_a_leaving_worker_hands_off_everything_at_once() -> None:
    owners: dict[str, str | None] = {key(i): "ab"[i % 2] for i in range(10)}
    workers = [WorkerView("a", state=WorkerState.LEAVING), WorkerView("b"), WorkerView("c")]
    moves = CooperativeAssignor().decide(table(owners), workers, NOW, DeciderState(), CONFIG).moves
    assert len(moves) == 5 and all(m.graceful and m.from_worker == "a" for m in moves)


def test_zone_loss_spreads_its_leases_evenly_over_the_surviving_zones() -> None:
    workers = [WorkerView(f"{z}-{i}", zone=z) for z in ("az1", "az2", "az3") for i in range(3)]
    owners: dict[str, str | None] = {key(i): None for i in range(90)}
    converge(owners, workers, rounds=1)
    survivors = [w for w in workers if w.zone != "az3"]
    leases = [LeaseView(k, o, 1, expired=(o or "").startswith("az3")) for k, o in sorted(owners.items())]
    moves = CooperativeAssignor().decide(leases, survivors, NOW, DeciderState(), CONFIG).moves
    apply(owners, moves)
    assert len(moves) == 30
    assert Counter(o.split("-")[0] for o in owners.values() if o) == {"az1": 45, "az2": 45}
    assert set(Counter(owners.values()).values()) == {15}


def test_dead_worker_with_fresh_metrics_gets_nothing() -> None:
    leases = [LeaseView(key(0), "dead", 1, expired=True), LeaseView(key(1), None, 0)]
    moves = (
        CooperativeAssignor()
        .decide(leases, [WorkerView("dead"), WorkerView("b")], NOW, DeciderState(), CONFIG)
        .moves
    )
    assert {m.to_worker for m in moves} == {"b"}


def test_hot_shards_are_spread_by_throughput() -> None:
    owners: dict[str, str | None] = {key(i): None for i in range(8)}
    tp = {key(i): (800.0 if i < 2 else 10.0) for i in range(8)}
    converge(owners, [WorkerView("a"), WorkerView("b")], tp=tp, rounds=1)
    assert owners[key(0)] != owners[key(1)]  # the two hot shards on different workers


def test_load_move_swaps_a_hot_lease_when_counts_are_balanced() -> None:
    owners: dict[str, str | None] = {key(0): "a", key(1): "a", key(2): "b", key(3): "b"}
    tp = {key(0): 900.0, key(1): 900.0, key(2): 10.0, key(3): 10.0}
    per_round = converge(owners, [WorkerView("a"), WorkerView("b")], tp=tp, rounds=4)
    assert per_round == [2, 0, 0, 0]  # one swap, then quiet
    assert owners[key(0)] != owners[key(1)]


def test_low_cpu_jitter_never_moves_a_lease() -> None:
    # No throughput known yet: CPU decides, with an absolute band of 10 points.
    owners: dict[str, str | None] = {key(i): "ab"[i % 2] for i in range(4)}
    workers = [WorkerView("a", cpu_percent=6.0), WorkerView("b", cpu_percent=1.0)]  # 6x, but 5 points
    assert converge(owners, workers, rounds=3) == [0, 0, 0]
    hot = [WorkerView("a", cpu_percent=90.0), WorkerView("b", cpu_percent=10.0)]
    assert converge(owners, hot, rounds=1) == [2]  # a swap: counts stay 2/2


def test_small_throughput_differences_never_move_a_lease() -> None:
    owners: dict[str, str | None] = {key(i): "ab"[i % 2] for i in range(4)}
    tp = {key(0): 40.0, key(1): 5.0, key(2): 40.0, key(3): 5.0}  # a: 80, b: 10 - within 50 KB/s of 45
    assert converge(owners, [WorkerView("a"), WorkerView("b")], tp=tp, rounds=3) == [0, 0, 0]


def test_max_leases_and_max_throughput_are_honoured() -> None:
    owners: dict[str, str | None] = {key(i): None for i in range(10)}
    converge(owners, [WorkerView("a"), WorkerView("b")], DeciderConfig(max_leases_for_worker=3), rounds=2)
    assert Counter(owners.values()) == {"a": 3, "b": 3, None: 4}
    owners = {key(i): None for i in range(10)}
    tp = dict.fromkeys(owners, 100.0)
    converge(
        owners, [WorkerView("a"), WorkerView("b")], DeciderConfig(max_throughput_per_host_kbps=300.0), tp=tp
    )
    assert all(n <= 3 for w, n in Counter(owners.values()).items() if w)


def test_capacity_weights_targets() -> None:
    owners: dict[str, str | None] = {key(i): None for i in range(30)}
    converge(owners, [WorkerView("big", capacity=2.0), WorkerView("small")], rounds=1)
    assert Counter(owners.values()) == {"big": 20, "small": 10}


def test_pending_handoff_counts_for_its_destination_and_is_not_moved() -> None:
    leases = [
        LeaseView(key(i), "b" if i == 0 else "a", 1, checkpoint_owner="a" if i == 0 else None)
        for i in range(4)
    ]
    moves = (
        CooperativeAssignor()
        .decide(leases, [WorkerView("a"), WorkerView("b")], NOW, DeciderState(), CONFIG)
        .moves
    )
    assert key(0) not in {m.lease_key for m in moves}
    assert len(moves) == 1  # a keeps 2 of its 3, b gets 1 more


# --- properties -------------------------------------------------------------------------------------


@st.composite
def fleets(draw: st.DrawFn) -> tuple[dict[str, str | None], list[WorkerView], int]:
    n_workers = draw(st.integers(1, 8))
    zones = draw(st.integers(1, 3))
    workers = [WorkerView(f"w{i}", zone=f"z{i % zones}") for i in range(n_workers)]
    pool = [None, "gone", *(w.worker_id for w in workers)]
    owners = {key(i): draw(st.sampled_from(pool)) for i in range(draw(st.integers(0, 60)))}
    return owners, workers, draw(st.integers(1, 4))


def _fractional_ok(owners: dict[str, str | None], workers: list[WorkerView]) -> None:
    total = len(owners)
    counts = Counter(owners.values())
    zones = Counter(w.zone for w in workers)
    zone_counts: Counter[str | None] = Counter()
    for w in workers:
        zone_counts[w.zone] += counts[w.worker_id]
    for z, n in zones.items():
        share = total * n / len(workers)
        assert math.floor(share) <= zone_counts[z] <= math.ceil(share)
        for w in (w for w in workers if w.zone == z):
            assert math.floor(zone_counts[z] / n) <= counts[w.worker_id] <= math.ceil(zone_counts[z] / n)


@settings(max_examples=examples(150), deadline=None)
@given(fleets())
def test_converges_balanced_per_worker_and_zone_then_stays_still(
    fleet: tuple[dict[str, str | None], list[WorkerView], int],
) -> None:
    owners, workers, limit = fleet
    config = DeciderConfig(max_handoffs_per_worker=limit)
    state = DeciderState()
    for round_no in range(40):
        leases = [LeaseView(k, o, 1, expired=o == "gone") for k, o in sorted(owners.items())]
        d = CooperativeAssignor().decide(leases, workers, NOW, state, config)
        state = d.state
        keys = [m.lease_key for m in d.moves]
        assert len(set(keys)) == len(keys)
        assert all(
            Counter(m.from_worker for m in d.moves if m.graceful)[w.worker_id] <= limit for w in workers
        )
        if round_no == 0:  # priority: everything unowned or expired is placed in the first round
            placed = set(keys)
            assert all(k in placed for k, o in owners.items() if o in (None, "gone"))
        apply(owners, d.moves)
        if not d.moves:
            break
    else:
        raise AssertionError("did not converge")
    _fractional_ok(owners, workers)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=8), st.integers(0, 10))
def test_moves_equal_the_lower_bound(counts: list[int], unowned: int) -> None:
    """One zone, equal workers: moves = unowned + sum over ceil + workers at ceil beyond the remainder."""
    owners: dict[str, str | None] = {}
    for w, c in enumerate(counts):
        owners.update({f"{w}-{i}": f"w{w}" for i in range(c)})
    owners.update({f"u-{i}": None for i in range(unowned)})
    workers = [WorkerView(f"w{i}") for i in range(len(counts))]
    n, k = len(owners), len(counts)
    floor, extra = divmod(n, k)
    if extra:
        over = sum(max(0, c - floor - 1) for c in counts) + max(0, sum(c > floor for c in counts) - extra)
    else:
        over = sum(max(0, c - floor) for c in counts)
    moves = converge(owners, workers, DeciderConfig(max_handoffs_per_worker=1000), rounds=3)
    assert moves[0] == unowned + over and moves[1:] == [0, 0]


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(st.floats(0, 1000), min_size=1, max_size=40),
    st.integers(1, 6),
    st.lists(st.none() | st.floats(0, 100), min_size=6, max_size=6),
)
def test_load_balancing_settles(tps: list[float], n_workers: int, cpus: list[float | None]) -> None:
    """Whatever the throughputs and CPU figures, rounds over an unchanged fleet stop moving leases."""
    workers = [WorkerView(f"w{i}", zone=f"z{i % 2}", cpu_percent=cpus[i]) for i in range(n_workers)]
    owners: dict[str, str | None] = {key(i): None for i in range(len(tps))}
    tp = {key(i): t for i, t in enumerate(tps)}
    per_round = converge(owners, workers, tp=tp, rounds=40)
    assert per_round[-10:] == [0] * 10, per_round
