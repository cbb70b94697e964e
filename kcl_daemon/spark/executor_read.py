"""The executors' side of executor reads: read a shard's part of a batch, publish where it ended, yield.

Per shard of a task (:class:`ExecutorPartition`, pickled by the planner with everything a read needs):

1. A replay (the planner did not plan this batch in this run of the query) or a retried attempt first
   looks for the batch's publication and, if there is one, reads exactly to it.
2. Otherwise it reads from the batch's start with GetRecords (:func:`read_shard`) or SubscribeToShard
   (:func:`read_efo`) until the budget, the tip, the shard's end or the cut-off; the planner's probe
   record, when it handed one over, is the read's first page.
3. It publishes the end (first writer wins). If another attempt published first, it keeps exactly the
   rows up to that end (reading on if that end is further, which only a trimmed shard can cause).
4. Only now it yields the rows, as one Arrow batch per shard.

A task of several shards (``shardsPerTask``) reads up to :data:`SHARD_READS_AT_ONCE` of them at the same
time, each on a thread of its own, and yields them in its shards' order: a read mostly waits, for
Kinesis and for the 200 ms between a shard's calls. A shard's rows are held in memory until they are
yielded: bounded by ``maxBytesPerShardPerBatch`` (estimated by :func:`~kcl_daemon.spark.rows.held_bytes`)
and the shard's row budget, so a task holds at most that many shards' worth besides the one it hands over.
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Final

import pyarrow as pa
from pyspark import TaskContext

from kcl_daemon.aws.batch_ends import BatchEnds
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.core.spark.batches import PublishedEnd, end_reason
from kcl_daemon.core.spark.offsets import ShardPos
from kcl_daemon.spark.clients import batch_ends_for, fanout_for, kinesis_for
from kcl_daemon.spark.efo_read import read_efo
from kcl_daemon.spark.options import ConsumerMode, SourceOptions
from kcl_daemon.spark.partitions import ExecutorPartition, ShardTask
from kcl_daemon.spark.shard_reader import ReadLimits, Resume, ShardRead, read_shard

logger = logging.getLogger(__name__)

#: A task's shards read at the same time, at most (``shardsPerTask`` > 1); each holds up to
#: ``maxBytesPerShardPerBatch`` of rows until it is yielded.
SHARD_READS_AT_ONCE: Final = 8


def _attempt() -> int:
    context = TaskContext.get()
    return 0 if context is None else int(context.attemptNumber())


def read_partition(partition: ExecutorPartition) -> Iterator[pa.RecordBatch]:
    """Executor side of one task (see the module docstring): its shards read at once, yielded in order."""
    options = partition.options
    kinesis = kinesis_for(options)
    ends = batch_ends_for(options)
    look_first = partition.replay or _attempt() > 0

    def one(task: ShardTask) -> ShardRead:
        return _read_and_publish(kinesis, ends, partition, task, look_first)

    for task, read in zip(partition.shards, _each_in_order(one, partition.shards), strict=True):
        if read.records:
            yield read.records.to_arrow(options.stream_name, task.shard_id)


def _each_in_order(read: Callable[[ShardTask], ShardRead], tasks: Sequence[ShardTask]) -> Iterator[ShardRead]:
    """``read`` of every task, in the tasks' order, up to :data:`SHARD_READS_AT_ONCE` running at once.

    A shard's read mostly waits (for Kinesis, and 200 ms between its calls), so a task reading its
    shards one after the other would read at one shard's pace. The next read starts when the earliest
    is handed over, so a task holds the rows of at most that many shards besides the one Spark takes."""
    if len(tasks) == 1:
        yield read(tasks[0])
        return
    with ThreadPoolExecutor(
        min(SHARD_READS_AT_ONCE, len(tasks)), thread_name_prefix="kcl-spark-read"
    ) as pool:
        pending = iter(tasks)
        running = deque(pool.submit(read, task) for task in itertools.islice(pending, SHARD_READS_AT_ONCE))
        try:
            while running:
                done = running.popleft().result()
                following = next(pending, None)
                if following is not None:
                    running.append(pool.submit(read, following))
                yield done
        finally:
            for future in running:  # a failed read or a closed iterator: start no more
                future.cancel()


def _read_and_publish(
    kinesis: Kinesis, ends: BatchEnds, partition: ExecutorPartition, task: ShardTask, look_first: bool
) -> ShardRead:
    """One shard of a task: its published end's rows (a replay or a retry), or a read that publishes."""
    options = partition.options
    standing = ends.get(partition.run, partition.batch, task.shard_id) if look_first else None
    if standing is not None:
        return _read_to(kinesis, options, task, task.start, standing)
    read = _decide(kinesis, partition, task)
    mine = PublishedEnd(
        read.end,
        end_reason(
            shard_end=read.end.is_shard_end,
            rows=len(read.records),
            max_rows=task.max_rows,
            cut=read.cut,
            full=read.full,
        ),
        len(read.records),
    )
    standing = ends.publish(partition.run, partition.batch, task.shard_id, mine)
    if standing != mine:
        logger.info(
            "shard %s batch %d: another attempt published first; keeping its end %s",
            task.shard_id,
            partition.batch,
            standing.end.checkpoint,
        )
        read = _adopt(kinesis, options, task, read, standing)
    return read


