"""What the scheduler needs from its lease table and its shard sync, as small protocols.

Each is the union of the narrower protocols its parts own (the coordinator's, the sync's, the cleaner's and
the shard tasks'): the DynamoDB lease table implements them in production, fakes in the tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import ScanResultLike
from kcl_daemon.leases.coordinator import LeaseTableOps
from kcl_daemon.lifecycle.shard_task import LeaseReads
from kcl_daemon.metrics.observer import WorkerObserver
from kcl_daemon.shards.cleanup import CleanupTableOps
from kcl_daemon.shards.sync import SyncResult


class SchedulerTable(LeaseTableOps, CleanupTableOps, LeaseReads, Protocol):
    """The lease table as the scheduler and its parts use it (synchronous; run on thread pools)."""

    def create_table_if_missing(self) -> bool: ...

    def list_leases(self, *, consistent: bool = False) -> ScanResultLike: ...

    def create_lease(self, lease: Lease) -> bool: ...


class Syncer(Protocol):
    """The periodic shard sync: one stream's :class:`~kcl_daemon.shards.sync.ShardSyncer` or several
    streams' :class:`~kcl_daemon.shards.multi_stream.MultiStreamSyncer`."""

    observer: WorkerObserver

    async def sync_once(self) -> SyncResult | Mapping[str, SyncResult]: ...

    async def run(self, *, first_delay_s: float = 0.0) -> None: ...
