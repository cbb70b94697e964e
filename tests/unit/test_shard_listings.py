"""One ListShards serves every shard source made within a few seconds (shards.listings.RecentListings)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.errors import DependencyUnavailable
from kcl_daemon.shards.listings import RecentListings
from tests.support.clocks import FakeClock


class _Kinesis:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail = False
        self._lock = threading.Lock()

    def list_shards(self, stream_name: str) -> list[Shard]:
        with self._lock:
            self.calls.append(stream_name)
        if self.fail:
            raise DependencyUnavailable(f"stream {stream_name} is gone")
        return [Shard(f"shardId-{i:012d}") for i in range(3)]


def test_sources_made_together_share_one_listing_per_stream() -> None:
    kinesis, clock = _Kinesis(), FakeClock(100.0)
    listings = RecentListings(kinesis, clock, max_age_s=5.0)  # type: ignore[arg-type]
    with ThreadPoolExecutor(8) as pool:
        results: list[Any] = list(pool.map(lambda _: listings.shards("a"), range(64)))
    assert kinesis.calls == ["a"]
    assert all(result is results[0] for result in results)
    assert sorted(results[0]) == [f"shardId-{i:012d}" for i in range(3)]
    listings.shards("b")
    clock.now += 5.0
    listings.shards("a")
    assert kinesis.calls == ["a", "b"]  # still fresh at exactly max_age_s
    clock.now += 0.1
    listings.shards("a")
    assert kinesis.calls == ["a", "b", "a"]


def test_a_failed_listing_is_not_kept() -> None:
    kinesis, clock = _Kinesis(), FakeClock()
    listings = RecentListings(kinesis, clock)  # type: ignore[arg-type]
    kinesis.fail = True
    with pytest.raises(DependencyUnavailable):
        listings.shards("a")
    kinesis.fail = False
    assert len(listings.shards("a")) == 3
    assert kinesis.calls == ["a", "a"]
