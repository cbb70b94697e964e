"""Where records go: effective hash keys and the open shard that holds one."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.shards.hash_keys import HashKeyMap, effective_hash_key

MAX = 2**128 - 1


def test_the_map_looks_up_open_shards_only() -> None:
    shards = [
        Shard("closed", starting_hash_key=0, ending_hash_key=MAX, ending_sequence_number=5),
        Shard("low", parent_shard_id="closed", starting_hash_key=0, ending_hash_key=99),
        Shard("high", parent_shard_id="closed", starting_hash_key=100, ending_hash_key=MAX),
    ]
    found = HashKeyMap(shards)
    assert found.shard_for(0) is not None and found.shard_for(0).shard_id == "low"  # type: ignore[union-attr]
    assert found.shard_for(99).shard_id == "low"  # type: ignore[union-attr]
    assert found.shard_for(100).shard_id == "high"  # type: ignore[union-attr]
    assert HashKeyMap([Shard("mid", starting_hash_key=10, ending_hash_key=20)]).shard_for(5) is None


@given(st.lists(st.integers(1, MAX), max_size=10, unique=True), st.integers(0, MAX))
def test_every_hash_key_has_exactly_one_shard_of_a_tiling(cuts: list[int], key: int) -> None:
    bounds = [0, *sorted(cuts), MAX + 1]
    shards = [
        Shard(f"s{i}", starting_hash_key=lo, ending_hash_key=hi - 1)
        for i, (lo, hi) in enumerate(itertools.pairwise(bounds))
    ]
    found = HashKeyMap(shards).shard_for(key)
    assert found is not None and found.starting_hash_key <= key <= found.ending_hash_key


def test_explicit_hash_keys_win_over_partition_keys() -> None:
    assert effective_hash_key("any", 7) == 7
    assert effective_hash_key("a", None) == int("0cc175b9c0f1b6a831c399e269772661", 16)
