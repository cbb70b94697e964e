"""LEASE_COUNT_BASED (Java's LeaseCountBasedLeaseAssignmentDecider): table-driven cases and properties."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.leader.decider import DeciderConfig, DeciderState, LeaseView, WorkerState, WorkerView
from kcl_daemon.core.leader.lease_count import LeaseCountDecider

DECIDER = LeaseCountDecider()


def _leases(*owners: str | None, expired: frozenset[int] = frozenset()) -> list[LeaseView]:
    return [LeaseView(f"s-{i}", owner, 5, expired=i in expired) for i, owner in enumerate(owners)]


def _workers(*ids: str) -> list[WorkerView]:
    return [WorkerView(w) for w in ids]


def _after(
    leases: list[LeaseView], workers: list[WorkerView], config: DeciderConfig | None = None
) -> Counter[str]:
    decision = DECIDER.decide(leases, workers, 0.0, DeciderState(), config or DeciderConfig())
    owner = {lease.lease_key: lease.actual_owner for lease in leases}
    for move in decision.moves:
        owner[move.lease_key] = move.to_worker
    return Counter(o for o in owner.values() if o is not None)


def test_cold_start_spreads_evenly() -> None:
    assert _after(_leases(None, None, None, None), _workers("a", "b")) == {"a": 2, "b": 2}


def test_new_worker_gets_its_share_by_graceful_hand_off() -> None:
    leases = _leases("a", "a", "a", "a")
    decision = DECIDER.decide(leases, _workers("a", "b"), 0, DeciderState(), DeciderConfig())
    assert len(decision.moves) == 2 and all(m.graceful and m.to_worker == "b" for m in decision.moves)


def test_expired_leases_move_directly_and_leases_of_inactive_workers_stay() -> None:
    leases = _leases("dead", "dead", "gone", expired=frozenset({0, 1}))
    decision = DECIDER.decide(leases, _workers("a"), 0, DeciderState(), DeciderConfig())
    assert {(m.lease_key, m.graceful) for m in decision.moves} == {("s-0", False), ("s-1", False)}


def test_pending_hand_off_is_not_moved_and_counts_for_its_checkpoint_owner() -> None:
    leases = [LeaseView("s-0", "b", 1, checkpoint_owner="a"), *_leases("a", "a")[1:]]
    decision = DECIDER.decide(leases, _workers("a", "b"), 0, DeciderState(), DeciderConfig())
    assert all(m.lease_key != "s-0" for m in decision.moves)


def test_finished_leases_are_never_assigned_and_no_workers_means_no_moves() -> None:
    leases = [LeaseView("s-0", None, 1, finished=True)]
    assert DECIDER.decide(leases, _workers("a"), 0, DeciderState(), DeciderConfig()).moves == ()
    assert DECIDER.decide(_leases(None), [], 0, DeciderState(), DeciderConfig()).moves == ()
    leaving = [WorkerView("a", state=WorkerState.LEAVING)]
    assert DECIDER.decide(_leases(None), leaving, 0, DeciderState(), DeciderConfig()).moves == ()


@given(
    owners=st.lists(st.sampled_from([None, "a", "b", "c", "x"]), max_size=30),
    workers=st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4, unique=True),
    cap=st.integers(1, 40),
    expired=st.sets(st.integers(0, 29)),
)
def test_properties(owners: list[str | None], workers: list[str], cap: int, expired: set[int]) -> None:
    leases = _leases(*owners, expired=frozenset(expired))
    config = DeciderConfig(max_leases_for_worker=cap)
    decision = DECIDER.decide(leases, _workers(*workers), 0, DeciderState(), config)
    keys = [m.lease_key for m in decision.moves]
    assert len(keys) == len(set(keys)), "no lease moved twice"
    by_key = {lease.lease_key: lease for lease in leases}
    for move in decision.moves:
        assert move.to_worker in workers
        assert move.lease_counter == by_key[move.lease_key].lease_counter
    after = _after(leases, _workers(*workers), config)
    moved_to = Counter(m.to_worker for m in decision.moves)
    for worker in workers:
        assert moved_to[worker] == 0 or after[worker] <= cap, "no worker pushed over maxLeasesForWorker"
    orphans = [lease for lease in leases if lease.owner is None or lease.expired]
    placed = {m.lease_key for m in decision.moves}
    capacity = sum(max(cap - after[w], 0) for w in workers)
    if capacity > 0:
        assert all(lease.lease_key in placed for lease in orphans), "unassigned placed when capacity exists"
    counts = [after[w] for w in workers]
    if all(lease.owner in (*workers, None) for lease in leases) and len(leases) <= cap * len(workers):
        assert max(counts) - min(counts) <= 1, "balanced to within one lease"
