"""Shard sync (contract §6.2, §6.3), shard end (§6.4) and waiting on parents: worked examples, properties."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcl_daemon.core.leases.lease import MAX_HASH_KEY, Lease
from kcl_daemon.core.leases.lease_codec import lease_from_item, new_lease_item
from kcl_daemon.core.sequence import (
    AT_TIMESTAMP,
    LATEST,
    SHARD_END,
    TRIM_HORIZON,
    ExtendedSequenceNumber,
    Sentinel,
)
from kcl_daemon.core.shards.graph import (
    INITIAL_POSITIONS,
    ChildShard,
    InconsistentShards,
    Shard,
    ShardEndAction,
    child_leases_at_shard_end,
    hash_range_is_complete,
    leases_to_create,
    parents_block,
    shards_at_initial_position,
)
from tests.support.hypothesis_profiles import examples

Q = (MAX_HASH_KEY + 1) // 8


def shard(
    shard_id: str,
    start: int,
    end: int,
    seq: int,
    *,
    parents: tuple[str, ...] = (),
    ended: int | None = None,
) -> Shard:
    return Shard(
        shard_id,
        parent_shard_id=parents[0] if parents else None,
        adjacent_parent_shard_id=parents[1] if len(parents) > 1 else None,
        starting_hash_key=start,
        ending_hash_key=end,
        starting_sequence_number=seq,
        ending_sequence_number=ended,
    )


def leased(*shard_ids: str) -> list[Lease]:
    return [Lease(s, TRIM_HORIZON, lease_owner="w", lease_counter=3) for s in shard_ids]


def created(result: list[Lease]) -> list[tuple[str, str]]:
    return [(lease.lease_key, str(lease.checkpoint)) for lease in result]


def sync(
    shards: list[Shard], existing: list[Lease], position: Sentinel, *, ignore: bool = False
) -> list[Lease]:
    return leases_to_create(
        shards, existing, position, empty_table=False, ignore_unexpected_child_shards=ignore
    )


# --- hash range ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ranges", "complete"),
    [
        ([(0, MAX_HASH_KEY)], True),
        ([(Q, MAX_HASH_KEY), (0, Q - 1)], True),  # order of the input does not matter
        ([(0, Q - 1), (Q, 2 * Q - 1), (2 * Q, MAX_HASH_KEY)], True),
        ([(0, Q - 1), (Q + 1, MAX_HASH_KEY)], False),  # gap
        ([(0, Q), (Q, MAX_HASH_KEY)], False),  # overlap by one key
        ([(0, MAX_HASH_KEY), (Q, 2 * Q)], False),  # nested
        ([(1, MAX_HASH_KEY)], False),
        ([(0, MAX_HASH_KEY - 1)], False),
        ([], False),
    ],
)
def test_hash_range_is_complete(ranges: list[tuple[int, int]], complete: bool) -> None:
    shards = [shard(f"s{i}", start, end, i) for i, (start, end) in enumerate(ranges)]
    assert hash_range_is_complete(shards) is complete


# --- contract §6.3 worked example --------------------------------------------------------------------------
# A and B were closed and merged into C; D was split into E and F; C, E, F are open; G is unrelated.

A = shard("A", 0, Q - 1, 100, ended=199)
B = shard("B", Q, 2 * Q - 1, 101, ended=199)
C = shard("C", 0, 2 * Q - 1, 200, parents=("A", "B"))
D = shard("D", 2 * Q, 4 * Q - 1, 102, ended=299)
E = shard("E", 2 * Q, 3 * Q - 1, 300, parents=("D",))
F = shard("F", 3 * Q, 4 * Q - 1, 301, parents=("D",))
G = shard("G", 4 * Q, MAX_HASH_KEY, 103)
WORKED = [C, A, E, G, B, F, D]


@pytest.mark.parametrize(
    ("existing", "position", "expected"),
    [
        (["A", "D"], Sentinel.LATEST, [("B", "LATEST"), ("G", "LATEST")]),
        (["A", "D"], Sentinel.TRIM_HORIZON, [("B", "TRIM_HORIZON"), ("G", "TRIM_HORIZON")]),
        (["A", "D"], Sentinel.AT_TIMESTAMP, [("B", "AT_TIMESTAMP"), ("G", "AT_TIMESTAMP")]),
        # The {D}-only variant: from the oldest position the roots A and B get leases while C waits;
        # from LATEST C itself gets one. G, unrelated and open, gets one in every case.
        (["D"], Sentinel.TRIM_HORIZON, [("A", "TRIM_HORIZON"), ("B", "TRIM_HORIZON"), ("G", "TRIM_HORIZON")]),
        (["D"], Sentinel.AT_TIMESTAMP, [("A", "AT_TIMESTAMP"), ("B", "AT_TIMESTAMP"), ("G", "AT_TIMESTAMP")]),
        (["D"], Sentinel.LATEST, [("G", "LATEST"), ("C", "LATEST")]),
    ],
)
def test_spec_worked_example(
    existing: list[str], position: Sentinel, expected: list[tuple[str, str]]
) -> None:
    assert created(sync(WORKED, leased(*existing), position)) == expected


def test_worked_example_lease_contents() -> None:
    (b_lease, _g_lease) = sync(WORKED, leased("A", "D"), Sentinel.LATEST)
    assert b_lease == Lease("B", LATEST, starting_hash_key=Q, ending_hash_key=2 * Q - 1, entity_type="LEASE")
    (_g_lease, c_lease) = sync(WORKED, leased("D"), Sentinel.LATEST)
    assert c_lease.parent_shard_ids == {"A", "B"}
    assert lease_from_item(new_lease_item(c_lease)) == c_lease


# --- contract §6.3, example 2 -----------------------------------------------------------------------------
#   0 1 2 3 4 5   - shards till epoch 102
#   \ / \ / | |
#    6   7  4 5   - epoch 103-205
#     \ /   | / \
#      8    4 9 10 - epoch 206+ (open)

R = (MAX_HASH_KEY + 1) // 6
EXAMPLE_2 = [
    shard("s0", 0, R - 1, 0, ended=102),
    shard("s1", R, 2 * R - 1, 1, ended=102),
    shard("s2", 2 * R, 3 * R - 1, 2, ended=102),
    shard("s3", 3 * R, 4 * R - 1, 3, ended=102),
    shard("s4", 4 * R, 5 * R - 1, 4),
    shard("s5", 5 * R, MAX_HASH_KEY, 5, ended=205),
    shard("s6", 0, 2 * R - 1, 103, parents=("s0", "s1"), ended=205),
    shard("s7", 2 * R, 4 * R - 1, 104, parents=("s2", "s3"), ended=205),
    shard("s8", 0, 4 * R - 1, 206, parents=("s6", "s7")),
    shard("s9", 5 * R, 5 * R + R // 2, 207, parents=("s5",)),
    shard("s10", 5 * R + R // 2 + 1, MAX_HASH_KEY, 208, parents=("s5",)),
]


@pytest.mark.parametrize(
    ("position", "expected"),
    [
        (Sentinel.LATEST, [("s6", "LATEST")]),
        (Sentinel.TRIM_HORIZON, [("s0", "TRIM_HORIZON"), ("s1", "TRIM_HORIZON")]),
        (Sentinel.AT_TIMESTAMP, [("s0", "AT_TIMESTAMP"), ("s1", "AT_TIMESTAMP")]),
    ],
)
def test_contract_example_2(position: Sentinel, expected: list[tuple[str, str]]) -> None:
    assert created(sync(EXAMPLE_2, leased("s4", "s5", "s7"), position)) == expected


# --- chains of splits and merges ----------------------------------------------------------------------


def split_chain(depth: int) -> list[Shard]:
    """s0 splits into s1 (left) and r1 (right); s1 splits into s2 and r2; ... every r_i and s_depth open."""
    shards = []
    lo, hi = 0, MAX_HASH_KEY
    for level in range(depth):
        mid = (lo + hi) // 2
        shards.append(
            shard(
                f"s{level}",
                lo,
                hi,
                10 * level,
                parents=(f"s{level - 1}",) if level else (),
                ended=10 * level + 9,
            )
        )
        shards.append(shard(f"r{level + 1}", mid + 1, hi, 10 * level + 10, parents=(f"s{level}",)))
        hi = mid
    shards.append(shard(f"s{depth}", lo, hi, 10 * depth, parents=(f"s{depth - 1}",)))
    return shards


@pytest.mark.parametrize(
    ("existing", "position", "expected"),
    [
        ([], Sentinel.TRIM_HORIZON, [("s0", "TRIM_HORIZON")]),
        ([], Sentinel.AT_TIMESTAMP, [("s0", "AT_TIMESTAMP")]),
        ([], Sentinel.LATEST, [("r1", "LATEST"), ("r2", "LATEST"), ("r3", "LATEST"), ("s3", "LATEST")]),
        (["s0"], Sentinel.LATEST, []),  # everything descends from s0: created at its shard end
        (["s0"], Sentinel.TRIM_HORIZON, []),
        (["s1"], Sentinel.LATEST, [("r1", "LATEST")]),  # r1's history (s0) is not covered
        (["s1"], Sentinel.TRIM_HORIZON, [("s0", "TRIM_HORIZON")]),
        # s0 and s1 were cleaned up after their children started; the table is complete.
        (["s2", "r1", "r2"], Sentinel.TRIM_HORIZON, []),
        # ... but if r2's lease is missing too, its history is read again from the oldest root.
        (["s2", "r1"], Sentinel.TRIM_HORIZON, [("s0", "TRIM_HORIZON")]),
        (["s2", "r1"], Sentinel.LATEST, [("r2", "LATEST")]),
    ],
)
def test_split_chain(existing: list[str], position: Sentinel, expected: list[tuple[str, str]]) -> None:
    assert created(sync(split_chain(3), leased(*existing), position)) == expected


def test_very_long_chain_does_not_exhaust_the_stack() -> None:
    shards = split_chain(3000)
    assert created(sync(shards, [], Sentinel.TRIM_HORIZON)) == [("s0", "TRIM_HORIZON")]
    assert len(sync(shards, leased("s1500"), Sentinel.LATEST)) == 1500  # r1..r1500


def test_merge_of_a_leased_and_an_unleased_lineage() -> None:
    # X splits into X1, X2 (leased); Y (never leased) and X2 merge into M (open).
    x = shard("X", 0, 2 * Q - 1, 1, ended=10)
    x1 = shard("X1", 0, Q - 1, 11, parents=("X",))
    x2 = shard("X2", Q, 2 * Q - 1, 12, parents=("X",), ended=20)
    y = shard("Y", 2 * Q, MAX_HASH_KEY, 2, ended=20)
    m = shard("M", Q, MAX_HASH_KEY, 21, parents=("X2", "Y"))
    shards = [x, x1, x2, y, m]
    assert created(sync(shards, leased("X"), Sentinel.LATEST)) == [("Y", "LATEST")]
    assert created(sync(shards, leased("X"), Sentinel.TRIM_HORIZON)) == [("Y", "TRIM_HORIZON")]
    # From X2 alone: X1's history (X) and M's other parent (Y) are both read from the timestamp.
    assert created(sync(shards, leased("X2"), Sentinel.AT_TIMESTAMP)) == [
        ("X", "AT_TIMESTAMP"),
        ("Y", "AT_TIMESTAMP"),
    ]
    assert created(sync(shards, leased("X2"), Sentinel.LATEST)) == [("Y", "LATEST"), ("X1", "LATEST")]


def test_trimmed_parent_counts_as_absent_but_stays_in_the_lease() -> None:
    orphan = shard("O", 0, MAX_HASH_KEY, 50, parents=("gone",))
    (lease,) = sync([orphan], leased("other"), Sentinel.TRIM_HORIZON)
    assert lease.lease_key == "O"
    assert lease.parent_shard_ids == {"gone"}


# --- empty table, inconsistency, multi-stream ---------------------------------------------------------


def test_empty_table_leases_every_listed_shard_in_sequence_order() -> None:
    shards = [shard("b", Q, MAX_HASH_KEY, 5), shard("a", 0, Q - 1, 5), shard("c", 0, 1, 1, ended=2)]
    result = leases_to_create(
        shards, leased("x"), Sentinel.AT_TIMESTAMP, empty_table=True, ignore_unexpected_child_shards=False
    )
    assert created(result) == [("c", "AT_TIMESTAMP"), ("a", "AT_TIMESTAMP"), ("b", "AT_TIMESTAMP")]
    assert all(lease.lease_owner is None and lease.lease_counter == 0 for lease in result)


def test_children_of_an_open_parent_abort_the_sync() -> None:
    parent = shard("P", 0, MAX_HASH_KEY, 1)  # still open: ListShards raced the reshard
    child = shard("K", 0, Q, 2, parents=("P",))
    with pytest.raises(InconsistentShards) as caught:
        sync([parent, child], [], Sentinel.LATEST)
    assert caught.value.shard_ids == {"K"}
    assert "K" in str(caught.value)
    assert created(sync([parent, child], [], Sentinel.LATEST, ignore=True)) == [("P", "LATEST")]
    with pytest.raises(InconsistentShards):
        leases_to_create(
            [parent, child], [], Sentinel.LATEST, empty_table=True, ignore_unexpected_child_shards=False
        )


def test_shard_end_is_not_an_initial_position() -> None:
    with pytest.raises(ValueError, match="initial position"):
        sync(WORKED, [], Sentinel.SHARD_END)


def test_duplicate_shards_are_rejected() -> None:
    with pytest.raises(ValueError, match="twice"):
        sync([G, G], [], Sentinel.LATEST)


def test_multi_stream_keys_and_stream_filter() -> None:
    stream = "123456789012:orders:1610000000"
    other = "123456789012:refunds:1610000000"
    existing = [
        Lease(f"{stream}:A", TRIM_HORIZON, stream_identifier=stream, stream_shard_id="A"),
        Lease(f"{other}:D", TRIM_HORIZON, stream_identifier=other, stream_shard_id="D"),
    ]
    result = leases_to_create(
        WORKED,
        existing,
        Sentinel.LATEST,
        empty_table=False,
        ignore_unexpected_child_shards=False,
        stream_identifier=stream,
    )
    # D's lease belongs to another stream, so D's children count as unleased here.
    assert [lease.lease_key for lease in result] == [f"{stream}:{s}" for s in ("B", "G", "E", "F")]
    assert all(lease.stream_identifier == stream and lease.stream_shard_id for lease in result)


# --- shard end (6.4) ----------------------------------------------------------------------------------


class FixedRandom(random.Random):
    def __init__(self, value: int) -> None:
        super().__init__(0)
        self.value = value

    def randrange(self, *args: object, **kwargs: object) -> int:
        return self.value


NEVER_GIVE_UP = FixedRandom(1)
GIVE_UP = FixedRandom(0)


def child(shard_id: str, *parents: str, start: int = 0, end: int = MAX_HASH_KEY) -> ChildShard:
    return ChildShard(shard_id, parents, start, end)


def test_split_creates_both_children_at_trim_horizon() -> None:
    parent = Lease("D", SHARD_END, lease_owner="me", lease_counter=9)
    decision = child_leases_at_shard_end(
        parent,
        [child("E", "D", end=Q), child("F", "D", start=Q + 1)],
        existing_lease_keys={"D"},
        rng=NEVER_GIVE_UP,
    )
    assert decision.action is ShardEndAction.PROCEED
    assert decision.child_shard_ids == {"E", "F"}
    assert decision.leases_to_create == (
        Lease(
            "E",
            TRIM_HORIZON,
            parent_shard_ids=frozenset({"D"}),
            starting_hash_key=0,
            ending_hash_key=Q,
            entity_type="LEASE",
        ),
        Lease(
            "F",
            TRIM_HORIZON,
            parent_shard_ids=frozenset({"D"}),
            starting_hash_key=Q + 1,
            ending_hash_key=MAX_HASH_KEY,
            entity_type="LEASE",
        ),
    )


def test_existing_child_leases_are_not_recreated() -> None:
    parent = Lease("D", SHARD_END)
    decision = child_leases_at_shard_end(
        parent, [child("E", "D"), child("F", "D")], existing_lease_keys={"D", "E"}, rng=NEVER_GIVE_UP
    )
    assert [lease.lease_key for lease in decision.leases_to_create] == ["F"]


@pytest.mark.parametrize(
    ("existing", "rng", "action", "creates"),
    [
        ({"A", "B"}, NEVER_GIVE_UP, ShardEndAction.PROCEED, ["C"]),
        (set(), NEVER_GIVE_UP, ShardEndAction.PROCEED, ["C"]),  # both absent is consistent too
        ({"A", "B", "C"}, NEVER_GIVE_UP, ShardEndAction.PROCEED, []),
        ({"A"}, NEVER_GIVE_UP, ShardEndAction.BACKOFF, []),
        ({"B"}, NEVER_GIVE_UP, ShardEndAction.BACKOFF, []),
        ({"A"}, GIVE_UP, ShardEndAction.DROP_LEASE, []),
    ],
)
def test_merge_needs_both_parent_leases_or_neither(
    existing: set[str], rng: random.Random, action: ShardEndAction, creates: list[str]
) -> None:
    decision = child_leases_at_shard_end(
        Lease("A", SHARD_END), [child("C", "A", "B")], existing_lease_keys=existing, rng=rng
    )
    assert decision.action is action
    assert [lease.lease_key for lease in decision.leases_to_create] == creates
    if action is not ShardEndAction.PROCEED:
        assert "partial parent information" in decision.reason


def test_merge_backoff_gives_up_about_one_time_in_thirty() -> None:
    rng = random.Random(42)
    actions = [
        child_leases_at_shard_end(
            Lease("A", SHARD_END), [child("C", "A", "B")], existing_lease_keys={"A"}, rng=rng
        ).action
        for _ in range(3000)
    ]
    assert 50 < actions.count(ShardEndAction.DROP_LEASE) < 150


def test_merge_child_listing_one_parent_drops_the_lease() -> None:
    decision = child_leases_at_shard_end(
        Lease("A", SHARD_END), [child("C", "A")], existing_lease_keys=set(), rng=NEVER_GIVE_UP
    )
    assert decision.action is ShardEndAction.DROP_LEASE
    assert "two parents" in decision.reason


def test_child_without_parents_drops_the_lease() -> None:
    decision = child_leases_at_shard_end(
        Lease("D", SHARD_END), [child("E"), child("F", "D")], existing_lease_keys=set(), rng=NEVER_GIVE_UP
    )
    assert decision.action is ShardEndAction.DROP_LEASE


def test_no_children_means_shard_gone_and_nothing_to_create() -> None:
    decision = child_leases_at_shard_end(
        Lease("D", SHARD_END), [], existing_lease_keys=set(), rng=NEVER_GIVE_UP
    )
    assert decision.action is ShardEndAction.PROCEED
    assert decision.leases_to_create == ()
    assert decision.child_shard_ids == frozenset()


def test_multi_stream_child_keys() -> None:
    stream = "123456789012:orders:1610000000"
    parent = Lease(f"{stream}:D", SHARD_END, stream_identifier=stream, stream_shard_id="D")
    decision = child_leases_at_shard_end(
        parent, [child("E", "D"), child("F", "D")], existing_lease_keys={f"{stream}:E"}, rng=NEVER_GIVE_UP
    )
    (lease,) = decision.leases_to_create
    assert (lease.lease_key, lease.stream_identifier, lease.shard_id) == (f"{stream}:F", stream, "F")
    assert decision.child_shard_ids == {"E", "F"}  # plain shard ids, even in multi-stream mode


# --- waiting on parents -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parents", "found", "blocked"),
    [
        ((), [], False),
        (("A",), [], False),  # a missing parent lease does not block
        (("A",), [("A", SHARD_END)], False),
        (("A",), [("A", TRIM_HORIZON)], True),
        (("A",), [("A", ExtendedSequenceNumber("123"))], True),
        (("A",), [("A", AT_TIMESTAMP)], True),
        (("A", "B"), [("A", SHARD_END), ("B", ExtendedSequenceNumber("9"))], True),
        (("A", "B"), [("A", SHARD_END)], False),
        (("A",), [("unrelated", TRIM_HORIZON)], False),
    ],
)
def test_parents_block(
    parents: tuple[str, ...], found: list[tuple[str, ExtendedSequenceNumber]], blocked: bool
) -> None:
    child_lease = Lease("C", TRIM_HORIZON, parent_shard_ids=frozenset(parents))
    decision = parents_block(child_lease, [Lease(k, checkpoint) for k, checkpoint in found])
    assert decision.blocked is blocked
    if blocked:
        assert decision.blocking_parents
        assert "SHARD_END" in decision.reason


def test_parents_block_uses_multi_stream_parent_keys() -> None:
    stream = "123456789012:orders:1610000000"
    child_lease = Lease(f"{stream}:C", TRIM_HORIZON, parent_shard_ids=frozenset({"A"}))
    assert parents_block(child_lease, [Lease(f"{stream}:A", LATEST)]).blocked
    assert not parents_block(child_lease, [Lease("A", LATEST)]).blocked  # another stream's key space


# --- properties over random stream histories ----------------------------------------------------------


@st.composite
def histories(draw: st.DrawFn) -> list[Shard]:
    """A consistent stream history: some initial shards, then random splits and adjacent merges."""
    initial = draw(st.integers(1, 4))
    cuts = sorted(draw(st.sets(st.integers(1, MAX_HASH_KEY), min_size=initial - 1, max_size=initial - 1)))
    bounds = [0, *cuts, MAX_HASH_KEY + 1]
    shards: dict[str, Shard] = {}
    open_ids: list[str] = []  # in hash-key order
    seq = 100

    def new(parents: tuple[str, ...], start: int, end: int) -> str:
        shard_id = f"shardId-{len(shards):012d}"
        shards[shard_id] = shard(shard_id, start, end, seq + draw(st.integers(0, 3)), parents=parents)
        return shard_id

    for i in range(initial):
        open_ids.append(new((), bounds[i], bounds[i + 1] - 1))
    for _ in range(draw(st.integers(0, 8))):
        seq += 10
        if draw(st.booleans()) and len(open_ids) >= 2:
            j = draw(st.integers(0, len(open_ids) - 2))
            left, right = shards[open_ids[j]], shards[open_ids[j + 1]]
            for closing in (left, right):
                shards[closing.shard_id] = replace(closing, ending_sequence_number=seq - 1)
            merged = new((left.shard_id, right.shard_id), left.starting_hash_key, right.ending_hash_key)
            open_ids[j : j + 2] = [merged]
        else:
            splittable = [
                j for j, s in enumerate(open_ids) if shards[s].ending_hash_key > shards[s].starting_hash_key
            ]
            if not splittable:
                continue
            j = draw(st.sampled_from(splittable))
            old = shards[open_ids[j]]
            at = draw(st.integers(old.starting_hash_key + 1, old.ending_hash_key))
            shards[old.shard_id] = replace(old, ending_sequence_number=seq - 1)
            open_ids[j : j + 1] = [
                new((old.shard_id,), old.starting_hash_key, at - 1),
                new((old.shard_id,), at, old.ending_hash_key),
            ]
    return draw(st.permutations(list(shards.values())))


positions = st.sampled_from([Sentinel.TRIM_HORIZON, Sentinel.LATEST, Sentinel.AT_TIMESTAMP])


def process_to_the_tip(shards: list[Shard], leased_ids: set[str]) -> set[str]:
    """Every leased closed shard eventually reaches SHARD_END and creates its children's leases (6.4)."""
    by_id = {s.shard_id: s for s in shards}
    children: dict[str, list[ChildShard]] = {s.shard_id: [] for s in shards}
    for s in shards:
        for parent in s.parent_shard_ids:
            children[parent].append(
                ChildShard(s.shard_id, s.parent_shard_ids, s.starting_hash_key, s.ending_hash_key)
            )
    leased_ids = set(leased_ids)
    ended: set[str] = set()
    progress = True
    while progress:
        progress = False
        for shard_id in sorted(leased_ids - ended):
            if by_id[shard_id].is_open:
                continue
            decision = child_leases_at_shard_end(
                Lease(shard_id, SHARD_END),
                children[shard_id],
                existing_lease_keys=leased_ids,
                rng=NEVER_GIVE_UP,
            )
            if decision.action is ShardEndAction.PROCEED:
                leased_ids |= {lease.lease_key for lease in decision.leases_to_create}
                ended.add(shard_id)
                progress = True
    return leased_ids


