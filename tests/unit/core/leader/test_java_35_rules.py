"""Java 3.5.x's assignment rules brought up to date (contract §5.2): KCL #1814's fixed-width variance
threshold (opt-in) and KCL #1837's rule that a worker below the count target may take from one at it."""

from __future__ import annotations

from kcl_daemon.core.leader.decider import DeciderConfig, DeciderState, LeaseView, WorkerView
from kcl_daemon.core.leader.lease_count import LeaseCountDecider
from kcl_daemon.core.leader.variance import VarianceDecider

RELATIVE = VarianceDecider()
FIXED = VarianceDecider(fixed_width_threshold=True)


def _leases(owners: list[str], tp: list[float]) -> list[LeaseView]:
    return [
        LeaseView(f"s-{i}", o, 1, throughput_kbps=t) for i, (o, t) in enumerate(zip(owners, tp, strict=True))
    ]


def _moves(decider: VarianceDecider, cpu: dict[str, float], owners: list[str], tp: list[float]) -> int:
    workers = [WorkerView(w, cpu_percent=c) for w, c in cpu.items()]
    return len(decider.decide(_leases(owners, tp), workers, 0.0, DeciderState(), DeciderConfig()).moves)


def test_low_cpu_jitter_moves_leases_with_javas_relative_band_but_not_with_the_fixed_band() -> None:
    # 3 % vs 2 % CPU: 20 % apart relative to the average, but only one point: jitter
    cpu = {"a": 3.0, "b": 2.0}
    owners, tp = ["a"] * 10 + ["b"] * 2, [1.0] * 12
    assert _moves(RELATIVE, cpu, owners, tp) > 0
    assert _moves(FIXED, cpu, owners, tp) == 0


def test_the_fixed_band_still_balances_a_real_imbalance() -> None:
    cpu = {"a": 80.0, "b": 20.0}
    owners, tp = ["a"] * 6 + ["b"] * 2, [50.0] * 8
    assert _moves(FIXED, cpu, owners, tp) > 0


def test_zero_throughput_leases_are_never_picked_to_move_with_1814() -> None:
    cpu = {"a": 90.0, "b": 10.0}
    owners, tp = ["a"] * 4 + ["b"], [0.0, 0.0, 0.0, 0.0, 0.0]
    assert _moves(RELATIVE, cpu, owners, tp) == 1  # Java today: one lease from a donor with no throughput
    assert _moves(FIXED, cpu, owners, tp) == 0


def test_a_worker_below_target_takes_from_a_worker_at_target_1837() -> None:
    # 4 leases, 3 workers: target ceil(4/3) = 2. Java 3.5.1 leaves c with nothing (nobody is above target).
    leases = [LeaseView(f"s-{i}", "a" if i < 2 else "b", 1) for i in range(4)]
    workers = [WorkerView(w) for w in ("a", "b", "c")]
    moves = LeaseCountDecider().decide(leases, workers, 0.0, DeciderState(), DeciderConfig()).moves
    assert [m.to_worker for m in moves] == ["c"]
    # ... but never one lease back and forth between workers one apart: 2/1/1 is balanced
    after = [LeaseView(f"s-{i}", o, 1) for i, o in enumerate(["a", "a", "b", "c"])]
    assert not LeaseCountDecider().decide(after, workers, 0.0, DeciderState(), DeciderConfig()).moves
