"""A small sample producer for local runs: readable JSON records at a modest, steady rate.

Each user record is ``{"n": 17, "at": "2024-05-01T12:00:00.123+00:00"}``, with ``n`` counting up from 0
with no gaps, so a reader can tell that nothing was lost or duplicated. Partition keys are chosen from
the stream's hash-key ranges (:func:`partition_keys_for`), so every open shard gets data. Optionally,
every few Kinesis records one is a KPL-aggregated record (``aws_kinesis_agg``) holding several user
records (their payloads carry ``"agg": true``), which exercises the daemon's de-aggregation; all the user
records of one aggregate share its partition key, so they all belong to the shard it lands on.

The producer runs on its own daemon thread, so it works beside any event loop. ``stop()`` ends it
cleanly; :class:`ProducerStats` counts what Kinesis acknowledged. Records Kinesis rejects (throttling)
and calls that fail in a retriable way are sent again on the next tick; any other error stops the
producer, is logged, and is kept in :attr:`Producer.failure`.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Final, Protocol, Self

import orjson

from kcl_daemon.aws.provision import MAX_PUT_RECORDS_ENTRIES, PutEntry
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.errors import KclError

logger = logging.getLogger(__name__)

DEFAULT_RATE_PER_S: Final = 20.0
_KEY_SEARCH_LIMIT: Final = 100_000


class RecordSink(Protocol):
    """Where records go: :class:`kcl_daemon.aws.provision.StreamWriter` in production."""

    def put_records(self, entries: Sequence[PutEntry]) -> list[int]:
        """Write the entries; return the indices of those that failed and may be sent again."""
        ...


def open_hash_ranges(shards: Iterable[Shard]) -> list[tuple[int, int]]:
    """The hash-key ranges of the open shards (those with no ending sequence number)."""
    return [
        (shard.starting_hash_key, shard.ending_hash_key)
        for shard in shards
        if shard.ending_sequence_number is None
    ]


def partition_key_hash(partition_key: str) -> int:
    """Kinesis's hash of a partition key: the MD5 digest as a 128-bit unsigned integer."""
    return int.from_bytes(hashlib.md5(partition_key.encode(), usedforsecurity=False).digest(), "big")


def partition_keys_for(
    hash_ranges: Sequence[tuple[int, int]], per_range: int = 4, *, prefix: str = "pk-"
) -> list[str]:
    """``per_range`` partition keys hashing into each of ``hash_ranges`` (inclusive bounds), interleaved
    range by range (``[r0, r1, r2, r0, r1, r2, ...]``) so consecutive records go to different shards.

    Deterministic: keys are ``prefix0``, ``prefix1``, ... taken in order. Raises ``ValueError`` if some
    range gets no key within a generous search (an implausibly narrow range).
    """
    if not hash_ranges:
        raise ValueError("no hash ranges: the stream has no open shards")
    if per_range < 1:
        raise ValueError(f"per_range must be at least 1, got {per_range}")
    found: list[list[str]] = [[] for _ in hash_ranges]
    missing = len(hash_ranges) * per_range
    for candidate in range(_KEY_SEARCH_LIMIT):
        key = f"{prefix}{candidate}"
        hashed = partition_key_hash(key)
        for keys, (low, high) in zip(found, hash_ranges, strict=True):
            if low <= hashed <= high and len(keys) < per_range:
                keys.append(key)
                missing -= 1
                break
        if missing == 0:
            return [keys[i] for i in range(per_range) for keys in found]
    raise ValueError(f"found no partition keys for some of the hash ranges {list(hash_ranges)}")


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class ProducerStats:
    """What Kinesis acknowledged so far. ``user_records`` counts plain records plus the records inside
    aggregates. Rejected records are sent again later, so only with ``rejected_entries == 0`` and
    ``failed_calls == 0`` are the acknowledged ``n`` values exactly ``0 .. user_records - 1``."""

    user_records: int = 0
    kinesis_records: int = 0
    aggregated_records: int = 0
    rejected_entries: int = 0  # entries PutRecords rejected (sent again on the next tick)
    failed_calls: int = 0  # whole PutRecords calls that failed in a retriable way (sent again too)


@dataclass(frozen=True, slots=True)
class _Pending:
    entry: PutEntry
    user_records: int
    aggregated: bool