@settings(max_examples=examples(200), deadline=None)
@given(histories(), positions, st.data())
def test_sync_properties(shards: list[Shard], position: Sentinel, data: st.DataObject) -> None:
    ids = sorted(s.shard_id for s in shards)
    existing_ids = data.draw(st.sets(st.sampled_from(ids)), label="existing leases")
    result = sync(shards, leased(*existing_ids), position)
    by_id = {s.shard_id: s for s in shards}
    new_ids = [lease.lease_key for lease in result]

    assert hash_range_is_complete([s for s in shards if s.is_open])
    # Creation order, no duplicates, nothing that already has a lease, fresh leases only.
    assert new_ids == sorted(new_ids, key=lambda i: (by_id[i].starting_sequence_number, i))
    assert len(set(new_ids)) == len(new_ids)
    assert not set(new_ids) & existing_ids
    for lease in result:
        assert (lease.lease_owner, lease.lease_counter, lease.entity_type) == (None, 0, "LEASE")
        assert lease.checkpoint == ExtendedSequenceNumber(position)
        assert lease.parent_shard_ids == set(by_id[lease.lease_key].parent_shard_ids)
    # No child is leased together with, or after, a parent that has (or gets) a lease.
    all_leased = existing_ids | set(new_ids)
    for shard_id in new_ids:
        assert not set(by_id[shard_id].parent_shard_ids) & all_leased
    # Every open shard's history is covered: processing to the tip leases every open shard.
    reached = process_to_the_tip(shards, all_leased)
    assert {s.shard_id for s in shards if s.is_open} <= reached
    # Input order does not matter.
    assert sync(list(reversed(shards)), leased(*existing_ids), position) == result


