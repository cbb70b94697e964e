"""An executor's enhanced fan-out read of one shard for one batch: SubscribeToShard until a stop rule.

The subscription starts where the batch starts on the shard (AT the position's sequence number,
dropping the user records it covers, as the daemon resumes; TRIM_HORIZON or AT_TIMESTAMP for
sentinels) and its events are taken until the same stop rules as a polling read: the row budget (the
rest of that event is dropped: at most one event is fetched past the budget), an event at
``MillisBehindLatest`` 0 (the tip), the shard's end (an event without a continuation sequence number),
or the first record that arrived after the AvailableNow cut-off. A subscription that ends without any
of these (Kinesis ends them after 5 minutes; an idle shard can run into the client's read timeout) is
the tip too. A subscription that fails is opened again after the last continuation sequence number,
under the named ``FANOUT_SUBSCRIBE`` policy, which also waits out ``ResourceInUseException``: a consumer
may subscribe to a shard once per 5 seconds. Replays never subscribe: they read to a known end with
GetRecords (:mod:`kcl_daemon.spark.shard_reader`). Never logs payloads.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kcl_daemon.aws.fanout import Fanout, FanoutEvent, Subscription
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.core.shards.iterator import IteratorPosition, iterator_position_for
from kcl_daemon.core.spark.offsets import AT_SHARD_END, ShardPos, after
from kcl_daemon.errors import KclError, ShardNotFound
from kcl_daemon.retrieval.deaggregate import Deaggregator
from kcl_daemon.retrieval.fanout import next_position
from kcl_daemon.retry import FANOUT_SUBSCRIBE, RetryPolicy
from kcl_daemon.spark.rows import held_bytes, user_rows
from kcl_daemon.spark.shard_reader import DataLoss, ShardRead, timestamp_of

logger = logging.getLogger(__name__)


def _subscribe(
    fanout: Fanout,
    consumer_arn: str,
    shard_id: str,
    position: IteratorPosition,
    retry: RetryPolicy,
    sleep: Callable[[float], None],
    monotonic: Callable[[], float],
) -> Subscription:
    for attempt in retry.retrying(sleep=sleep, monotonic=monotonic):
        with attempt:
            return fanout.subscribe(consumer_arn, shard_id, position)
    raise AssertionError("unreachable: the retry policy re-raises the last error")  # pragma: no cover


def read_efo(
    fanout: Fanout,
    consumer_arn: str,
    stream: str,
    shard_id: str,
    start: ShardPos,
    *,
    max_rows: int,
    cutoff_ms: int | None,
    max_bytes: int | None = None,
    deaggregate: bool = True,
    hash_range: tuple[int, int] = (0, 2**128 - 1),
    fail_on_data_loss: bool = True,
    retry: RetryPolicy = FANOUT_SUBSCRIBE,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> ShardRead:
    """Read ``shard_id`` after ``start`` through the consumer ``consumer_arn`` (see the module doc)."""
    result = ShardRead(end=start)
    if start.is_shard_end:
        return result
    first = iterator_position_for(start.checkpoint, timestamp=timestamp_of(start))
    deaggregator = Deaggregator(shard_id, *hash_range) if deaggregate else None
    continuation: str | None = None
    last_fetched: str | None = None
    check_trim = not start.checkpoint.is_sentinel
    failures = 0
    done = False
    while not done:
        position = next_position(continuation, first)
        try:
            subscription = _subscribe(fanout, consumer_arn, shard_id, position, retry, sleep, monotonic)
        except ShardNotFound:
            result.end = AT_SHARD_END
            return result
        try:
            ended_by_kinesis = True
            for event in subscription:
                result.calls += 1
                result.millis_behind_latest = event.millis_behind_latest
                if event.records:
                    last_fetched = event.records[-1].sequence_number
                    if check_trim:
                        check_trim = False
                        _check_trimmed(event, start, stream, shard_id, fail_on_data_loss)
                done = _take(result, event, deaggregator, start, max_rows, cutoff_ms, max_bytes)
                if done:
                    ended_by_kinesis = False
                    break
                if event.continuation_sequence_number is None:
                    result.end = AT_SHARD_END  # closed, and every record of it was taken
                    ended_by_kinesis = False
                    done = True
                    break
                continuation = event.continuation_sequence_number
                if event.millis_behind_latest == 0:
                    result.at_tip = True
                    ended_by_kinesis = False
                    done = True
                    break
            if ended_by_kinesis:
                result.at_tip = True  # ended, or nothing arrived for a whole read timeout: the tip
                done = True
        except DataLoss:
            raise
        except KclError as exc:
            failures += 1
            if not exc.retriable or failures > retry.max_attempts:
                raise
            logger.info("shard %s: subscription failed (%s); subscribing again", shard_id, exc)
            sleep(retry.initial_backoff_s * failures)
        finally:
            subscription.close()
    if result.at_tip and last_fetched is not None and not result.end.is_shard_end:
        past = ExtendedSequenceNumber(last_fetched, 0)
        if past > result.end.checkpoint:
            result.end = after(last_fetched, 0)  # every fetched record was looked at: move past drops
    return result


def _check_trimmed(
    event: FanoutEvent, start: ShardPos, stream: str, shard_id: str, fail_on_data_loss: bool
) -> None:
    """The first record of a read AT the start's sequence number is later than it: records were trimmed."""
    first = event.records[0].sequence_number
    if int(first) <= int(start.checkpoint.sequence_number):
        return
    message = (
        f"shard {shard_id} of stream {stream}: records after {start.checkpoint} were trimmed before "
        f"they were read (the first one left is {first})"
    )
    if fail_on_data_loss:
        raise DataLoss(message + " (set failOnDataLoss=false to skip it)")
    logger.warning("%s; skipping it (failOnDataLoss=false)", message)


def _take(
    result: ShardRead,
    event: FanoutEvent,
    deaggregator: Deaggregator | None,
    start: ShardPos,
    max_rows: int,
    cutoff_ms: int | None,
    max_bytes: int | None = None,
) -> bool:
    """Take the event's user records into ``result``; True when a stop rule ended the read."""
    start_key = (
        None
        if start.checkpoint.is_sentinel
        else (int(start.checkpoint.sequence_number), start.checkpoint.sub_sequence_number)
    )
    rows = result.records
    last = None
    stopped = False
    for row in user_rows(deaggregator, event.records):
        if start_key is not None and (row[1], row[2]) <= start_key:
            continue
        if cutoff_ms is not None and row[5] > cutoff_ms:
            result.cut = stopped = True
            break
        if len(rows) >= max_rows:
            stopped = True
            break
        rows.append(row)
        last = row
        if max_bytes is not None:
            result.held_bytes += held_bytes(row)
            if result.held_bytes >= max_bytes:
                result.full = stopped = True
                break
    if last is not None:
        result.end = after(last[0], last[2])
    return stopped or len(rows) >= max_rows
