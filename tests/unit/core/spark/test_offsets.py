"""The Spark source's positions and the driver-read mode's offsets: canonical JSON, shard tracking,
budgets (pure)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.sequence import SHARD_END
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.spark.offsets import (
    AT_SHARD_END,
    AT_TRIM_HORIZON,
    BadOffset,
    ShardPos,
    SourceOffset,
    StartingPosition,
    StartKind,
    after,
    at_timestamp,
    group_ranges,
    initial_offset,
    readable_shards,
    shard_ranges,
    split_budget,
    track_new_shards,
)

# -- offsets -----------------------------------------------------------------------------------

positions = st.one_of(
    st.just(AT_TRIM_HORIZON),
    st.just(AT_SHARD_END),
    st.integers(0, 2**64).map(at_timestamp),
    st.tuples(st.integers(0, 10**56), st.integers(0, 1000)).map(lambda t: after(str(t[0]), t[1])),
)
offsets = st.dictionaries(st.from_regex(r"shardId-[0-9]{12}", fullmatch=True), positions, max_size=8).map(
    lambda shards: SourceOffset("stream", shards)
)


@given(offsets)
def test_offsets_round_trip_and_serialise_canonically(offset: SourceOffset) -> None:
    text = json.dumps(offset.to_json())
    assert SourceOffset.from_json(json.loads(text)) == offset
    shuffled = SourceOffset(offset.stream, dict(reversed(list(offset.shards.items()))))
    assert json.dumps(shuffled.to_json()) == text  # Spark compares offsets as strings


def test_a_foreign_offset_is_refused() -> None:
    with pytest.raises(BadOffset, match="version"):
        SourceOffset.from_json({"shards": {}})
    with pytest.raises(BadOffset, match="malformed"):
        SourceOffset.from_json({"v": 1, "stream": "s", "shards": {"a": {"seq": 5}}})


def split_world() -> list[Shard]:
    """shard 0 split into 2 and 3; 1 and 3 merged into 4; 2 still open."""
    return [
        Shard("s0", ending_sequence_number=10),
        Shard("s1", ending_sequence_number=20),
        Shard("s2", parent_shard_id="s0"),
        Shard("s3", parent_shard_id="s0", ending_sequence_number=30),
        Shard("s4", parent_shard_id="s1", adjacent_parent_shard_id="s3"),
    ]


def test_initial_offset_by_starting_position() -> None:
    shards = split_world()
    trim = initial_offset("st", shards, StartingPosition(StartKind.TRIM_HORIZON), 0)
    assert set(trim.shards) == {"s0", "s1", "s2", "s3", "s4"}
    latest = initial_offset("st", shards, StartingPosition(StartKind.LATEST), 1234)
    assert latest.shards == {"s2": at_timestamp(1234), "s4": at_timestamp(1234)}


def test_initial_offset_from_the_lease_table() -> None:
    shards = split_world()
    leases = {"s0": ShardPos(SHARD_END), "s1": after("15", 2), "s3": after("25")}
    offset = initial_offset("st", shards, StartingPosition(StartKind.LEASE_TABLE), 0, lease_positions=leases)
    # leased shards at their checkpoints (sub-sequence kept), children of leased shards from the start
    assert offset.shards == {
        "s0": AT_SHARD_END,
        "s1": after("15", 2),
        "s2": AT_TRIM_HORIZON,
        "s3": after("25"),
        "s4": AT_TRIM_HORIZON,
    }


def test_children_wait_until_every_parent_is_at_shard_end_in_the_start_offset() -> None:
    shards = split_world()
    start = SourceOffset("st", {"s0": after("5"), "s1": after("15")})
    tracked = track_new_shards(start, shards)
    assert set(tracked.shards) == {"s0", "s1", "s2", "s3", "s4"}
    assert readable_shards(start, tracked, shards) == ["s0", "s1"]
    start = SourceOffset("st", {**tracked.shards, "s0": AT_SHARD_END})
    assert readable_shards(start, start, shards) == ["s1", "s2", "s3"]  # s4 waits for s1 and s3
    start = SourceOffset("st", {**start.shards, "s1": AT_SHARD_END, "s3": AT_SHARD_END})
    assert readable_shards(start, start, shards) == ["s2", "s4"]


def test_finished_shards_that_are_no_longer_listed_are_dropped() -> None:
    start = SourceOffset("st", {"gone": AT_SHARD_END, "s2": after("3")})
    assert set(track_new_shards(start, [Shard("s2")]).shards) == {"s2"}


@given(st.integers(1, 10_000), st.integers(1, 5_000), st.integers(1, 20))
def test_the_budget_never_exceeds_the_limit_or_the_cap(max_rows: int, cap: int, n: int) -> None:
    shards = [f"s{i}" for i in range(n)]
    budget = split_budget(max_rows, cap, shards)
    assert sum(budget.values()) <= max_rows
    assert all(0 <= b <= cap for b in budget.values())
    assert sum(budget.values()) == min(max_rows, cap * n) or max(budget.values()) == cap


def test_ranges_cover_moved_shards_and_group_by_shards_per_task() -> None:
    start = SourceOffset("st", {"a": after("1"), "b": after("2"), "c": after("3")})
    end = SourceOffset("st", {"a": after("9"), "b": after("2"), "c": AT_SHARD_END, "d": AT_TRIM_HORIZON})
    ranges = shard_ranges(start, end, {})
    assert [(r.shard_id, r.start, r.end) for r in ranges] == [
        ("a", after("1"), after("9")),
        ("c", after("3"), AT_SHARD_END),
    ]
    assert [len(g) for g in group_ranges(ranges * 3, 4)] == [4, 2]
    assert [len(g) for g in group_ranges(ranges, 1)] == [1, 1]


@given(st.integers(1, 50), st.integers(1, 20), st.integers(0, 100))
def test_a_rotated_split_gives_every_shard_its_turn(max_rows: int, n: int, rotate: int) -> None:
    shards = [f"s{i}" for i in range(n)]
    budget = split_budget(max_rows, 10**6, shards, rotate=rotate)
    assert sum(budget.values()) == max_rows
    assert max(budget.values()) - min(budget.values()) <= 1
    if max_rows % n:
        assert budget[shards[rotate % n]] == max_rows // n + 1  # the remainder starts at the rotation
