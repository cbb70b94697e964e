"""ListShards of a stream, listed once for the shard sources a worker makes at once (``RecentListings``)."""

from __future__ import annotations

import threading

from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.clock import Clock
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.retry import KINESIS


class RecentListings:
    """ListShards of a stream, shared by the shard sources created within ``max_age_s`` of one another.

    Every new shard source looks its shard up in a listing (is it closed, where does it end). A worker
    that starts with 256 leases would otherwise list the whole stream 256 times at once, parsing
    256 x 256 shards; one listing serves them all. A listing a few seconds old is as good for this as a
    fresh one: a shard that closed since is found closed by the reader itself (its last GetRecords
    page), which lists the shards again then. Thread-safe: the sources are made on the lease-io pool.
    """

    def __init__(self, kinesis: Kinesis, clock: Clock, max_age_s: float = 5.0) -> None:
        self._kinesis = kinesis
        self._clock = clock
        self._max_age_s = max_age_s
        self._lock = threading.Lock()
        self._listings: dict[str, tuple[float, dict[str, Shard]]] = {}

    def shards(self, stream_name: str) -> dict[str, Shard]:
        """The stream's shards by id, listed at most ``max_age_s`` ago; ListShards errors propagate."""
        with self._lock:  # one listing at a time: the threads that wait get the one just made
            cached = self._listings.get(stream_name)
            now = self._clock.monotonic()
            if cached is not None and now - cached[0] <= self._max_age_s:
                return cached[1]
            listed = {s.shard_id: s for s in KINESIS.call(self._kinesis.list_shards, stream_name)}
            self._listings[stream_name] = (self._clock.monotonic(), listed)
            return listed