def _common(options: SourceOptions, task: ShardTask) -> dict[str, object]:
    return {
        "deaggregate": options.kpl_deaggregate,
        "hash_range": (task.starting_hash_key, task.ending_hash_key),
        "fail_on_data_loss": options.fail_on_data_loss,
    }


def _decide(kinesis: Kinesis, partition: ExecutorPartition, task: ShardTask) -> ShardRead:
    """Read from the batch's start until a stop rule: the read that decides where the batch ends."""
    options = partition.options
    if options.consumer_mode is ConsumerMode.EFO:
        if partition.consumer_arn is None:
            raise ValueError("consumerMode=efo but the planner registered no consumer")
        return read_efo(
            fanout_for(options),
            partition.consumer_arn,
            options.stream_name,
            task.shard_id,
            task.start,
            max_rows=task.max_rows,
            max_bytes=options.max_bytes_per_shard_per_batch,
            cutoff_ms=partition.until_ms,
            deaggregate=options.kpl_deaggregate,
            hash_range=(task.starting_hash_key, task.ending_hash_key),
            fail_on_data_loss=options.fail_on_data_loss,
        )
    limits = ReadLimits(
        max_records=task.max_rows,
        get_records_limit=options.get_records_limit,
        min_interval_s=options.min_fetch_interval_s,
        cutoff_ms=partition.until_ms,
        max_bytes=options.max_bytes_per_shard_per_batch,
    )
    head = task.head
    return read_shard(
        kinesis,
        options.stream_name,
        task.shard_id,
        task.start,
        limits=limits,
        closed=task.closed,
        head=head,
        resume=None if head is None else Resume(head.next_iterator or "", None),
        **_common(options, task),  # type: ignore[arg-type]
    )


def _read_to(
    kinesis: Kinesis, options: SourceOptions, task: ShardTask, start: ShardPos, end: PublishedEnd
) -> ShardRead:
    """Exactly the records after ``start`` up to and including the published ``end``."""
    if end.rows == 0 or end.end == start:
        return ShardRead(end=start)
    limits = ReadLimits(
        get_records_limit=options.get_records_limit, min_interval_s=options.min_fetch_interval_s
    )
    return read_shard(
        kinesis,
        options.stream_name,
        task.shard_id,
        start,
        stop_at=end.end,
        limits=limits,
        **_common(options, task),  # type: ignore[arg-type]
    )


def _adopt(
    kinesis: Kinesis, options: SourceOptions, task: ShardTask, read: ShardRead, standing: PublishedEnd
) -> ShardRead:
    """``read`` cut back (or read on) to the end another attempt published."""
    target = standing.end
    if target.is_shard_end:
        if read.end.is_shard_end:
            return ShardRead(end=target, records=read.records)
    elif read.end.is_shard_end or target.checkpoint <= read.end.checkpoint:
        if target.checkpoint.is_sentinel:
            return ShardRead(end=target)  # the winner read nothing
        cut = (int(target.checkpoint.sequence_number), target.checkpoint.sub_sequence_number)
        return ShardRead(end=target, records=read.records.up_to(*cut))
    more = _read_to(kinesis, options, task, read.end, standing)  # the winner read further: a trim
    read.records.extend(more.records)
    return ShardRead(end=target, records=read.records)
