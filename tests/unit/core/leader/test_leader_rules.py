"""Client-version resolution (contract §5.6), leader-lock rules (§3.6) and worker-metric items (§3.9)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.leader import client_version as cv
from kcl_daemon.core.leader import leader_lock as ll
from kcl_daemon.core.leader import worker_metrics as wm

C = cv.ClientVersionConfig
V = cv.ClientVersion


@pytest.mark.parametrize(
    ("config", "stored", "runs", "writes", "algorithm"),
    [
        (C.COMPATIBLE_WITH_2X_PHASE1, None, V.INIT, None, cv.Algorithm.TAKER),
        (C.COMPATIBLE_WITH_2X, None, V.UPGRADE_FROM_2X, V.UPGRADE_FROM_2X, cv.Algorithm.TAKER),
        (C.V3X, None, V.V3X, V.V3X, cv.Algorithm.LEADER),
        (C.COMPATIBLE_WITH_2X_PHASE1, V.V3X_WITH_ROLLBACK, V.V3X_WITH_ROLLBACK, None, cv.Algorithm.LEADER),
        (C.COMPATIBLE_WITH_2X, V.V3X_WITH_ROLLBACK, V.V3X_WITH_ROLLBACK, None, cv.Algorithm.LEADER),
        (C.V3X, V.V3X_WITH_ROLLBACK, V.V3X, V.V3X, cv.Algorithm.LEADER),
        (C.V3X, V.V2X, V.V2X, None, cv.Algorithm.TAKER),
        (C.V3X, V.UPGRADE_FROM_2X, V.UPGRADE_FROM_2X, None, cv.Algorithm.TAKER),
        (C.COMPATIBLE_WITH_2X, V.V3X, V.V3X, None, cv.Algorithm.LEADER),
    ],
)
def test_client_version_table(
    config: cv.ClientVersionConfig,
    stored: cv.ClientVersion | None,
    runs: cv.ClientVersion,
    writes: cv.ClientVersion | None,
    algorithm: cv.Algorithm,
) -> None:
    resolution = cv.resolve(config, stored)
    assert (resolution.version, resolution.write, resolution.algorithm) == (runs, writes, algorithm)
    if writes is not None:
        assert resolution.expected == stored  # the write is conditional on what was read


def test_unknown_stored_version_is_named() -> None:
    with pytest.raises(ValueError, match="CLIENT_VERSION_9X"):
        cv.parse_client_version("CLIENT_VERSION_9X")
    assert cv.parse_client_version(None) is None
    assert not cv.publishes_worker_metrics(V.INIT)
    assert cv.publishes_worker_metrics(V.UPGRADE_FROM_2X)


def _lock(owner: str = "java-1", rvn: str = "r1", ms: str = "120000", released: bool = False) -> ll.LockItem:
    item: dict[str, object] = {"ownerName": owner, "recordVersionNumber": rvn, "leaseDuration": ms}
    if released:
        item["isReleased"] = "1"
    parsed = ll.parse_lock(item)
    assert parsed is not None
    return parsed


def test_lock_item_format_and_errors() -> None:
    assert ll.lock_attributes("w", "r", 10.0) == {
        "ownerName": "w",
        "leaseDuration": "10000",
        "recordVersionNumber": "r",
    }
    assert _lock().duration_s == 120.0
    assert _lock().problem is None
    # a malformed lock is still a lock (it must never stall the fleet): Java's 120 s, the problem named
    bad = ll.parse_lock({"ownerName": "a", "recordVersionNumber": "r", "leaseDuration": "soon"})
    assert bad is not None and bad.duration_s == 120.0
    assert bad.problem is not None and "leaseDuration" in bad.problem
    ownerless = ll.parse_lock({"recordVersionNumber": "r", "leaseDuration": "1"})
    assert ownerless is not None and ownerless.owner is None
    assert ownerless.problem is not None and "ownerName" in ownerless.problem


def test_lock_plans() -> None:
    seen = ll.observe(None, _lock(), 100.0)
    assert ll.plan(None, ll.Observation(None, 0), "me", None, 0).action is ll.Action.ACQUIRE_ABSENT
    assert ll.plan(_lock(released=True), seen, "me", None, 100).action is ll.Action.ACQUIRE_RELEASED
    assert ll.plan(_lock(), seen, "me", None, 219.0).action is ll.Action.WAIT
    steal = ll.plan(_lock(), seen, "me", None, 220.5)
    assert (steal.action, steal.expected_version) == (ll.Action.STEAL, "r1")
    # a heartbeat (new record version) restarts the observation
    seen2 = ll.observe(seen, _lock(rvn="r2"), 200.0)
    assert ll.plan(_lock(rvn="r2"), seen2, "me", None, 220.5).action is ll.Action.WAIT
    held = ll.Held("r9", 100.0, 10.0)
    assert ll.plan(_lock(owner="me", rvn="r9"), seen, "me", held, 101).action is ll.Action.HEARTBEAT


@pytest.mark.parametrize(
    ("lock", "seen_at", "now", "suspect"),
    [
        (_lock(), None, 100.0, False),  # never read
        (None, 100.0, 100.0, True),  # no leader at all
        (_lock(released=True), 100.0, 100.0, True),
        (_lock(), 100.0, 130.0, False),  # Java's 120 s lock heartbeated every 30 s: one period is normal
        (_lock(), 100.0, 145.5, True),  # past 3/8 of the duration: a heartbeat missed
    ],
)
def test_a_follower_suspects_the_leader_after_a_missed_heartbeat(
    lock: ll.LockItem | None, seen_at: float | None, now: float, suspect: bool
) -> None:
    seen = None if seen_at is None else ll.observe(None, lock, seen_at)
    assert ll.leader_suspect(lock, seen, now) is suspect


@pytest.mark.parametrize(
    ("lock", "landed"),
    [
        (_lock(owner="me", rvn="r2"), "r2"),  # the unconfirmed heartbeat applied: still ours
        (_lock(owner="me", rvn="r9"), None),  # a version we never wrote
        (_lock(owner="other", rvn="r2"), None),  # taken over
        (_lock(owner="me", rvn="r2", released=True), None),
        (None, None),
    ],
)
def test_a_heartbeat_answered_with_an_error_may_have_landed(
    lock: ll.LockItem | None, landed: str | None
) -> None:
    unconfirmed = [ll.Held("r2", 5.0, 10.0), ll.Held("r3", 7.5, 10.0)]
    found = ll.heartbeat_landed(lock, "me", unconfirmed)
    assert (None if found is None else found.record_version) == landed


@given(st.floats(0.5, 300), st.floats(0, 400))
def test_holder_steps_down_before_anyone_may_steal(duration: float, elapsed: float) -> None:
    held = ll.Held("r", 0.0, duration)
    # an observer that saw our record version no earlier than we sent it steals after > duration
    if ll.still_leader(held, elapsed):
        assert elapsed < duration


def test_worker_metrics_item_round_trip_and_rules() -> None:
    stats = wm.WorkerMetricStats("w1", 1000.0, {"C": (10.0, 30.0)}, {"C": (100.0,)})
    back = wm.from_item({"wid": "w1", **wm.to_item(stats)})
    assert back == stats
    assert back.value("C") == pytest.approx(20.0)
    assert wm.assignable(back, 1050.0, 30.0)
    assert not wm.assignable(back, 1061.0, 30.0)  # dead: lut older than 2 x reporter period
    failed = wm.WorkerMetricStats("w1", 1000.0, {"C": (10.0, -1.0)}, {"C": (100.0,)})
    assert not wm.assignable(failed, 1001.0, 30.0)
    no_range = wm.WorkerMetricStats("w1", 1000.0, {"C": (10.0,)}, {"C": (0.0,)})
    assert not no_range.is_valid()
    default = wm.WorkerMetricStats("w1", 1000.0)
    assert default.is_default_metric and default.is_valid()
    assert not wm.WorkerMetricStats("w1", None).is_valid()
    with pytest.raises(wm.WorkerMetricsItemError, match="sts"):
        wm.from_item({"wid": "w1", "lut": 1, "sts": {"C": ["x"]}})


def test_ema_and_history() -> None:
    assert wm.ema([]) is None
    assert wm.ema([-1.0, 40.0, -1.0, 20.0]) == pytest.approx(30.0)
    assert wm.append_sample((1.0, 2.0), 3.1234567, 2) == (2.0, 3.123457)
