"""Shared pieces of the benchmarks that run against the embedded moto backend (127.0.0.1 only).

Not a benchmark itself: ``read_throughput.py`` and ``first_record.py`` import it (``bench/`` is on
``sys.path`` when they run as scripts).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kcl_daemon.aws.clients import AwsClients, ClientSettings
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.provision import MAX_PUT_RECORDS_ENTRIES, ensure_stream
from kcl_daemon.clock import SystemClock
from kcl_daemon.config.settings import Settings
from kcl_daemon.core.sequence import Sentinel
from kcl_daemon.local import EmbeddedBackend, partition_keys_for
from kcl_daemon.local.producer import open_hash_ranges
from kcl_daemon.run import WorkerPlan, build_scheduler, plan_worker, threads_calling_aws
from kcl_daemon.worker.scheduler import Scheduler

BENCH: Final = Path(__file__).resolve().parent
NOOP_PROCESSOR: Final = BENCH / "noop_processor.py"
POLL_S: Final = 0.005


def quiet_logs() -> None:
    """Warnings and errors only: the daemon logs every lease and child at INFO."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


def unique(prefix: str) -> str:
    """moto keeps streams and tables for the life of the process: every run gets fresh names."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_stream(clients: AwsClients, shards: int) -> str:
    stream = unique("bench")
    ensure_stream(clients.kinesis, stream, shards)
    return stream


def put_records(clients: AwsClients, stream: str, count: int, size: int) -> Counter[str]:
    """``count`` records of ``size`` bytes spread evenly over the open shards; returns records per shard."""
    keys = partition_keys_for(open_hash_ranges(Kinesis(clients.kinesis).list_shards(stream)))
    payload = b"x" * size
    per_shard: Counter[str] = Counter()
    for offset in range(0, count, MAX_PUT_RECORDS_ENTRIES):
        n = min(MAX_PUT_RECORDS_ENTRIES, count - offset)
        entries = [{"Data": payload, "PartitionKey": keys[(offset + i) % len(keys)]} for i in range(n)]
        response = clients.kinesis.put_records(StreamName=stream, Records=entries)  # type: ignore[arg-type]
        if response.get("FailedRecordCount"):
            raise RuntimeError(f"PutRecords rejected {response['FailedRecordCount']} record(s)")
        per_shard.update(result["ShardId"] for result in response["Records"])
    return per_shard


def worker_plan(stream: str, *, max_records: int = 10000) -> WorkerPlan:
    """The daemon over ``stream`` with the no-op child, a fresh lease table, from TRIM_HORIZON, at the
    fastest pacing the daemon allows (idleTimeBetweenReadsInMillis = 200)."""
    settings = Settings(
        executable=(sys.executable, str(NOOP_PROCESSOR)),
        application_name=unique("bench-app"),
        stream_name=stream,
        initial_position=Sentinel.TRIM_HORIZON,
        idle_time_between_reads_s=0.2,
        max_records=max_records,
        shutdown_grace_s=10.0,
        child_stop_timeout_s=2.0,
    )
    return plan_worker(settings, worker_id=unique("bench-worker"))


def worker_clients(backend: EmbeddedBackend, plan: WorkerPlan) -> AwsClients:
    """Clients sized like ``run_from_settings`` sizes them (one pooled connection per calling thread)."""
    base = ClientSettings(region=backend.region, max_pool_connections=threads_calling_aws(plan))
    return backend.build_clients(base)


@dataclass(frozen=True, slots=True)
class Progress:
    records: int
    batches: int
    checkpoints: int


def progress(scheduler: Scheduler) -> Progress:
    """Records and batches handed to the children, and checkpoints written, over the live shard tasks."""
    records = batches = checkpoints = 0
    for task in scheduler.tasks.values():
        if task.consumer is not None:
            stats = task.consumer.stats
            records += stats.records_delivered
            batches += stats.batches
            checkpoints += stats.checkpoints_written
    return Progress(records, batches, checkpoints)


@dataclass(frozen=True, slots=True)
class DaemonTimings:
    """Seconds from just before ``build_scheduler`` (the daemon's start)."""

    started: float  # Scheduler.start() returned: lease table ready, first shard sync done
    first_lease: float  # the first lease was held
    first_record: float  # the first record was handed to a child
    all_done: float  # every record handed over and every batch checkpointed by the child
    records: int
    batches: int
    records_at_first: int  # records handed over at the moment the first ones were seen
    shutdown_s: float  # the graceful shutdown afterwards (not part of the other figures)

    @property
    def after_first_per_s(self) -> float:
        """Records/s after the first batch(es): closer to the steady state than the whole run."""
        rest = self.all_done - self.first_record
        return (self.records - self.records_at_first) / rest if rest > 0 else float("nan")


async def run_daemon(
    plan: WorkerPlan, clients: AwsClients, expected: int, *, limit_s: float = 120.0
) -> DaemonTimings:
    """Start the worker in this process, wait until ``expected`` records are delivered and checkpointed,
    shut it down gracefully. The shutdown is not timed."""
    t0 = time.perf_counter()
    scheduler = build_scheduler(plan, clients, clock=SystemClock())
    await scheduler.start()
    started = time.perf_counter() - t0
    first_lease: float | None = None
    first: float | None = None
    at_first = 0
    try:
        while True:
            now = progress(scheduler)
            if first_lease is None and scheduler.coordinator.held:
                first_lease = time.perf_counter() - t0
            if first is None and now.records > 0:
                first = time.perf_counter() - t0
                at_first = now.records
            if now.records >= expected and now.checkpoints >= now.batches:
                done = time.perf_counter() - t0
                break
            if time.perf_counter() - t0 > limit_s:
                raise TimeoutError(f"only {now.records} of {expected} records delivered in {limit_s}s")
            await asyncio.sleep(POLL_S)
    finally:
        stopping = time.perf_counter()
        await scheduler.shutdown()
        shutdown_s = time.perf_counter() - stopping
    assert first_lease is not None
    assert first is not None
    return DaemonTimings(started, first_lease, first, done, now.records, now.batches, at_first, shutdown_s)
