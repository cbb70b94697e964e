"""Creates the leases a stream's shards call for: at start and every ``shardSyncIntervalMillis``
(contract §6).

The shell around :func:`kcl_daemon.core.shards.graph.leases_to_create`:

* empty lease table (6.2): ListShards filtered at the initial position (the filter is applied again on
  our side, since moto and kinesalite ignore it), the hash range must be complete (3 more tries, 1 s
  apart), then one lease per shard;
* otherwise (6.3): the full shard list and the existing leases decide which open shards need a lease.

Every create is conditional, so workers racing each other are harmless: a lease that already exists is
counted, not an error. Unlike Java, every worker syncs (there is no leader in 2.x mode) and there is no
random 1-30 s wait before the first sync: with conditional creates a race only costs a few reads.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

from kcl_daemon.aws.kinesis import ShardFilter, ShardFilterType
from kcl_daemon.clock import Clock
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import ScanResultLike
from kcl_daemon.core.sequence import Sentinel
from kcl_daemon.core.shards.graph import (
    InconsistentShards,
    Shard,
    hash_range_is_complete,
    leases_to_create,
    shards_at_initial_position,
)
from kcl_daemon.errors import KclError
from kcl_daemon.metrics.observer import NULL_WORKER_OBSERVER, WorkerObserver
from kcl_daemon.retry import KINESIS

logger = logging.getLogger(__name__)
T = TypeVar("T")


class ShardLister(Protocol):
    def list_shards(self, stream_name: str, shard_filter: ShardFilter | None = None) -> list[Shard]: ...


class LeaseCreator(Protocol):
    def list_leases(self) -> ScanResultLike: ...

    def create_lease(self, lease: Lease) -> bool: ...


class ShardListInconsistent(KclError):
    """ListShards showed children of open parents (it raced a reshard); the next sync retries."""

    retriable = True


class IncompleteHashRange(KclError):
    """The shards ListShards returned do not cover the whole hash-key range; retried at the next sync."""

    retriable = True


@dataclass(frozen=True, slots=True)
class ShardSyncConfig:
    stream_name: str
    initial_position: Sentinel = Sentinel.LATEST
    initial_timestamp: datetime | None = None
    ignore_unexpected_child_shards: bool = False
    interval_s: float = 60.0
    incomplete_retries: int = 3
    incomplete_retry_delay_s: float = 1.0
    #: multi-stream: the stream's ``account:stream:epoch``; only its leases count, new ones carry it
    stream_identifier: str | None = None


@dataclass(frozen=True, slots=True)
class SyncResult:
    empty_table: bool
    shard_count: int
    created: tuple[str, ...]
    already_existed: tuple[str, ...]


def _filter_for(config: ShardSyncConfig) -> ShardFilter:
    match config.initial_position:
        case Sentinel.TRIM_HORIZON:
            return ShardFilter(ShardFilterType.AT_TRIM_HORIZON)
        case Sentinel.AT_TIMESTAMP:
            return ShardFilter(ShardFilterType.AT_TIMESTAMP, timestamp=config.initial_timestamp)
        case _:
            return ShardFilter(ShardFilterType.AT_LATEST)


class ShardSyncer:
    def __init__(
        self,
        kinesis: ShardLister,
        table: LeaseCreator,
        config: ShardSyncConfig,
        clock: Clock,
        *,
        pool: ThreadPoolExecutor | None = None,
    ) -> None:
        self.config = config
        self.last_result: SyncResult | None = None
        #: Told the shard count of each sync (kcl_daemon.metrics); does nothing by default.
        self.observer: WorkerObserver = NULL_WORKER_OBSERVER
        self._kinesis = kinesis
        self._table = table
        self._clock = clock
        self._pool = pool or ThreadPoolExecutor(2, thread_name_prefix="shard-sync")

    async def _call(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    async def _list(self, shard_filter: ShardFilter | None) -> list[Shard]:
        name = self.config.stream_name
        return await self._call(lambda: KINESIS.call(self._kinesis.list_shards, name, shard_filter))

    async def _initial_shards(self) -> list[Shard]:
        """contract §6.2 steps 1-2: the shards at the initial position, once they cover the hash range."""
        for attempt in range(self.config.incomplete_retries + 1):
            listed = await self._list(_filter_for(self.config))
            shards = shards_at_initial_position(listed, self.config.initial_position)
            if hash_range_is_complete(shards):
                return shards
            if attempt < self.config.incomplete_retries:
                await self._clock.sleep(self.config.incomplete_retry_delay_s)
        raise IncompleteHashRange(
            f"stream {self.config.stream_name}: the {len(shards)} shards at "
            f"{self.config.initial_position} do not cover the whole hash-key range"
        )

    async def sync_once(self) -> SyncResult:
        """One shard sync; raises :class:`KclError` (AWS failures, incomplete range, inconsistent shards)."""
        scan = await self._call(self._table.list_leases)
        stream = self.config.stream_identifier
        if stream is None:
            empty = not scan.leases and not scan.skipped
        else:  # multi-stream: a stream without leases yet starts at its initial position (Java)
            empty = not any(lease.stream == stream for lease in scan.leases)
        shards = await self._initial_shards() if empty else await self._list(None)
        try:
            new_leases = leases_to_create(
                shards,
                scan.leases,
                self.config.initial_position,
                empty_table=empty,
                ignore_unexpected_child_shards=self.config.ignore_unexpected_child_shards,
                stream_identifier=stream,
            )
        except InconsistentShards as exc:
            raise ShardListInconsistent(str(exc)) from exc
        created: list[str] = []
        existed: list[str] = []
        for lease in new_leases:  # in creation order: a crash leaves older shards created first
            if await self._call(functools.partial(self._table.create_lease, lease)):
                created.append(lease.lease_key)
            else:
                existed.append(lease.lease_key)
        result = SyncResult(empty, len(shards), tuple(created), tuple(existed))
        self.observer.shards_listed(len(shards))
        if created:
            logger.info(
                "shard sync of %s created %d lease(s) at %s: %s",
                self.config.stream_name,
                len(created),
                self.config.initial_position,
                " ".join(created),
            )
        self.last_result = result
        return result

    async def run(self, *, first_delay_s: float = 0.0) -> None:
        """Sync after ``first_delay_s`` and then every ``interval_s``; failures are logged and retried."""
        await self._clock.sleep(first_delay_s)
        while True:
            try:
                await self.sync_once()
            except KclError as exc:
                logger.warning("shard sync of %s failed, will retry: %s", self.config.stream_name, exc)
            await self._clock.sleep(self.config.interval_s)
