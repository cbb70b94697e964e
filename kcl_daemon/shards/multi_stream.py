"""Shard sync for several streams in one lease table (``streamNames``; contract §3.2 multi-stream leases).

Every sync: each configured stream's identity is looked up (DescribeStreamSummary); a stream that
exists gets a shard sync of its own (:class:`ShardSyncer` with the stream's identity and initial
position), so its leases are keyed ``account:stream:epoch:shardId`` and carry the ``streamName`` and
``shardId`` attributes Java writes. A listed stream that does not exist yet is skipped and picked up by a
later sync once it is created. Leases of former streams (deleted, re-created with a new creation
epoch, or no longer listed) are deleted after ``former_streams_leases_deletion_wait_s``
(:func:`kcl_daemon.core.shards.multi_stream.former_streams_due`); a stream whose lookup failed for another
reason stops that check for the round, so an outage never looks like a deletion.

One stream's failure does not stop the others: it is logged and retried at the next sync.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol, TypeVar

from kcl_daemon.clock import Clock
from kcl_daemon.core.leases.lease_codec import ScanResultLike
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.shards.multi_stream import StreamSpec, former_streams_due
from kcl_daemon.core.stream_identity import StreamIdentity
from kcl_daemon.errors import KclError
from kcl_daemon.metrics.observer import NULL_WORKER_OBSERVER, WorkerObserver
from kcl_daemon.retry import KINESIS
from kcl_daemon.shards.sync import LeaseCreator, ShardLister, ShardSyncConfig, ShardSyncer, SyncResult

logger = logging.getLogger(__name__)
T = TypeVar("T")


class LeaseTable(LeaseCreator, Protocol):
    def list_leases(self) -> ScanResultLike: ...

    def delete(self, lease_key: str) -> None: ...


#: stream name -> its identity now, or None when it does not exist; raises KclError on other failures
IdentityLookup = Callable[[str], StreamIdentity | None]


@dataclass(frozen=True, slots=True)
class MultiStreamSyncConfig:
    streams: tuple[StreamSpec, ...]
    #: the application's sync settings; stream name, identity and initial position are set per stream
    base: ShardSyncConfig
    former_streams_wait_s: float = 3600.0


class MultiStreamSyncer:
    """Same interface as :class:`ShardSyncer` (``sync_once``, ``run``), for every configured stream."""

    def __init__(
        self,
        kinesis: ShardLister,
        table: LeaseTable,
        config: MultiStreamSyncConfig,
        clock: Clock,
        identity_of: IdentityLookup,
        *,
        pool: ThreadPoolExecutor | None = None,
    ) -> None:
        self.config = dataclasses.replace(config.base, stream_name=",".join(s.name for s in config.streams))
        self.streams = config.streams
        #: stream name -> identity, as last looked up (None: the stream did not exist)
        self.identities: dict[str, StreamIdentity | None] = {}
        self.last_results: dict[str, SyncResult] = {}
        self.deleted_leases: list[str] = []
        #: the worker's metrics (set by the scheduler): the shard count is the sum over the streams
        self.observer: WorkerObserver = NULL_WORKER_OBSERVER
        self._multi = config
        self._kinesis = kinesis
        self._table = table
        self._clock = clock
        self._identity_of = identity_of
        self._pool = pool or ThreadPoolExecutor(2, thread_name_prefix="shard-sync")
        self._syncers: dict[str, ShardSyncer] = {}
        self._first_seen_former: Mapping[str, float] = {}

    async def _call(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    def _syncer_for(self, spec: StreamSpec, identity: StreamIdentity) -> ShardSyncer:
        key = identity.serialize()
        syncer = self._syncers.get(key)
        if syncer is None:
            base = self._multi.base
            position, timestamp = spec.position_or(base.initial_position, base.initial_timestamp)
            config = dataclasses.replace(
                base,
                stream_name=spec.name,
                stream_identifier=key,
                initial_position=position,
                initial_timestamp=timestamp,
            )
            syncer = ShardSyncer(self._kinesis, self._table, config, self._clock, pool=self._pool)
            self._syncers[key] = syncer
        return syncer

    async def sync_once(self) -> Mapping[str, SyncResult]:
        """One sync of every stream, then the former-stream check; raises the first failure at the end."""
        failures: list[KclError] = []
        lookups_complete = True
        for spec in self.streams:
            try:
                identity = await self._call(functools.partial(KINESIS.call, self._identity_of, spec.name))
            except KclError as exc:
                lookups_complete = False
                failures.append(exc)
                logger.warning("stream %s: cannot look it up, will retry: %s", spec.name, exc)
                continue
            if identity is None and self.identities.get(spec.name) is not None:
                logger.warning("stream %s no longer exists; its leases are former-stream leases", spec.name)
            elif identity is None and spec.name not in self.identities:
                logger.info("stream %s does not exist (yet); it is picked up once it does", spec.name)
            self.identities[spec.name] = identity
            if identity is None:
                continue
            try:
                self.last_results[spec.name] = await self._syncer_for(spec, identity).sync_once()
            except KclError as exc:
                failures.append(exc)
                logger.warning("shard sync of stream %s failed, will retry: %s", spec.name, exc)
        existing = [result for name, result in self.last_results.items() if self.identities.get(name)]
        self.observer.shards_listed(sum(result.shard_count for result in existing))
        if lookups_complete:
            try:
                await self._delete_former_streams()
            except KclError as exc:
                failures.append(exc)
                logger.warning("former-stream lease cleanup failed, will retry: %s", exc)
        if failures:
            raise failures[0]
        return dict(self.last_results)

    async def _delete_former_streams(self) -> None:
        scan = await self._call(self._table.list_leases)
        current = [identity.serialize() for identity in self.identities.values() if identity is not None]
        decision = former_streams_due(
            (lease.stream for lease in scan.leases),
            current,
            self._first_seen_former,
            self._clock.monotonic(),
            self._multi.former_streams_wait_s,
        )
        for stream in sorted(set(decision.first_seen) - set(self._first_seen_former)):
            logger.info(
                "stream %s is a former stream; its leases are deleted in %.0fs unless it returns",
                stream,
                self._multi.former_streams_wait_s,
            )
        self._first_seen_former = decision.first_seen
        due = set(decision.delete)
        doomed: Sequence[str] = sorted(lease.lease_key for lease in scan.leases if lease.stream in due)
        for key in doomed:
            await self._call(functools.partial(self._table.delete, key))
            self.deleted_leases.append(key)
        if doomed:
            logger.info("deleted %d lease(s) of former stream(s) %s", len(doomed), " ".join(sorted(due)))

    async def run(self, *, first_delay_s: float = 0.0) -> None:
        """Sync after ``first_delay_s`` and then every ``interval_s``; failures are logged and retried."""
        await self._clock.sleep(first_delay_s)
        while True:
            try:
                await self.sync_once()
            except KclError as exc:
                logger.warning("multi-stream shard sync failed, will retry: %s", exc)
            await self._clock.sleep(self.config.interval_s)


def shards_by_lease_key(
    kinesis: ShardLister, identity_of: IdentityLookup, streams: Sequence[StreamSpec]
) -> list[Shard]:
    """For ``kcl-daemon leases``: every configured stream's shards, each named by its multi-stream lease
    key (``account:stream:epoch:shardId``), so they compare with the table's lease keys."""
    shards: list[Shard] = []
    for spec in streams:
        identity = KINESIS.call(identity_of, spec.name)
        if identity is None:
            continue
        listed = KINESIS.call(kinesis.list_shards, spec.name)
        shards.extend(dataclasses.replace(s, shard_id=identity.lease_key(s.shard_id)) for s in listed)
    return shards
