"""The chaos run's duplicate classification: take lines parsed from logs, and the reason of each pair."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.chaos.classify import Take, Takes, classify, describe, parse_takes

T0 = time.mktime(time.strptime("2026-11-24 19:32:15", "%Y-%m-%d %H:%M:%S"))
FAILOVER_S = 3.0

LOG = """\
2026-11-24 19:32:15,751 INFO    [-] coordinator: lease shardId-000000000004 taken (priority): \
very old: first seen unowned, never seen renewed
2026-11-24 19:32:22,043 INFO    [-] coordinator: lease shardId-000000000004 taken (steal): no \
lease available and need 2 to reach target 3: stealing from most loaded worker w2 (6 leases)
2026-11-24 19:32:30,500 INFO    [-] coordinator: lease shardId-000000000001 taken (available): \
expired: owner w2 not renewed for 3.4s (> 3.0s); need 1 to reach target
2026-11-24 19:32:31,000 INFO    [-] coordinator: lease shardId-000000000002 taken (available): \
unowned; need 1 to reach target
2026-11-24 19:32:31,100 WARNING [shardId-000000000002] kcl_daemon.retry: lease_io: attempt 1 failed
"""


def test_parse_takes_reads_time_kind_and_previous_owner() -> None:
    takes = parse_takes(LOG)
    assert [(t.when - T0, t.kind, t.previous_owner) for t in takes["shardId-000000000004"]] == [
        (pytest.approx(0.751), "priority", None),
        (pytest.approx(7.043), "steal", "w2"),
    ]
    assert [(t.when - T0, t.kind, t.previous_owner) for t in takes["shardId-000000000001"]] == [
        (pytest.approx(15.5), "available", "w2")
    ]
    assert [(t.kind, t.previous_owner) for t in takes["shardId-000000000002"]] == [("available", None)]


def rec(worker: str, since: float, t: float | None = None, data: str = "r0000001") -> dict[str, Any]:
    """A delivery by ``worker`` whose child started at ``since``; its batch arrived at ``t``."""
    return {
        "worker": worker,
        "shard": "s1",
        "since": since,
        "t": since + 0.5 if t is None else t,
        "data": data,
    }


STEAL_BY_W3 = {"w3": {"s1": [Take(100.0, "steal", "w2")]}}
EXPIRED_TAKE_BY_W3 = {"w3": {"s1": [Take(100.0, "available", "w2")]}}

CHAIN = {
    "w1": {"s1": [Take(9.9, "priority", None)]},
    "w2": {"s1": [Take(48.5, "steal", "w1")]},
    "w2-r": {"s1": [Take(57.6, "available", "w2")]},
    "w3": {"s1": [Take(70.0, "steal", "w2-r")]},
}
CHAIN_STEALS = {"w1": CHAIN["w1"], "w2": CHAIN["w2"], "w3": {"s1": [Take(70.0, "steal", "w2")]}}
CHAIN_EXPIRED = {**CHAIN, "w3": {"s1": [Take(70.0, "available", "w2-r")]}}
CHAIN_PRIORITY = {
    "w1": {"s1": [Take(9.9, "priority", None)]},
    "w2": {"s1": [Take(20.0, "steal", "w1")]},
    "w3": {"s1": [Take(40.0, "priority", None)]},
}

CASES: list[tuple[str, dict[str, Any], dict[str, Any], set[str], Takes, str]] = [
    ("one worker twice", rec("w1", 10), rec("w1", 20), set(), {}, "same worker"),
    ("after a SIGKILL", rec("w2", 10), rec("w1", 20), {"w2"}, {}, "crash"),
    ("the thief re-sends past the checkpoint", rec("w2", 10), rec("w3", 100.1), set(), STEAL_BY_W3, "steal"),
    # the chaos run of seed 11 that failed CI: w3 stole shard 4 from w2 at 22.043 and its child started at
    # 22.084; w2's batch in flight reached w2's child after that, then w2's checkpoint found owner w3
    ("victim's batch in flight", rec("w3", 100.04), rec("w2", 10, t=100.1), {"w2"}, STEAL_BY_W3, "steal"),
    ("the same, victim alive", rec("w3", 100.04), rec("w2", 10, t=100.1), set(), STEAL_BY_W3, "steal"),
    (
        "victim delivers long after",
        rec("w3", 100.04),
        rec("w2", 10, t=110),
        set(),
        STEAL_BY_W3,
        "lease expired",
    ),
    (
        "a steal from someone else",
        rec("w3", 100.04),
        rec("w1", 10, t=100.1),
        set(),
        STEAL_BY_W3,
        "lease expired",
    ),
    (
        "victim's child after the steal",
        rec("w3", 100.04),
        rec("w2", 150),
        set(),
        STEAL_BY_W3,
        "lease expired",
    ),
    (
        "the thief's child came from a later take",
        rec("w3", 200),
        rec("w2", 10, t=100.1),
        set(),
        {"w3": {"s1": [Take(100.0, "steal", "w2"), Take(199.0, "available", "w1")]}},
        "lease expired",
    ),
    (
        "an expired lease of a live worker",
        rec("w2", 10),
        rec("w3", 100.1),
        set(),
        EXPIRED_TAKE_BY_W3,
        "lease expired",
    ),
    ("a steal after the second child", rec("w2", 10), rec("w3", 50), set(), STEAL_BY_W3, "lease expired"),
    ("no take logged at all", rec("w2", 10), rec("w3", 20), set(), {}, "lease expired"),
    # a chaos run of seed 11: w2 stole shard 4 from w1, w1's checkpoint then failed (lease lost), w2 was
    # SIGKILLed before it re-sent w1's last batch, and w2-r took the expired lease and sent it again
    ("a steal, then a crash", rec("w1", 10), rec("w2-r", 57.7), {"w2"}, CHAIN, "crash"),
    ("steals only", rec("w1", 10), rec("w3", 70.1), set(), CHAIN_STEALS, "steal"),
    ("a steal, then an expiry", rec("w1", 10), rec("w3", 70.1), set(), CHAIN_EXPIRED, "lease expired"),
    ("an unnamed owner is the last taker", rec("w1", 10), rec("w3", 40.1), {"w2"}, CHAIN_PRIORITY, "crash"),
    ("the same owner alive", rec("w1", 10), rec("w3", 40.1), set(), CHAIN_PRIORITY, "lease expired"),
    (
        "the thief's latest take counts",
        rec("w2", 10),
        rec("w3", 200),
        set(),
        {"w3": {"s1": [Take(100.0, "steal", "w2"), Take(199.0, "available", "w2")]}},
        "lease expired",
    ),
]


@pytest.mark.parametrize(
    ("first", "second", "killed", "takes", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_classify(
    first: dict[str, Any], second: dict[str, Any], killed: set[str], takes: Takes, expected: str
) -> None:
    assert classify(first, second, killed, takes, FAILOVER_S) == expected


workers = st.sampled_from(["w1", "w2", "w3", "w2-r"])
times = st.floats(min_value=0, max_value=1000)
take_lists = st.lists(
    st.builds(
        Take, times, st.sampled_from(["priority", "available", "steal"]), st.one_of(st.none(), workers)
    ),
    max_size=4,
)


@given(
    a=workers,
    b=workers,
    a_since=times,
    b_since=times,
    killed=st.sets(workers),
    a_takes=take_lists,
    b_takes=take_lists,
)
def test_classify_invariants(
    a: str, b: str, a_since: float, b_since: float, killed: set[str], a_takes: list[Take], b_takes: list[Take]
) -> None:
    takes = {a: {"s1": a_takes}, b: {"s1": b_takes}} if a != b else {a: {"s1": a_takes}}
    reason = classify(rec(a, a_since), rec(b, b_since), killed, takes, FAILOVER_S)
    assert reason in {"same worker", "crash", "steal", "lease expired"}
    assert (reason == "same worker") == (a == b)
    if a != b and a in killed:
        assert reason == "crash"
    if reason == "steal":  # a steal is always on record
        assert any(t.kind == "steal" for t in a_takes + b_takes)


def test_describe_gives_the_evidence() -> None:
    first = rec("w3", T0 + 7.084, data="r0002704")
    second = rec("w2", T0 + 0.948, t=T0 + 7.2)
    line = describe(first, second, {"w3": {"s1": [Take(T0 + 7.043, "steal", "w2")]}})
    assert line == (
        "r0002704 on s1: first w3 (child since 19:32:22.084; its takes: 19:32:22.043 steal from w2), "
        "then w2 (child since 19:32:15.948, batch at 19:32:22.200; its takes: none)"
    )
