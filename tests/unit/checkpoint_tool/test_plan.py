"""The checkpoint tool's plan (kcl_daemon.checkpoint_tool.plan): what happens to each lease, and why."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.checkpoint_tool.plan import (
    Action,
    Liveness,
    Positioned,
    audit_record,
    checkpoint_before,
    liveness,
    plan,
    plan_step,
)
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import SHARD_END, TRIM_HORIZON, ExtendedSequenceNumber

SEQ = ExtendedSequenceNumber("500")


def lease(
    owner: str | None = None, counter: int = 3, checkpoint: ExtendedSequenceNumber = SEQ, **more: object
) -> Lease:
    return Lease("shardId-0", checkpoint, owner, counter, **more)  # type: ignore[arg-type]


def step(first: Lease | None, second: Lease | None, *, handoff: bool = False, window_s: float = 10.0):  # type: ignore[no-untyped-def]
    return plan_step(
        "shardId-0", first, second, TRIM_HORIZON, handoff=handoff, window_s=window_s, failover_s=10.0
    )


def test_unowned_is_written_directly() -> None:
    s = step(lease(), lease())
    assert s.action is Action.WRITE and s.liveness is Liveness.UNOWNED
    assert s.current == SEQ and s.target == TRIM_HORIZON


def test_a_live_owner_is_refused_without_handoff_and_handed_off_with_it() -> None:
    refused = step(lease("w1", 3), lease("w1", 4))
    assert refused.action is Action.REFUSE and refused.liveness is Liveness.LIVE
    assert "w1 renewed it while we watched" in refused.reason and "--handoff" in refused.reason
    assert step(lease("w1", 3), lease("w1", 4), handoff=True).action is Action.HANDOFF


def test_an_owner_not_watched_long_enough_counts_as_live() -> None:
    assert step(lease("w1", 3), None).action is Action.REFUSE
    short = step(lease("w1", 3), lease("w1", 3), window_s=2.0)
    assert short.action is Action.REFUSE and short.liveness is Liveness.UNKNOWN


def test_an_expired_owner_is_written_and_released() -> None:
    s = step(lease("dead", 3), lease("dead", 3))
    assert s.action is Action.WRITE_RELEASE and "has not renewed it for 10s" in s.reason


def test_a_pending_handoff_counts_as_owned() -> None:
    pending = lease("w2", 3, checkpoint_owner="w1")
    assert step(pending, lease("w2", 4, checkpoint_owner="w1")).action is Action.REFUSE


def test_finished_missing_and_unchanged_leases() -> None:
    finished = step(lease(checkpoint=SHARD_END), None)
    assert finished.action is Action.REFUSE and "SHARD_END" in finished.reason
    assert step(None, None).action is Action.REFUSE
    same = plan_step("shardId-0", lease(), None, SEQ, handoff=False, window_s=0, failover_s=10)
    assert same.action is Action.NOTHING
    unresolved = plan_step(
        "k", lease(), None, None, handoff=False, window_s=0, failover_s=10, target_problem="no stream"
    )
    assert unresolved.action is Action.REFUSE and unresolved.reason == "no stream"


def test_plan_covers_every_key_in_order() -> None:
    steps = plan(
        ["a", "b"],
        {"a": Lease("a", SEQ)},
        None,
        {"a": TRIM_HORIZON, "b": TRIM_HORIZON},
        handoff=False,
        window_s=0,
        failover_s=10,
    )
    assert [(s.lease_key, s.action) for s in steps] == [("a", Action.WRITE), ("b", Action.REFUSE)]
    assert steps[0].as_json()["to"] == "TRIM_HORIZON"


@given(
    counter=st.integers(0, 100),
    moved=st.booleans(),
    owner=st.one_of(st.none(), st.sampled_from(["w1", "w2"])),
    window=st.floats(0, 30),
    handoff=st.booleans(),
)
def test_a_live_owner_is_never_written_under(
    counter: int, moved: bool, owner: str | None, window: float, handoff: bool
) -> None:
    """Safety: a write without a hand-off happens only to an unowned lease or one unchanged for a failover."""
    first = lease(owner, counter)
    second = lease(owner, counter + int(moved))
    s = step(first, second, handoff=handoff, window_s=window)
    if s.action in (Action.WRITE, Action.WRITE_RELEASE):
        assert owner is None or (not moved and window >= 10.0)
    if owner is not None and (moved or window < 10.0):
        assert s.action in (Action.HANDOFF, Action.REFUSE)
        assert (s.action is Action.HANDOFF) == handoff


def test_audit_record() -> None:
    record = audit_record("ops@host", 1700000000000, SEQ, TRIM_HORIZON, "bad deploy", Action.HANDOFF)
    assert record == {
        "by": "ops@host",
        "at": 1700000000000,
        "from": "500",
        "to": "TRIM_HORIZON",
        "how": "hand-off, write and release",
        "reason": "bad deploy",
    }
    assert "reason" not in audit_record("x", 1, SEQ, SEQ, None, Action.WRITE)


@pytest.mark.parametrize(
    ("records", "first", "expected"),
    [
        ([Positioned("10"), Positioned("20", 3), Positioned("30")], "30", ExtendedSequenceNumber("20", 3)),
        ([Positioned("10"), Positioned("20")], "10", None),  # nothing before it: TRIM_HORIZON
        ([Positioned("10"), Positioned("20")], None, ExtendedSequenceNumber("20")),  # after the last one
        ([], None, None),
        (
            [Positioned("9"), Positioned("10")],
            "100",
            ExtendedSequenceNumber("10"),
        ),  # numeric, not text, order
    ],
)
def test_checkpoint_before(
    records: list[Positioned], first: str | None, expected: ExtendedSequenceNumber | None
) -> None:
    assert checkpoint_before(records, first) == expected


def test_liveness_table() -> None:
    assert liveness(lease(), None, 0, 10) is Liveness.UNOWNED
    assert liveness(lease("w"), None, 0, 10) is Liveness.UNKNOWN
    assert liveness(lease("w", 1), lease("w", 2), 1, 10) is Liveness.LIVE
    assert liveness(lease("w", 1), lease("w", 1), 10, 10) is Liveness.EXPIRED
