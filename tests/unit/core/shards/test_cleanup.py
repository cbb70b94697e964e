"""Parent lease deletion after shard end (contract §6.5)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import (
    AT_TIMESTAMP,
    LATEST,
    SHARD_END,
    TRIM_HORIZON,
    ExtendedSequenceNumber,
)
from kcl_daemon.core.shards.cleanup import CleanupOutcome, parent_lease_deletable

STARTED = ExtendedSequenceNumber("4959033827149025660855969253836157109592157598913658889")


def parent(children: tuple[str, ...] = ("E", "F"), parents: tuple[str, ...] = ("A",)) -> Lease:
    return Lease(
        "D",
        SHARD_END,
        lease_owner="me",
        lease_counter=8,
        child_shard_ids=frozenset(children),
        parent_shard_ids=frozenset(parents),
    )


def lease(key: str, checkpoint: ExtendedSequenceNumber = STARTED) -> Lease:
    return Lease(key, checkpoint, lease_owner="w", lease_counter=2)


@pytest.mark.parametrize(
    ("existing", "outcome", "mentions"),
    [
        ([lease("E"), lease("F")], CleanupOutcome.DELETE, "has begun"),
        ([lease("E"), lease("F", LATEST)], CleanupOutcome.DELETE, "has begun"),  # LATEST counts as started
        ([lease("E"), lease("F", SHARD_END)], CleanupOutcome.DELETE, "has begun"),
        ([lease("E")], CleanupOutcome.KEEP, "child leases missing: F"),
        ([], CleanupOutcome.KEEP, "child leases missing: E, F"),
        ([lease("E"), lease("F", TRIM_HORIZON)], CleanupOutcome.KEEP, "not started"),
        ([lease("E", AT_TIMESTAMP), lease("F")], CleanupOutcome.KEEP, "not started"),
        (
            [lease("E"), lease("F"), lease("A", SHARD_END)],
            CleanupOutcome.KEEP,
            "own parent leases still present: A",
        ),
        ([lease("E"), lease("F"), lease("unrelated")], CleanupOutcome.DELETE, "has begun"),
    ],
)
def test_completed_shard_rules(existing: list[Lease], outcome: CleanupOutcome, mentions: str) -> None:
    decision = parent_lease_deletable(parent(), existing)
    assert decision.outcome is outcome
    assert decision.deletable is (outcome is CleanupOutcome.DELETE)
    assert mentions in decision.reason


def test_decision_lists_every_problem() -> None:
    decision = parent_lease_deletable(parent(), [lease("E", TRIM_HORIZON), lease("A")])
    assert decision.missing_child_leases == ("F",)
    assert decision.unstarted_child_leases == ("E",)
    assert decision.remaining_parent_leases == ("A",)


def test_already_deleted_lease_counts_as_cleaned() -> None:
    assert parent_lease_deletable(None, []).outcome is CleanupOutcome.ALREADY_GONE


def test_child_ids_from_the_service_replace_empty_child_shard_ids() -> None:
    bare = parent(children=())
    assert parent_lease_deletable(bare, [lease("E")]).outcome is CleanupOutcome.KEEP
    assert "unknown" in parent_lease_deletable(bare, [lease("E")]).reason
    assert parent_lease_deletable(bare, [lease("E")], child_shard_ids=["E"]).deletable


def test_lease_not_at_shard_end_is_never_deleted() -> None:
    unfinished = Lease("D", STARTED, child_shard_ids=frozenset({"E"}))
    decision = parent_lease_deletable(unfinished, [lease("E")])
    assert decision.outcome is CleanupOutcome.KEEP
    assert "not SHARD_END" in decision.reason


def test_merge_child_shared_by_two_parents() -> None:
    a = Lease("A", SHARD_END, child_shard_ids=frozenset({"C"}))
    b = Lease("B", SHARD_END, child_shard_ids=frozenset({"C"}))
    existing = [a, b, lease("C")]
    assert parent_lease_deletable(a, existing).deletable
    assert parent_lease_deletable(b, existing).deletable


def test_ancestors_are_deleted_oldest_first() -> None:
    # R -> D -> {E, F}: D is kept while R's lease exists; R goes first, then D.
    r = Lease("R", SHARD_END, child_shard_ids=frozenset({"D"}))
    d = parent(parents=("R",))
    existing = [r, d, lease("E"), lease("F")]
    assert not parent_lease_deletable(d, existing).deletable
    assert parent_lease_deletable(r, existing).deletable  # its child D (at SHARD_END) has started
    existing.remove(r)
    assert parent_lease_deletable(d, existing).deletable


def test_multi_stream_keys() -> None:
    stream = "123456789012:orders:1610000000"
    d = Lease(
        f"{stream}:D",
        SHARD_END,
        child_shard_ids=frozenset({"E"}),
        parent_shard_ids=frozenset({"A"}),
        stream_identifier=stream,
        stream_shard_id="D",
    )
    assert parent_lease_deletable(d, [lease(f"{stream}:E")]).deletable
    assert not parent_lease_deletable(d, [lease("E")]).deletable  # single-stream key of another table
    assert not parent_lease_deletable(d, [lease(f"{stream}:E"), lease(f"{stream}:A")]).deletable


checkpoints = st.sampled_from([TRIM_HORIZON, AT_TIMESTAMP, LATEST, SHARD_END, STARTED])


@given(
    st.dictionaries(st.sampled_from(["E", "F", "G"]), st.none() | checkpoints, min_size=1),
    st.sets(st.sampled_from(["A", "B"])),
)
def test_deletable_iff_all_three_rules_hold(
    children: dict[str, ExtendedSequenceNumber | None], remaining_parents: set[str]
) -> None:
    existing = [lease(k, c) for k, c in children.items() if c is not None]
    existing += [lease(p, SHARD_END) for p in remaining_parents]
    decision = parent_lease_deletable(parent(children=tuple(children), parents=("A", "B")), existing)
    expected = (
        all(c is not None for c in children.values())
        and all(c not in (TRIM_HORIZON, AT_TIMESTAMP) for c in children.values())
        and not remaining_parents
    )
    assert decision.deletable is expected
