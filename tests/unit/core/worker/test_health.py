"""The liveness and readiness verdicts (kcl_daemon.core.worker.health): each red condition, and its reason."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.worker.health import (
    LivenessFacts,
    LoopFacts,
    Phase,
    ReadinessFacts,
    ShardFacts,
    liveness,
    readiness,
)


def live(**changes: object) -> LivenessFacts:
    base = {
        "event_loop_lag_s": 0.0,
        "event_loop_limit_s": 3.0,
        "loops": (LoopFacts("lease-renewer", True, None, 10.0), LoopFacts("shard-sync", True, 2.0, 600.0)),
    }
    return LivenessFacts(**{**base, **changes})  # type: ignore[arg-type]


def failing(report: object) -> dict[str, str]:
    return {c.name: c.detail for c in report.failing()}  # type: ignore[attr-defined]


def test_a_healthy_worker_is_live_and_says_why() -> None:
    report = liveness(live())
    assert report.ok
    body = report.as_json()
    assert body["status"] == "ok"
    assert [c["name"] for c in body["checks"]] == [  # type: ignore[union-attr]
        "event-loop",
        "loop lease-renewer",
        "loop shard-sync",
        "renewer",
    ]


def test_a_blocked_event_loop_is_red() -> None:
    report = liveness(live(event_loop_lag_s=7.5))
    assert failing(report) == {"event-loop": failing(report)["event-loop"]}
    assert "waited 7.5s" in failing(report)["event-loop"]


@pytest.mark.parametrize(
    ("loop", "why"),
    [
        (LoopFacts("lease-taker", False, None, 600.0), "ended"),
        (LoopFacts("lease-taker", True, 601.0, 600.0), "wedged"),
    ],
)
def test_a_dead_or_wedged_loop_is_red(loop: LoopFacts, why: str) -> None:
    report = liveness(live(loops=(loop,)))
    assert why in failing(report)["loop lease-taker"]


def test_a_loop_asleep_for_long_is_fine() -> None:
    assert liveness(live(loops=(LoopFacts("lease-cleanup", True, None, 1.0),))).ok


def test_a_lease_held_past_its_expiry_means_a_stuck_renewer() -> None:
    report = liveness(live(overdue_leases=(("shardId-1", 4.0), ("shardId-2", 0.5)), renew_grace_s=3.0))
    assert not report.ok
    detail = failing(report)["renewer"]
    assert "shardId-1 (4.0s)" in detail and "shardId-2" not in detail and "stuck" in detail
    assert liveness(live(overdue_leases=(("shardId-2", 0.5),), renew_grace_s=3.0)).ok


def ready(**changes: object) -> ReadinessFacts:
    return ReadinessFacts(**{"phase": Phase.RUNNING, "table": "app", "held": 2, **changes})  # type: ignore[arg-type]


def test_a_running_worker_holding_leases_is_ready() -> None:
    report = readiness(ready(shards=(ShardFacts("shardId-1", False, 900.0),)))
    assert report.ok
    assert [c.name for c in report.checks] == ["started", "lease-table", "leases", "shards"]


@pytest.mark.parametrize("phase", [Phase.STARTING, Phase.STOPPING])
def test_not_ready_while_starting_or_stopping(phase: Phase) -> None:
    report = readiness(ready(phase=phase))
    assert not report.ok and phase.value in failing(report)["started"]


def test_a_table_failing_longer_than_the_grace_is_red() -> None:
    short = readiness(ready(table_failing_for_s=1.0, table_grace_s=3.0, table_error="no answer"))
    assert short.ok
    long = readiness(ready(table_failing_for_s=5.0, table_grace_s=3.0, table_error="no answer"))
    assert "app has failed every call for 5.0s: no answer" in failing(long)["lease-table"]


def test_leader_mode_without_leases_needs_current_worker_metrics() -> None:
    assert readiness(ready(held=0)).ok  # 2.x: the taker takes them
    assert readiness(ready(held=0, leader_mode=True, metrics_age_s=10.0, metrics_limit_s=70.0)).ok
    stale = readiness(ready(held=0, leader_mode=True, metrics_age_s=100.0, metrics_limit_s=70.0))
    assert "the leader assigns it nothing" in failing(stale)["leases"]
    never = readiness(ready(held=0, leader_mode=True, metrics_age_s=None))
    assert "never written" in failing(never)["leases"]


def test_a_shard_behind_and_idle_past_the_limit_is_stalled() -> None:
    shards = (
        ShardFacts("shardId-1", True, 31.0),  # stalled
        ShardFacts("shardId-2", False, 9999.0),  # at the tip: idle is fine
        ShardFacts("shardId-3", True, 5.0),  # behind, but working
        ShardFacts("shardId-4", True, 0.0, parked="failed 5 times"),
    )
    report = readiness(ready(shards=shards, stall_limit_s=30.0))
    detail = failing(report)["shards"]
    assert detail.startswith("2 shard(s) stalled")
    assert "shardId-1 behind" in detail and "shardId-4 parked (failed 5 times)" in detail
    assert "shardId-2" not in detail and "shardId-3" not in detail
    assert readiness(ready(shards=shards[:3], stall_limit_s=0)).ok  # the check is off


@given(
    lag=st.floats(0, 100),
    limit=st.floats(0.1, 50),
    busy=st.one_of(st.none(), st.floats(0, 1000)),
    budget=st.floats(1, 900),
    running=st.booleans(),
)
def test_liveness_is_red_exactly_when_one_check_fails(
    lag: float, limit: float, busy: float | None, budget: float, running: bool
) -> None:
    report = liveness(
        live(event_loop_lag_s=lag, event_loop_limit_s=limit, loops=(LoopFacts("x", running, busy, budget),))
    )
    wedged = not running or (busy is not None and busy > budget)
    assert report.ok == (lag <= limit and not wedged)
    assert report.as_json()["status"] == ("ok" if report.ok else "fail")