class Producer:
    """Puts ``rate_per_s`` Kinesis records per second into ``sink`` on a background thread.

    With ``aggregate_every = k > 0``, every (k+1)-th Kinesis record is a KPL aggregate of
    ``records_per_aggregate`` user records. ``monotonic`` and ``wall`` are injectable for tests.
    """

    def __init__(
        self,
        sink: RecordSink,
        partition_keys: Sequence[str],
        *,
        rate_per_s: float = DEFAULT_RATE_PER_S,
        aggregate_every: int = 0,
        records_per_aggregate: int = 5,
        tick_s: float = 0.05,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = _utc_now,
    ) -> None:
        if not partition_keys:
            raise ValueError("the producer needs at least one partition key")
        if rate_per_s <= 0:
            raise ValueError(f"rate_per_s must be positive, got {rate_per_s}")
        if aggregate_every < 0 or records_per_aggregate < 1:
            raise ValueError("aggregate_every must be >= 0 and records_per_aggregate >= 1")
        self._sink = sink
        self._keys = tuple(partition_keys)
        self._rate_per_s = rate_per_s
        self._aggregate_every = aggregate_every
        self._records_per_aggregate = records_per_aggregate
        self._tick_s = tick_s
        self._monotonic = monotonic
        self._wall = wall
        self._started_at: float | None = None
        self._next_slot = 0  # Kinesis records built so far
        self._next_n = 0  # user records built so far
        self._pending: list[_Pending] = []  # built, not yet acknowledged, in order
        self._stats = ProducerStats()
        self._stats_lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.failure: BaseException | None = None
        """The error that stopped the producer early, if any."""

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the producer was already started")
        self._thread = threading.Thread(target=self._run, name="kcl-local-producer", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> ProducerStats:
        """Ask the thread to finish its current tick and wait for it; return the final counts."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                logger.warning("the local producer did not stop within %.1fs", timeout_s)
        return self.stats

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def stats(self) -> ProducerStats:
        with self._stats_lock:
            return self._stats

    def _run(self) -> None:
        try:
            while True:
                self.produce_once()
                if self._stopping.wait(self._tick_s):
                    return
        except Exception as exc:  # the top of the thread: log it, keep it, stop producing
            logger.exception("the local producer stopped")
            self.failure = exc

    # -- one tick ----------------------------------------------------------------------------------

    def produce_once(self) -> None:
        """Build the records that are due by now, then send them with any left over from last time."""
        now = self._monotonic()
        if self._started_at is None:
            self._started_at = now
        due = int((now - self._started_at) * self._rate_per_s) + 1 - self._next_slot
        room = MAX_PUT_RECORDS_ENTRIES - len(self._pending)
        for _ in range(max(0, min(due, room))):
            self._pending.append(self._build_next())
        if self._pending:
            self._send_pending()

    def _build_next(self) -> _Pending:
        slot = self._next_slot
        self._next_slot += 1
        k = self._aggregate_every
        # Plain records and aggregates each walk the keys on their own, so both reach every shard.
        if k and slot % (k + 1) == k:
            aggregate = slot // (k + 1)
            return self._build_aggregate(self._keys[aggregate % len(self._keys)])
        plain = slot - slot // (k + 1) if k else slot
        n = self._next_n
        self._next_n += 1
        key = self._keys[plain % len(self._keys)]
        return _Pending(PutEntry(key, self._payload(n, aggregated=False)), 1, aggregated=False)

    def _build_aggregate(self, key: str) -> _Pending:
        from aws_kinesis_agg.aggregator import RecordAggregator  # it edits sys.path on import

        aggregator = RecordAggregator()
        for _ in range(self._records_per_aggregate):
            aggregator.add_user_record(key, self._payload(self._next_n, aggregated=True))
            self._next_n += 1
        record = aggregator.clear_and_get()
        partition_key, _explicit_hash_key, data = record.get_contents()
        return _Pending(
            PutEntry(str(partition_key), bytes(data)), self._records_per_aggregate, aggregated=True
        )

    def _payload(self, n: int, *, aggregated: bool) -> bytes:
        at = self._wall().isoformat(timespec="milliseconds")
        return orjson.dumps({"n": n, "at": at, "agg": True} if aggregated else {"n": n, "at": at})

    def _send_pending(self) -> None:
        batch = self._pending
        try:
            answer = self._sink.put_records([pending.entry for pending in batch])
            failed = {index for index in answer if 0 <= index < len(batch)}
        except KclError as exc:
            if not exc.retriable:
                raise
            logger.warning("putting %d records failed; trying again: %s", len(batch), exc)
            with self._stats_lock:
                self._stats = _bump(self._stats, failed_calls=1)
            return
        acknowledged = [pending for index, pending in enumerate(batch) if index not in failed]
        self._pending = [batch[index] for index in sorted(failed)]
        if failed:
            logger.warning("Kinesis rejected %d of %d records; sending them again", len(failed), len(batch))
        with self._stats_lock:
            self._stats = _bump(
                self._stats,
                user_records=sum(pending.user_records for pending in acknowledged),
                kinesis_records=len(acknowledged),
                aggregated_records=sum(1 for pending in acknowledged if pending.aggregated),
                rejected_entries=len(failed),
            )


def _bump(
    stats: ProducerStats,
    *,
    user_records: int = 0,
    kinesis_records: int = 0,
    aggregated_records: int = 0,
    rejected_entries: int = 0,
    failed_calls: int = 0,
) -> ProducerStats:
    return ProducerStats(
        user_records=stats.user_records + user_records,
        kinesis_records=stats.kinesis_records + kinesis_records,
        aggregated_records=stats.aggregated_records + aggregated_records,
        rejected_entries=stats.rejected_entries + rejected_entries,
        failed_calls=stats.failed_calls + failed_calls,
    )
