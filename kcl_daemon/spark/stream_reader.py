"""What both streaming readers (``readMode=executor`` and ``readMode=driver``) share on the driver: the
shard listing, cached for ``shardDiscoveryIntervalMs``; the offset a new query starts from; joining the
fleet's lease table; Spark's default read limit; and the AvailableNow cut-off."""

from __future__ import annotations

import time
from collections.abc import Mapping

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.spark.offsets import ShardPos, SourceOffset, initial_offset
from kcl_daemon.retry import KINESIS
from kcl_daemon.spark.clients import kinesis_for, lease_table_for
from kcl_daemon.spark.handover import owner_of
from kcl_daemon.spark.lease_bridge import LeaseBridge
from kcl_daemon.spark.options import SourceOptions


def now_ms() -> int:
    return int(time.time() * 1000)


def new_bridge(options: SourceOptions) -> LeaseBridge:
    """This query's membership of the fleet whose lease table ``leaseTableName`` names."""
    return LeaseBridge(
        lease_table_for(options),
        owner_of(options),
        failover_s=options.lease_failover_s,
        wait_timeout_s=options.lease_wait_timeout_s,
    )


class StreamReaderBase(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._cutoff_ms: int | None = None
        self._listing: list[Shard] = []
        self._listed_at: float | None = None

    def _shards(self, *, fresh: bool = False) -> list[Shard]:
        now = time.monotonic()
        if (
            fresh
            or self._listed_at is None
            or now - self._listed_at >= self.options.shard_discovery_interval_s
        ):
            self._listing = KINESIS.call(kinesis_for(self.options).list_shards, self.options.stream_name)
            self._listed_at = now
        return self._listing

    def _starting_offset(
        self, lease_positions: Mapping[str, ShardPos] | None, listing: list[Shard] | None = None
    ) -> SourceOffset:
        """Where a new query starts: the fleet's checkpoints (``lease_positions`` from joining its lease
        table, if any), else the configured starting position, over a fresh shard listing (``listing``
        when the caller has just taken one)."""
        return initial_offset(
            self.options.stream_name,
            self._shards(fresh=True) if listing is None else listing,
            self.options.starting_position,
            now_ms(),
            lease_positions=lease_positions,
            fallback=self.options.lease_fallback_position,
        )

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_records_per_batch is not None:
            return ReadMaxRows(self.options.max_records_per_batch)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._cutoff_ms = now_ms()
