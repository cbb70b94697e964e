"""What the daemon reports, as two small interfaces, and their do-nothing versions.

The shard consumer and the lease coordinator call these; they never import a metrics library. Counts
are reported per batch (one call for a whole GetRecords page), never per record, so metrics cost little.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kcl_daemon.core.leases.lease import Lease

#: A metric's dimensions: (name, value) pairs.
Dims = tuple[tuple[str, str], ...]


class ShardObserver(Protocol):
    """One shard's consumer."""

    def batch(
        self, records: int, payload_bytes: int, millis_behind_latest: int | None, age_ms: float
    ) -> None:
        """A batch was delivered; ``age_ms`` is how old its last record was (now - arrival)."""

    def action_done(self, action: str, seconds: float) -> None:
        """The child answered ``action`` after ``seconds``."""

    def checkpoint(self, seconds: float) -> None:
        """A checkpoint was written; the write took ``seconds`` (retries included)."""

    def child_restart(self) -> None: ...

    def parked(self) -> None: ...

    def poison(self, event: str, count: int = 1) -> None:
        """Poison-record bookkeeping (docs/failures.md): ``exception`` (the wrapper swallowed one),
        ``failed_delivery``, ``redelivered`` (records sent again by a retry or the bisection),
        ``skipped``, ``dead_lettered``, ``dead_letter_write_failed``."""

    def child_log(self, level_name: str) -> None:
        """The child logged a line on its channel (the line itself is logged, not counted here)."""

    def child_metric(
        self, name: str, value: float, unit: str, dimensions: tuple[tuple[str, str], ...]
    ) -> None:
        """The child sent a valid metric."""

    def channel_dropped(self, reason: str) -> None:
        """A channel line was dropped: invalid, rate_limited or cardinality."""

    def closed(self) -> None:
        """The consumer stopped: per-shard gauges of this worker go away."""


class WorkerObserver(Protocol):
    """One worker's lease coordinator and shard sync."""

    def lease_taken(self, kind: str) -> None:
        """``kind``: available, priority or steal (2.x taker), assigned (adopted from the 3.x leader)."""

    def lease_lost(self) -> None: ...

    def lease_handed_off(self) -> None:
        """Released on purpose (graceful shutdown), so another worker takes it at once."""

    def renewed(self, seconds: float) -> None: ...

    def renew_failed(self) -> None: ...

    def scanned(self, leases: Sequence[Lease], expired_keys: frozenset[str]) -> None:
        """A full lease-table scan (the taker's), with the leases this worker sees as expired."""

    def shards_listed(self, shard_count: int) -> None: ...

    def incompatible_layout_workers(self, count: int) -> None:
        """Live workers of a table layout this application cannot share its table with (layout check)."""


class NullShardObserver:
    def batch(
        self, records: int, payload_bytes: int, millis_behind_latest: int | None, age_ms: float
    ) -> None:
        pass

    def action_done(self, action: str, seconds: float) -> None:
        pass

    def checkpoint(self, seconds: float) -> None:
        pass

    def child_restart(self) -> None:
        pass

    def parked(self) -> None:
        pass

    def poison(self, event: str, count: int = 1) -> None:
        pass

    def child_log(self, level_name: str) -> None:
        pass

    def child_metric(
        self, name: str, value: float, unit: str, dimensions: tuple[tuple[str, str], ...]
    ) -> None:
        pass

    def channel_dropped(self, reason: str) -> None:
        pass

    def closed(self) -> None:
        pass


class NullWorkerObserver:
    def lease_taken(self, kind: str) -> None:
        pass

    def lease_lost(self) -> None:
        pass

    def lease_handed_off(self) -> None:
        pass

    def renewed(self, seconds: float) -> None:
        pass

    def renew_failed(self) -> None:
        pass

    def scanned(self, leases: Sequence[Lease], expired_keys: frozenset[str]) -> None:
        pass

    def shards_listed(self, shard_count: int) -> None:
        pass

    def incompatible_layout_workers(self, count: int) -> None:
        pass


NULL_SHARD_OBSERVER = NullShardObserver()
NULL_WORKER_OBSERVER = NullWorkerObserver()


def no_shard_observer(_shard_id: str) -> ShardObserver:
    """The shard observer factory when metrics are off."""
    return NULL_SHARD_OBSERVER
