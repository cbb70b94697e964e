"""reconcile(): what an unknown-outcome lease write did, judged from the item read back."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.reconcile import LeaseWrite, Verdict, WriteKind, describe, reconcile
from kcl_daemon.core.sequence import ExtendedSequenceNumber

ME = "me"
CP = ExtendedSequenceNumber("100")
TARGET = ExtendedSequenceNumber("200")
MINE = Lease("shardId-1", CP, lease_owner=ME, lease_counter=7)
FREE = Lease("shardId-1", CP, lease_owner=None, lease_counter=7)
THEIRS = Lease("shardId-1", CP, lease_owner="other", lease_counter=7)


def seen(base: Lease, **changes: object) -> Lease:
    return replace(base, **changes)  # type: ignore[arg-type]


CASES = [
    # kind, fenced on, target checkpoint, item read back, verdict
    (WriteKind.RENEW, MINE, None, seen(MINE, lease_counter=8), Verdict.APPLIED),
    (WriteKind.RENEW, MINE, None, MINE, Verdict.NOT_APPLIED),
    (WriteKind.RENEW, MINE, None, seen(MINE, lease_owner="other", lease_counter=8), Verdict.LOST),
    (WriteKind.RENEW, MINE, None, seen(MINE, lease_counter=9), Verdict.LOST),
    (WriteKind.RENEW, MINE, None, seen(MINE, lease_owner=None, lease_counter=8), Verdict.LOST),
    (WriteKind.RENEW, MINE, None, None, Verdict.LOST),
    (WriteKind.TAKE, FREE, None, seen(FREE, lease_owner=ME, lease_counter=8), Verdict.APPLIED),
    (WriteKind.TAKE, FREE, None, FREE, Verdict.NOT_APPLIED),
    (WriteKind.TAKE, FREE, None, seen(FREE, lease_owner="third", lease_counter=8), Verdict.LOST),
    (WriteKind.TAKE, THEIRS, None, seen(THEIRS, lease_owner=ME, lease_counter=8), Verdict.APPLIED),
    (WriteKind.TAKE, THEIRS, None, THEIRS, Verdict.NOT_APPLIED),
    (WriteKind.TAKE, THEIRS, None, seen(THEIRS, lease_counter=8), Verdict.LOST),  # the owner renewed
    (WriteKind.TAKE, THEIRS, None, None, Verdict.LOST),
    (WriteKind.CHECKPOINT, MINE, TARGET, seen(MINE, lease_counter=8, checkpoint=TARGET), Verdict.APPLIED),
    (WriteKind.CHECKPOINT, MINE, TARGET, MINE, Verdict.NOT_APPLIED),
    (WriteKind.CHECKPOINT, MINE, TARGET, seen(MINE, lease_counter=8), Verdict.LOST),  # not our checkpoint
    (
        WriteKind.CHECKPOINT,
        MINE,
        TARGET,
        seen(MINE, lease_owner="other", lease_counter=8, checkpoint=TARGET),
        Verdict.LOST,
    ),
    (WriteKind.RELEASE, MINE, None, seen(MINE, lease_owner=None, lease_counter=8), Verdict.APPLIED),
    (WriteKind.RELEASE, MINE, None, MINE, Verdict.NOT_APPLIED),
    (WriteKind.RELEASE, MINE, None, None, Verdict.APPLIED),
    (WriteKind.RELEASE, MINE, None, seen(MINE, lease_owner="other", lease_counter=8), Verdict.LOST),
    (WriteKind.CREATE, FREE, None, None, Verdict.NOT_APPLIED),
    (WriteKind.CREATE, FREE, None, FREE, Verdict.APPLIED),
    (WriteKind.CREATE, FREE, None, THEIRS, Verdict.APPLIED),  # another worker created it: the same lease
]


@pytest.mark.parametrize(("kind", "before", "target", "after", "verdict"), CASES)
def test_reconcile_table(
    kind: WriteKind,
    before: Lease,
    target: ExtendedSequenceNumber | None,
    after: Lease | None,
    verdict: Verdict,
) -> None:
    result = reconcile(LeaseWrite(kind, before, ME, checkpoint=target), after)
    assert result.verdict is verdict
    assert result.seen == after
    assert describe(after) in result.reason


def test_the_reason_says_what_was_seen() -> None:
    after = seen(MINE, lease_owner="other", lease_counter=9)
    reason = reconcile(LeaseWrite(WriteKind.RENEW, MINE, ME), after).reason
    assert "owner other, counter 9, checkpoint 100" in reason and "counter 7" in reason


owners = st.sampled_from([None, ME, "other"])


@given(
    kind=st.sampled_from([WriteKind.RENEW, WriteKind.TAKE, WriteKind.CHECKPOINT, WriteKind.RELEASE]),
    before_owner=owners,
    counter=st.integers(0, 5),
    after_owner=owners,
    after_counter=st.integers(0, 8),
)
def test_only_our_own_next_counter_can_be_applied_and_only_the_old_counter_can_be_retried(
    kind: WriteKind, before_owner: str | None, counter: int, after_owner: str | None, after_counter: int
) -> None:
    before = Lease("k", CP, lease_owner=before_owner, lease_counter=counter)
    after = Lease("k", TARGET, lease_owner=after_owner, lease_counter=after_counter)
    result = reconcile(LeaseWrite(kind, before, ME, checkpoint=TARGET), after)
    if result.verdict is Verdict.APPLIED:
        assert after_counter == counter + 1
        assert after_owner == (None if kind is WriteKind.RELEASE else ME)
    if result.verdict is Verdict.NOT_APPLIED:
        assert after_counter == counter and after_owner == before_owner