@settings(max_examples=examples(100), deadline=None)
@given(histories(), positions)
def test_history_from_scratch(shards: list[Shard], position: Sentinel) -> None:
    """A table with none of this stream's leases: from the oldest position the whole history is read,
    from LATEST exactly the open shards are leased."""
    result = sync(shards, [], position)
    if position is Sentinel.LATEST:
        assert {lease.lease_key for lease in result} == {s.shard_id for s in shards if s.is_open}
    else:
        roots = {s.shard_id for s in shards if not s.parent_shard_ids}
        assert {lease.lease_key for lease in result} == roots
        assert process_to_the_tip(shards, roots) == {s.shard_id for s in shards}


# A split into B and C, then C merged with D into E: the filter we apply for emulators that ignore it.
GENERATIONS = [
    shard("A", 0, 4 * Q - 1, 1, ended=50),
    shard("B", 0, 2 * Q - 1, 60, parents=("A",)),
    shard("C", 2 * Q, 4 * Q - 1, 60, parents=("A",), ended=90),
    shard("D", 4 * Q, MAX_HASH_KEY, 2, ended=90),
    shard("E", 2 * Q, MAX_HASH_KEY, 95, parents=("C", "D")),
]


@pytest.mark.parametrize(
    ("position", "expected"),
    [
        (Sentinel.LATEST, ["B", "E"]),
        (Sentinel.TRIM_HORIZON, ["A", "D"]),
        (Sentinel.AT_TIMESTAMP, ["A", "D"]),
    ],
)
def test_shards_at_initial_position_cover_the_range_from_the_right_generation(
    position: Sentinel, expected: list[str]
) -> None:
    chosen = shards_at_initial_position(GENERATIONS, position)
    assert [s.shard_id for s in chosen] == expected
    assert hash_range_is_complete(chosen)


@given(st.permutations(GENERATIONS), st.sampled_from(sorted(INITIAL_POSITIONS)))
def test_filtering_an_already_filtered_list_changes_nothing(shards: list[Shard], position: Sentinel) -> None:
    once = shards_at_initial_position(shards, position)
    assert shards_at_initial_position(once, position) == once
