"""Per-worker renewal: the heartbeat item's codec, expiry through heartbeats, the mode decision."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.leases.expiry import LeaseObservations
from kcl_daemon.core.leases.heartbeat import (
    CorruptWorkerItem,
    HeartbeatObservations,
    ModeDecision,
    RenewalMode,
    WorkerItem,
    decide,
    foreign_signs,
    heartbeat_removal,
    heartbeat_withdrawal,
    heartbeat_write,
    is_expired,
    is_worker_item,
    merged,
    moved_on,
    settle,
    vouched,
    worker_item_from,
    workers_of,
)
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import TRIM_HORIZON

L = 10.0
PW = RenewalMode.PER_WORKER
PL = RenewalMode.PER_LEASE


def lease(key: str, counter: int, owner: str | None = None) -> Lease:
    return Lease(key, TRIM_HORIZON, lease_owner=owner, lease_counter=counter)


def beat(worker: str, n: int, mode: RenewalMode = PW) -> WorkerItem:
    return WorkerItem(worker, beat=n, mode=mode)


# -- codec ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (  # a heartbeat alone in the worker-metrics table: lut 0 is no report
            {"wid": {"S": "w1"}, "kdhb": {"N": "7"}, "kdrm": {"S": "PER_WORKER"}, "lut": {"N": "0"}},
            WorkerItem("w1", beat=7, mode=PW, kcl_daemon=True, metrics_seen=(("N", "0"),)),
        ),
        (  # a Java 3.1.3 worker's metrics report (no CPU outside EC2)
            {"wid": {"S": "j1"}, "lut": {"N": "1700"}, "sts": {"M": {}}, "opr": {"M": {}}},
            WorkerItem("j1", metrics=True, metrics_seen=(("N", "1700"),)),
        ),
        (  # the same in a single-table lease table (Java 3.5)
            {"leaseKey": {"S": "j1"}, "entityType": {"S": "WORKER_METRIC_STATS"}, "lut": {"N": "1700"},
             "sts": {"M": {}}, "opr": {"M": {}}},
            WorkerItem("j1", metrics=True, metrics_seen=(("N", "1700"),)),
        ),
        (  # kcl-daemon's report, with its mark, sharing the item with the heartbeat
            {"wid": {"S": "k1"}, "lut": {"N": "5"}, "kdx": {"M": {}}, "kdhb": {"N": "2"},
             "kdrm": {"S": "PER_WORKER"}},
            WorkerItem("k1", beat=2, mode=PW, metrics=True, kcl_daemon=True, metrics_seen=(("N", "5"),)),
        ),
        (  # an older Java worker took a worker item of the lease table for a lease
            {"leaseKey": {"S": "w1"}, "entityType": {"S": "WORKER_METRIC_STATS"}, "kdhb": {"N": "3"},
             "kdrm": {"S": "PER_WORKER"}, "leaseOwner": {"S": "java-1"}, "leaseCounter": {"N": "1"}},
            WorkerItem("w1", beat=3, mode=PW, kcl_daemon=True, leased_by="java-1", lease_shaped=True),
        ),
    ],
)  # fmt: skip
def test_worker_items_decode(item: dict[str, dict[str, object]], expected: WorkerItem) -> None:
    assert worker_item_from(item) == expected


@pytest.mark.parametrize(
    ("item", "problem"),
    [
        ({"wid": {"S": "w"}, "kdhb": {"N": "x"}}, "kdhb"),
        ({"wid": {"S": "w"}, "kdrm": {"S": "NO"}}, "kdrm"),
        ({"entityType": {"S": "WORKER_METRIC_STATS"}}, "wid or leaseKey"),
    ],
)
def test_corrupt_worker_items_name_the_attribute(item: dict[str, dict[str, object]], problem: str) -> None:
    with pytest.raises(CorruptWorkerItem, match=problem):
        worker_item_from(item)


def test_workers_of_leaves_corrupt_items_out_and_hands_each_to_on_corrupt() -> None:
    good = {"wid": {"S": "w1"}, "kdhb": {"N": "3"}}
    bad = {"wid": {"S": "w2"}, "kdhb": {"N": "x"}}
    problems: list[CorruptWorkerItem] = []
    assert [i.worker_id for i in workers_of(None, [good, bad], on_corrupt=problems.append)] == ["w1"]
    assert len(problems) == 1 and "kdhb" in str(problems[0])
    assert [i.worker_id for i in workers_of(None, [bad, good])] == ["w1"]


def test_leases_and_other_items_are_not_worker_items() -> None:
    assert is_worker_item({"leaseKey": {"S": "j"}, "entityType": {"S": "WORKER_METRIC_STATS"}})
    assert not is_worker_item({"leaseKey": {"S": "shardId-0"}, "leaseCounter": {"N": "1"}})
    assert not is_worker_item({"leaseKey": {"S": "Leader"}, "entityType": {"S": "LEADER"}})


def test_the_heartbeat_lives_in_the_worker_metrics_table_and_never_on_a_lease() -> None:
    write = heartbeat_write("w1", PW)
    assert write.key == {"wid": {"S": "w1"}}  # the 3.0-3.4 worker-metrics table: no Java 2.x reads it
    assert "ADD #beat :one" in write.update
    assert "#lut = if_not_exists(#lut, :none)" in write.update and write.values[":none"] == {"N": "0"}
    assert "attribute_not_exists(#owner)" in write.condition
    assert "attribute_not_exists(#counter)" in write.condition
    assert "entityType" not in write.names.values()
    assert write.values[":mode"] == {"S": "PER_WORKER"}


def test_a_withdrawal_deletes_only_an_item_that_holds_nothing_but_the_heartbeat() -> None:
    delete = heartbeat_withdrawal("w1")
    assert delete.key == {"wid": {"S": "w1"}}
    for name in ("#mark", "#owner", "#counter"):  # kcl-daemon's metrics report, lease attributes
        assert f"attribute_not_exists({name})" in delete.condition
    assert "#lut = :none" in delete.condition  # a real report's lut stays: only the heartbeat goes
    assert heartbeat_removal("w1").update == "REMOVE #beat, #mode"


def test_a_worker_with_items_in_both_places_counts_by_its_heartbeat_and_never_hides_a_sign() -> None:
    report = WorkerItem("w", metrics=True, kcl_daemon=True, metrics_seen=1)
    beating = WorkerItem("w", beat=3, mode=PW, kcl_daemon=True)
    leased = WorkerItem("w", leased_by="j", lease_shaped=True)
    assert merged([report, beating]) == merged([beating, report]) == [beating]
    assert merged([beating, leased]) == merged([leased, beating]) == [leased]


# -- expiry --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counter_scans", "beat_scans", "now", "expired"),
    [
        # (time, counter) of lease "a" owned by w1; (time, beat) of w1's heartbeat (PER_WORKER)
        ([(0, 1), (20, 1)], [(0, 1), (5, 2), (19, 3)], 28.0, False),  # heartbeat advancing
        ([(0, 1), (20, 1)], [(0, 1), (5, 2), (19, 2)], 15.1, True),  # both still since 5 s
        ([(0, 1), (20, 1)], [(0, 1), (5, 2), (20, 2)], 15.0, False),  # "older than", not "as old as"
        ([(0, 1), (9, 2), (20, 2)], [(0, 1), (20, 1)], 18.0, False),  # counter renewed per lease
        ([(0, 1), (9, 2), (20, 2)], [(0, 1), (20, 1)], 19.1, True),
        ([(0, 1), (20, 1)], [], 10.1, True),  # no heartbeat: the counter rule alone
        ([(0, 1), (20, 1)], [(0, 1), (30, 1)], 10.1, True),  # heartbeat first seen counts at that scan
    ],
)
def test_a_lease_expires_when_counter_and_heartbeat_both_stand_still(
    counter_scans: list[tuple[float, int]],
    beat_scans: list[tuple[float, int]],
    now: float,
    expired: bool,
) -> None:
    obs, beats = _replay(counter_scans, beat_scans)
    assert is_expired(lease("a", counter_scans[-1][1], "w1"), obs, beats, now, L) is expired


def _replay(
    counter_scans: list[tuple[float, int]], beat_scans: list[tuple[float, int]]
) -> tuple[LeaseObservations, HeartbeatObservations]:
    obs = LeaseObservations()
    for t, counter in counter_scans:
        obs = obs.observe([lease("a", counter, "w1")], float(t))
    beats = HeartbeatObservations()
    for t, n in beat_scans:
        beats = beats.observe([beat("w1", n)], float(t))
    return obs, beats


@pytest.mark.parametrize("after", ["gone", "per-lease"])
def test_a_heartbeat_that_vanishes_or_turns_per_lease_stands_still_from_its_last_beat(after: str) -> None:
    """A worker that falls back deletes its item: its leases stay safe until their counters move."""
    held = lease("a", 1, "w1")
    obs = LeaseObservations().observe([held], 0.0)
    beats = HeartbeatObservations().observe([beat("w1", 1)], 0.0).observe([beat("w1", 2)], 9.0)
    beats = beats.observe([] if after == "gone" else [beat("w1", 3, PL)], 12.0)
    assert not is_expired(held, obs, beats, 19.0, L)  # vouched by the beat seen at 9
    assert is_expired(held, obs, beats, 19.1, L)
    assert "w1" not in beats.items if after == "gone" else beats.items["w1"].mode is PL
    renewed = obs.observe([lease("a", 2, "w1")], 15.0)
    assert not is_expired(lease("a", 2, "w1"), renewed, beats, 24.0, L)
    signs = foreign_signs([held], beats, "me", 12.0, L)
    assert signs and "w1" in signs[0]


def test_a_heartbeat_in_per_lease_mode_vouches_for_nothing() -> None:
    obs = LeaseObservations().observe([lease("a", 1, "w1")], 0.0)
    beats = HeartbeatObservations().observe([beat("w1", 1, PL)], 0.0).observe([beat("w1", 2, PL)], 9.0)
    assert is_expired(lease("a", 1, "w1"), obs, beats, 10.1, L)


def test_vouched_keeps_unowned_leases_and_other_owners_as_they_are() -> None:
    leases = [lease("a", 1, "w1"), lease("b", 0), lease("c", 4, "w2")]
    obs = LeaseObservations().observe(leases, 0.0)
    beats = HeartbeatObservations().observe([beat("w1", 1)], 0.0).observe([beat("w1", 2)], 7.0)
    out = vouched(leases, obs, beats)
    assert out.get("a") is not None and out.get("a").changed_at == 7.0  # type: ignore[union-attr]
    assert out.get("b") == obs.get("b")
    assert out.get("c") == obs.get("c")


def test_a_pending_hand_off_is_vouched_for_by_the_worker_serving_it() -> None:
    """3.x: ``leaseOwner`` is the new worker, ``checkpointOwner`` the one still serving it; only the latter's
    heartbeat keeps it (as only its renewals would)."""
    marked = replace(lease("a", 3, "new"), checkpoint_owner="old")
    obs = LeaseObservations().observe([marked], 0.0)
    serving = HeartbeatObservations().observe([beat("old", 1), beat("new", 1)], 0.0)
    serving = serving.observe([beat("old", 2), beat("new", 1)], 7.0)
    assert vouched([marked], obs, serving).get("a").changed_at == 7.0  # type: ignore[union-attr]
    arriving = HeartbeatObservations().observe([beat("old", 1), beat("new", 1)], 0.0)
    arriving = arriving.observe([beat("old", 1), beat("new", 2)], 7.0)
    assert vouched([marked], obs, arriving).get("a") == obs.get("a")


@given(steps=st.lists(st.floats(min_value=0.01, max_value=L / 3, allow_nan=False), min_size=1, max_size=40))
def test_no_lease_expires_while_its_owners_heartbeat_advances(steps: list[float]) -> None:
    """Scans at any cadence up to failover/3; the lease never changes, the heartbeat always does."""
    held = lease("a", 5, "w1")
    obs = LeaseObservations()
    beats = HeartbeatObservations()
    now = 0.0
    for n, step in enumerate(steps):
        obs = obs.observe([held], now)
        beats = beats.observe([beat("w1", n)], now)
        assert not is_expired(held, obs, beats, now + step, L)
        now += step


@given(
    still=st.floats(min_value=L + 0.001, max_value=10 * L, allow_nan=False),
    before=st.integers(min_value=1, max_value=5),
)
def test_a_lease_expires_once_both_stood_still_past_failover(still: float, before: int) -> None:
    held = lease("a", 5, "w1")
    obs = LeaseObservations()
    beats = HeartbeatObservations()
    for n in range(before):
        obs = obs.observe([held], float(n))
        beats = beats.observe([beat("w1", n)], float(n))
    last = float(before - 1)
    assert is_expired(held, obs, beats, last + still, L)


# -- the mode ------------------------------------------------------------------------------------------


def _signs(leases: list[Lease], scans: list[list[WorkerItem]]) -> list[str]:
    """One scan a second; the signs judged a second after the last."""
    beats = HeartbeatObservations()
    for t, items in enumerate(scans):
        beats = beats.observe(items, float(t))
    return foreign_signs(leases, beats, "me", float(len(scans)), L)


@pytest.mark.parametrize(
    ("leases", "scans", "sign"),
    [
        ([lease("a", 1, "w1")], [[beat("w1", 1)], [beat("w1", 2)]], None),
        ([lease("a", 1, "me")], [[]], None),  # this worker's own leases, before its first heartbeat
        ([lease("a", 1, "w2")], [[beat("w1", 1)]], "lease owner w2 has no heartbeat item"),
        ([lease("a", 1, "w1")], [[beat("w1", 1, PL)]], "worker w1 renews per lease"),
        ([], [[beat("w1", 1, PL)]], None),  # fell back but holds nothing: renews nothing
        (  # a live Java 3.x worker's metrics
            [],
            [[WorkerItem("j", metrics=True, metrics_seen=1)],
             [WorkerItem("j", metrics=True, metrics_seen=2)]],
            "worker j publishes Java worker metrics",
        ),
        (  # a Java worker's metrics item appearing after the first scan: written lately
            [],
            [[], [WorkerItem("j", metrics=True, metrics_seen=1)]],
            "worker j publishes Java worker metrics",
        ),
        ([], [[WorkerItem("j", metrics=True, metrics_seen=1)]] * 3, None),  # stale, from a past run
        (  # a kcl-daemon report without heartbeat, its worker holding leases: the key is off there
            [lease("a", 1, "k")],
            [[WorkerItem("k", metrics=True, kcl_daemon=True, metrics_seen=1)],
             [WorkerItem("k", metrics=True, kcl_daemon=True, metrics_seen=2)]],
            "worker k writes no heartbeat",
        ),
        (  # ... holding none, but reporting: it may become the 3.x leader (a key-on worker beats first)
            [],
            [[WorkerItem("k", metrics=True, kcl_daemon=True, metrics_seen=1)],
             [WorkerItem("k", metrics=True, kcl_daemon=True, metrics_seen=2)]],
            "worker k writes no heartbeat",
        ),
        (  # ... a stale report of a worker gone long ago: no sign
            [],
            [[WorkerItem("k", metrics=True, kcl_daemon=True, metrics_seen=1)]] * 3,
            None,
        ),
        (  # a Java 3.1.3 worker's first report, while it holds nothing yet
            [lease("a", 1, "w1")],
            [[beat("w1", 1)], [beat("w1", 2), WorkerItem("java", metrics=True, metrics_seen=1)]],
            "worker java publishes Java worker metrics (a Java 3.x worker)",
        ),
        (
            [],
            [[WorkerItem("me", beat=1, mode=PW, leased_by="java", lease_shaped=True)]],
            "worker item me was written as a lease by java",
        ),
    ],
)  # fmt: skip
def test_foreign_signs(leases: list[Lease], scans: list[list[WorkerItem]], sign: str | None) -> None:
    found = _signs(leases, scans)
    if sign is None:
        assert found == []
    else:
        assert any(sign in s for s in found), found


def test_the_decision_names_the_reason() -> None:
    beats = HeartbeatObservations().observe([beat("w1", 1)], 0.0)
    assert decide(PL, [], beats, "me", 1.0, L) == ModeDecision(PL, "leaseRenewal is PER_LEASE")
    assert decide(PW, [lease("a", 1, "w1")], beats, "me", 1.0, L).mode is PW
    fell = decide(PW, [lease("a", 1, "w9")], beats, "me", 1.0, L)
    assert fell.mode is PL and "w9" in fell.reason


def test_falling_back_lasts_for_the_process() -> None:
    on, off = ModeDecision(PW, "ok"), ModeDecision(PL, "w9 has no heartbeat")
    assert settle(on, off) == off
    assert settle(off, on) == off
    assert settle(on, on) == on


owners = st.sampled_from(["w1", "w2", "w3", "me"])


@given(
    lease_owners=st.lists(owners, max_size=8),
    heartbeating=st.sets(owners),
    foreign=st.sampled_from(["owner", "java-metrics", "leased-item", "per-lease"]),
)
def test_any_foreign_sign_yields_per_lease(
    lease_owners: list[str], heartbeating: set[str], foreign: str
) -> None:
    leases = [lease(f"s{i}", 1, o) for i, o in enumerate(lease_owners)]
    items = [beat(w, 1) for w in heartbeating]
    if foreign == "owner":
        leases.append(lease("x", 1, "stranger"))
    elif foreign == "java-metrics":
        items.append(WorkerItem("java", metrics=True, metrics_seen=2))
    elif foreign == "leased-item":
        items.append(WorkerItem("w4", beat=1, mode=PW, leased_by="java", lease_shaped=True))
    else:
        items.append(beat("stranger", 1, PL))
        leases.append(lease("x", 1, "stranger"))
    beats = HeartbeatObservations().observe([], 0.0).observe(items, 1.0)
    decision = decide(PW, leases, beats, "me", 2.0, L)
    assert decision.mode is PL
    assert decision.reason


@given(lease_owners=st.lists(owners, max_size=8))
def test_a_fleet_all_heartbeating_stays_per_worker(lease_owners: list[str]) -> None:
    leases = [lease(f"s{i}", 1, o) for i, o in enumerate(lease_owners)]
    beats = HeartbeatObservations().observe([beat(w, 1) for w in ("w1", "w2", "w3")], 0.0)
    assert decide(PW, leases, beats, "me", 1.0, L).mode is PW


@pytest.mark.parametrize(
    ("seen_owner", "seen_counter", "lost"),
    [
        ("b", 4, False),  # a scan from before our take (counter 5): the former owner, not a loss
        ("a", 5, False),  # ours as held
        ("a", 7, False),  # ours, written since (a checkpoint)
        ("b", 6, True),  # stolen: another owner past our counter
        ("b", 5, True),  # another owner at our counter: two writes on counter 4 both applied (a racy table)
        (None, 6, True),  # released by someone else
    ],
)
def test_a_scan_shows_a_held_lease_moved_on_when_another_owner_is_at_or_past_our_counter(
    seen_owner: str | None, seen_counter: int, lost: bool
) -> None:
    held = lease("shard-0", 5, "a")
    assert moved_on(held, lease("shard-0", seen_counter, seen_owner), "a") is lost


# -- the 3.x leader ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("leader", "scans", "sign"),
    [
        (None, [[beat("w1", 1)]], False),  # no leader (or the 2.x taker)
        ("me", [[]], False),  # this worker leads: its own mode is what it decides
        ("w1", [[beat("w1", 1)], [beat("w1", 2)]], False),  # a kcl-daemon leader heartbeating
        ("w1", [[beat("w1", 1)], [beat("w1", 1)]], False),  # ... SIGKILLed: its lock stands, no sign
        ("java", [[beat("w1", 1)]], True),  # never seen: a Java 3.x leader (it reads counters only)
        ("java", [[WorkerItem("java", metrics=True, metrics_seen=1)]], True),  # Java's metrics item
        (  # a kcl-daemon worker with the key off: its report, no heartbeat
            "k",
            [[WorkerItem("k", metrics=True, kcl_daemon=True, metrics_seen=1)]],
            True,
        ),
        ("w1", [[beat("w1", 1, PL)]], True),  # fell back (or renews per lease): counters only to others
        ("w1", [[beat("w1", 1)], []], False),  # stopping gracefully: its item goes before its lock
        ("java", [[WorkerItem("java", metrics=True, metrics_seen=1)], []], True),  # vanished, never beat
    ],
)  # fmt: skip
def test_a_3x_leader_that_does_not_heartbeat_per_worker_is_a_foreign_sign(
    leader: str | None, scans: list[list[WorkerItem]], sign: bool
) -> None:
    beats = HeartbeatObservations()
    for t, items in enumerate(scans):
        beats = beats.observe(items, float(t))
    found = foreign_signs([], beats, "me", float(len(scans)), L, leader=leader)
    assert any("3.x leader" in s for s in found) is sign, found
    decision = decide(PW, [], beats, "me", float(len(scans)), L, leader=leader)
    assert (decision.mode is PL) is sign


@given(heartbeating=st.sets(owners), leader=owners)
def test_a_leader_heartbeating_per_worker_is_never_a_sign(heartbeating: set[str], leader: str) -> None:
    beats = HeartbeatObservations().observe([beat(w, 1) for w in heartbeating | {leader}], 0.0)
    assert decide(PW, [], beats, "me", 1.0, L, leader=leader).mode is PW
