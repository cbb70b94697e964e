"""The followers' fallback taker (issue 28 point 6): an expired lease no leader reassigns is taken by a
kcl-daemon follower past failover + grace, fenced on its counter; never a live lease, never a frozen
worker's, at most a fair share each."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcl_daemon.core.leader.decider import WorkerState, WorkerView
from kcl_daemon.core.leader.fallback import (
    FallbackConfig,
    Watch,
    candidates,
    next_due,
    plan_fallback,
    takers,
    watch_interval_s,
)
from kcl_daemon.core.leases.expiry import LeaseObservations
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import SHARD_END, TRIM_HORIZON
from tests.support.hypothesis_profiles import examples

L = 10.0
CONFIG = FallbackConfig.derive(L, 2 * L)  # the defaults: grace 2 s, adopt 13.3 s


def lease(key: str, counter: int, owner: str | None = None, **kw: object) -> Lease:
    return Lease(key, kw.pop("checkpoint", TRIM_HORIZON), lease_owner=owner, lease_counter=counter, **kw)  # type: ignore[arg-type]


def watched(
    scans: Sequence[tuple[float, Sequence[Lease]]], *, renewed_before: bool = True
) -> tuple[LeaseObservations, Watch]:
    """The follower's observations after ``scans``; ``renewed_before``: it first looked 5 s before the
    first scan and saw every lease renewed since (as a follower that has watched for a while has: a lease
    never seen renewed waits as long as a lease just assigned, see the adoption cases)."""
    obs, watch = LeaseObservations(), Watch()
    if renewed_before and scans:
        first_at, first = scans[0]
        earlier = [
            dataclasses.replace(x, lease_counter=x.lease_counter - 1)
            for x in first
            if x.lease_owner is not None and x.lease_counter > 0
        ]
        obs, watch = obs.observe(earlier, first_at - 5.0), watch.see(earlier, first_at - 5.0)
    for now, leases in scans:
        obs, watch = obs.observe(leases, now), watch.see(leases, now)
    return obs, watch


def found(
    scans: Sequence[tuple[float, Sequence[Lease]]], now: float, *, me: str = "py-a", suspect: bool = False
) -> list[str]:
    obs, watch = watched(scans)
    last = scans[-1][1]
    return [c.lease.lease_key for c in candidates(last, obs, watch, me, now, CONFIG, leader_suspect=suspect)]


def test_the_settings_derive_the_grace_and_the_watch() -> None:
    assert CONFIG.grace_s == 2.0  # two expiry intervals of min(1 s, failover / 10)
    # Java's discovery (half the interval - 25 ms) + a renewal period (L/3 - 25 ms), contract §4.3
    assert CONFIG.adopt_s == pytest.approx(10 - 0.025 + L / 3 - 0.025)
    assert watch_interval_s(L) == 5.0
    assert FallbackConfig.derive(1.0, 2.0).grace_s == pytest.approx(0.2)
    assert FallbackConfig.derive(10.0, 20.0, expiry_interval_s=0.5).grace_s == 1.0


DEAD = lease("s-1", 7, "java-leader")


@pytest.mark.parametrize(
    ("scans", "now", "suspect", "expected", "why"),
    [
        ([(0.0, [DEAD])], 12.0, False, [], "failover + grace not passed (seen at 0: due at 12)"),
        ([(0.0, [DEAD])], 12.1, False, ["s-1"], "stood still past failover + grace"),
        ([(0.0, [DEAD]), (5.0, [lease("s-1", 8, "java-leader")])], 12.1, False, [], "renewed at 5"),
        ([(0.0, [lease("s-1", 3, "py-a")])], 60.0, False, [], "this worker's own: discovery adopts it"),
        ([(0.0, [lease("s-1", 3, "w", checkpoint=SHARD_END)])], 60.0, False, [], "finished"),
        ([(0.0, [lease("s-1", 0)])], 60.0, False, [], "unowned: a live leader places it"),
        ([(0.0, [lease("s-1", 0)])], 12.1, True, ["s-1"], "unowned, leader suspected: from first sighting"),
        ([(0.0, [lease("s-1", 0)])], 11.9, True, [], "unowned: timed from the first sighting, not 'never'"),
        (
            [(0.0, [DEAD]), (5.0, [lease("s-1", 8, "java-2")])],
            5 + L + CONFIG.adopt_s - 0.1,
            False,
            [],
            "just assigned to java-2, which has not renewed it: Java discovers it late",
        ),
        (
            [(0.0, [DEAD]), (5.0, [lease("s-1", 8, "java-2")])],
            5 + L + CONFIG.adopt_s + 0.1,
            False,
            ["s-1"],
            "assigned and never renewed past adoption time: its new owner is dead",
        ),
        (
            [(0.0, [DEAD]), (5.0, [lease("s-1", 7, "py-a", checkpoint_owner="java-leader")])],
            L + CONFIG.grace_s + 0.1,
            False,
            ["s-1"],
            "a hand-off to this worker whose serving worker died: discovery never adopts it, a take does",
        ),
        (
            [(0.0, [DEAD]), (5.0, [lease("s-1", 7, "py-a", checkpoint_owner="java-leader")])],
            L + CONFIG.grace_s - 0.1,
            False,
            [],
            "the same, within failover + grace",
        ),
        (
            [(0.0, [DEAD]), (5.0, [lease("s-1", 8, "py-a", checkpoint_owner="java-leader")])],
            5 + L + CONFIG.grace_s - 0.1,
            False,
            [],
            "a hand-off whose serving worker renews",
        ),
        (
            [(0.0, [DEAD]), (5.0, [lease("s-1", 8, "java-2")]), (9.0, [lease("s-1", 9, "java-2")])],
            9 + L + CONFIG.grace_s + 0.1,
            False,
            ["s-1"],
            "adopted (renewed) and then dead: the plain grace again",
        ),
    ],
)
def test_candidates(
    scans: list[tuple[float, list[Lease]]], now: float, suspect: bool, expected: list[str], why: str
) -> None:
    assert found(scans, now, suspect=suspect) == expected, why


@pytest.mark.parametrize(
    ("now", "expected", "why"),
    [
        (L + CONFIG.grace_s + 0.1, [], "never seen renewed: perhaps just assigned before this worker looked"),
        (L + CONFIG.adopt_s - 0.1, [], "the same, within the adoption time"),
        (L + CONFIG.adopt_s + 0.1, ["s-1"], "never renewed past the adoption time: its owner is dead"),
    ],
)
def test_a_lease_never_seen_renewed_waits_as_long_as_one_just_assigned(
    now: float, expected: list[str], why: str
) -> None:
    """A Java leader that has just given itself every lease of a new application renews them only once
    its worker discovers them (up to a discovery period later): a follower that starts meanwhile sees
    them stand still from its first look, and must not take them at failover + grace."""
    obs, watch = watched([(0.0, [DEAD])], renewed_before=False)
    got = [
        c.lease.lease_key for c in candidates([DEAD], obs, watch, "py-a", now, CONFIG, leader_suspect=False)
    ]
    assert got == expected, why


def test_a_frozen_workers_leases_wait_for_it() -> None:
    leases = [lease("s-1", 1, "py-b"), lease("s-2", 1, "java"), lease("s-3", 1, "x", checkpoint_owner="py-b")]
    obs, watch = watched([(0.0, leases)])
    found_ = candidates(leases, obs, watch, "py-a", 30.0, CONFIG, leader_suspect=False)
    restarting = WorkerView("py-b", state=WorkerState.RESTARTING, grace_until=100.0)
    plan = plan_fallback(found_, "py-a", 0, [restarting], {"py-b"}, 30.0, CONFIG)
    assert [c.lease.lease_key for c in plan.takes] == ["s-2"]
    over = plan_fallback(found_, "py-a", 0, [restarting], {"py-b"}, 101.0, CONFIG)  # its grace ended
    assert sorted(c.lease.lease_key for c in over.takes) == ["s-1", "s-2", "s-3"]


@pytest.mark.parametrize(
    ("published", "now", "taken", "why"),
    [
        (3.0, 12.1, [], "published after its lease stood still (at 0): back from a restart, adopting"),
        (3.0, 60.0, [], "alive: left to it and its leader"),
        (-1.0, 12.1, ["s-1"], "its last metrics came before the lease stood still: dead (SIGKILLed)"),
    ],
)
def test_a_kcl_daemon_worker_back_from_a_restart_keeps_what_it_has_not_renewed_yet(
    published: float, now: float, taken: list[str], why: str
) -> None:
    leases = [lease("s-1", 4, "py-b")]
    obs, watch = watched([(0.0, leases)])
    found_ = candidates(leases, obs, watch, "py-a", now, CONFIG, leader_suspect=False)
    back = WorkerView("py-b", last_update=1000.0 + published)  # epoch = monotonic + 1000
    plan = plan_fallback(found_, "py-a", 0, [back], {"py-b"}, now, CONFIG, wall_offset=1000.0)
    assert [c.lease.lease_key for c in plan.takes] == taken, why
    java = WorkerView("py-b", last_update=1000.0 + published)
    assert len(plan_fallback(found_, "py-a", 0, [java], set(), now, CONFIG, wall_offset=1000.0).takes) == 1


def test_a_hand_off_to_this_worker_from_a_dead_owner_is_taken_though_this_worker_publishes() -> None:
    """A Java leader SIGKILLed in the middle of a graceful hand-off to py-a: the lease names py-a as owner
    and the dead leader as checkpoint owner; py-a publishes its metrics all the time, which says nothing
    of the worker that was serving the lease (seen in the Java 3.5.1 dead-leader test: left for 120 s)."""
    handing = lease("s-1", 7, "py-a", checkpoint_owner="java-leader")
    obs, watch = watched([(0.0, [handing])])
    now = L + CONFIG.grace_s + 0.1
    found_ = candidates([handing], obs, watch, "py-a", now, CONFIG, leader_suspect=False)
    me = WorkerView("py-a", last_update=1000.0 + now - 0.5)  # published just now
    plan = plan_fallback(found_, "py-a", 0, [me], {"py-a"}, now, CONFIG, wall_offset=1000.0)
    assert [c.lease.lease_key for c in plan.takes] == ["s-1"]
    from_live = lease("s-2", 7, "py-a", checkpoint_owner="py-b")  # a live kcl-daemon worker hands it over
    obs, watch = watched([(0.0, [from_live])])
    found_ = candidates([from_live], obs, watch, "py-a", now, CONFIG, leader_suspect=False)
    views = [me, WorkerView("py-b", last_update=1000.0 + now - 0.5)]
    assert (
        plan_fallback(found_, "py-a", 0, views, {"py-a", "py-b"}, now, CONFIG, wall_offset=1000.0).takes == ()
    )


def test_takers_are_the_live_kcl_daemon_workers() -> None:
    workers = [
        WorkerView("py-b"),
        WorkerView("py-c", state=WorkerState.LEAVING),
        WorkerView("py-d", state=WorkerState.RESTARTING, grace_until=50.0),
        WorkerView("py-e"),
        WorkerView("java-1"),
    ]
    ours = {"py-b", "py-c", "py-d", "py-e"}
    assert takers("py-a", workers, ours, dead={"py-e"}, now=10.0) == ["py-a", "py-b"]


def test_the_share_is_capped_by_max_leases_for_worker() -> None:
    leases = [lease(f"s-{n}", 1, "java") for n in range(6)]
    obs, watch = watched([(0.0, leases)])
    found_ = candidates(leases, obs, watch, "py-a", 30.0, CONFIG, leader_suspect=False)
    capped = FallbackConfig(L, 2.0, 13.0, max_leases_for_worker=4)
    assert len(plan_fallback(found_, "py-a", 3, [], set(), 30.0, capped).takes) == 1
    assert plan_fallback(found_, "py-a", 4, [], set(), 30.0, capped).takes == ()


def test_next_due_wakes_the_follower_when_a_still_lease_comes_due() -> None:
    scans = [(0.0, [DEAD, lease("s-2", 1, "java")]), (5.0, [DEAD, lease("s-2", 2, "java")])]
    obs, watch = watched(scans)
    due = next_due(scans[-1][1], obs, watch, "py-a", 5.0, CONFIG, leader_suspect=False)
    assert due == pytest.approx(12.05)  # s-1, still since 0; s-2 changed at this scan: left to the watch


# -- properties -------------------------------------------------------------------------------------

KEYS = [f"shardId-{n:03d}" for n in range(12)]
OWNERS = ["java-leader", "java-2", "py-b", "py-c", None]


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[tuple[float, list[Lease]]], float]:
    """Scans of a few leases at increasing times, each lease renewed (or moved) at random."""
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=8, unique=True))
    state = {k: (draw(st.integers(0, 5)), draw(st.sampled_from(OWNERS))) for k in keys}
    now, scans = 0.0, []
    for _ in range(draw(st.integers(1, 6))):
        now += draw(st.floats(0.5, 8.0))
        for key in keys:
            if draw(st.booleans()):
                counter, owner = state[key]
                moved = draw(st.sampled_from([owner, owner, *OWNERS]))
                state[key] = (counter + 1, moved)
        scans.append((now, [lease(k, c, o) for k, (c, o) in state.items()]))
    return scans, now + draw(st.floats(0.0, 30.0))


@settings(max_examples=examples(200), deadline=None)
@given(histories(), st.booleans())
def test_never_a_lease_that_changed_within_failover_and_grace(
    history: tuple[list[tuple[float, list[Lease]]], float], suspect: bool
) -> None:
    scans, now = history
    obs, watch = watched(scans)
    for c in candidates(scans[-1][1], obs, watch, "py-a", now, CONFIG, leader_suspect=suspect):
        observed = obs.get(c.lease.lease_key)
        assert observed is not None
        assert now - observed.changed_at > L + CONFIG.grace_s  # expired by our clock, past the grace
        assert c.lease.lease_owner != "py-a" or c.lease.checkpoint_owner is not None
        assert not c.lease.is_shard_end
        assert suspect or c.lease.lease_owner is not None
        assert c.lease.lease_counter == observed.lease_counter  # the take is fenced on what stood still


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.sampled_from(KEYS), min_size=0, max_size=12, unique=True),
    st.lists(st.sampled_from(["py-a", "py-b", "py-c", "py-d", "py-e"]), min_size=1, max_size=5, unique=True),
)
def test_takers_that_saw_the_same_scan_split_the_candidates_without_a_race(
    keys: list[str], fleet: list[str]
) -> None:
    leases = [lease(k, 1, "java-leader") for k in keys]
    obs, watch = watched([(0.0, leases)])
    views = [WorkerView(w) for w in fleet]
    share = math.ceil(len(keys) / len(fleet)) if keys else 0
    taken: list[str] = []
    for me in fleet:
        found_ = candidates(leases, obs, watch, me, 12.5, CONFIG, leader_suspect=False)
        plan = plan_fallback(found_, me, 0, views, set(fleet), 12.5, CONFIG)
        assert len(plan.takes) <= share
        taken += [c.lease.lease_key for c in plan.takes]
    assert sorted(taken) == sorted(keys)  # every candidate once: no two followers write the same lease


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(st.sampled_from(KEYS), min_size=1, max_size=12, unique=True),
    st.lists(st.sampled_from(["py-b", "py-c", "py-d"]), min_size=1, max_size=3, unique=True),
)
def test_what_fell_to_a_silent_taker_is_taken_once_it_is_open(keys: list[str], silent: list[str]) -> None:
    """Takers whose metrics look live but who never take: their part is open one watch + grace later."""
    leases = [lease(k, 1, "java-leader") for k in keys]
    obs, watch = watched([(0.0, leases)])
    fleet = ["py-a", *silent]
    views = [WorkerView(w) for w in fleet]
    due = L + CONFIG.grace_s
    left = set(keys)
    now = due + 0.5
    for _ in range(len(keys) + 10):
        if not left:
            break
        current = [x for x in leases if x.lease_key in left]
        found_ = candidates(current, obs, watch, "py-a", now, CONFIG, leader_suspect=False)
        plan = plan_fallback(found_, "py-a", len(keys) - len(left), views, set(fleet), now, CONFIG)
        if now <= due + CONFIG.open_after:
            assert len(plan.takes) <= math.ceil(len(left) / len(fleet))
        left -= {c.lease.lease_key for c in plan.takes}
        now += CONFIG.grace_s
    assert not left
    assert now <= due + CONFIG.open_after + (len(keys) + 1) * CONFIG.grace_s


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(["py-b", "py-c", "java-1"])), max_size=10),
    st.sets(st.sampled_from(["py-b", "py-c", "java-1"])),
    st.floats(12.1, 200.0),
)
def test_a_restarting_workers_leases_wait_for_it_until_its_grace_ends(
    owned: list[tuple[str, str]], restarting: set[str], now: float
) -> None:
    leases = list({k: lease(k, 1, o) for k, o in owned}.values())
    obs, watch = watched([(0.0, leases)])
    found_ = candidates(leases, obs, watch, "py-a", now, CONFIG, leader_suspect=False)
    views = [WorkerView(w, state=WorkerState.RESTARTING, grace_until=100.0) for w in sorted(restarting)]
    plan = plan_fallback(found_, "py-a", 0, views, {"py-b", "py-c"}, now, CONFIG)
    for c in plan.takes:
        assert c.lease.lease_owner not in restarting or now >= 100.0
    if now >= 100.0 or not restarting:
        assert len(plan.takes) == len(leases)  # the only live taker: everything, once the grace is over
