"""What the driver side hands Spark: the source's row schema and the task descriptions of executor reads.

Kept light on purpose: the driver's source runner (a new Python process for every query) imports this,
not the read paths (:mod:`kcl_daemon.spark.executor_read` and what it loads: pages, rows, KPL
de-aggregation, enhanced fan-out), which load only in the processes that run a task. A partition is
pickled with everything a read needs (clients are looked up per process, never pickled).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pyspark.sql.datasource import InputPartition

from kcl_daemon.aws.kinesis import GetRecordsResult
from kcl_daemon.core.spark.offsets import ShardPos
from kcl_daemon.spark.options import SourceOptions

#: The source's rows, as ``DataSource.schema`` gives them to Spark (the Arrow form: ``rows.ARROW_SCHEMA``).
SCHEMA_DDL: Final = (
    "stream string, shardId string, sequenceNumber string, subSequenceNumber long, partitionKey string, "
    "explicitHashKey string, approximateArrivalTimestamp timestamp, data binary"
)


@dataclass(frozen=True, slots=True)
class ShardTask:
    """One shard's part of a batch: where it starts, its row budget, and what the planner knows."""

    shard_id: str
    start: ShardPos
    max_rows: int
    closed: bool
    starting_hash_key: int
    ending_hash_key: int
    head: GetRecordsResult | None = None  # the planner's probe page (one record after ``start``)


@dataclass(frozen=True)
class ExecutorPartition(InputPartition):
    """One Spark task: up to ``shardsPerTask`` shards of batch ``batch`` of run ``run``."""

    options: SourceOptions
    run: str
    batch: int
    until_ms: int | None
    shards: tuple[ShardTask, ...]
    consumer_arn: str | None = None
    replay: bool = False
