"""Records/s through one shard consumer and a no-op child, with metrics off (baseline) and on.

"On" means what `run --metrics-port` does: the shard consumer reports each batch to the registry
(records, bytes, lag, record age, child latency) while a thread scrapes the Prometheus exposition every
``--scrape-every`` seconds. Both run the same pre-built batches through ``ShardConsumer`` in this process,
alternating, best of ``--runs``; the ratio on/off is the price of metrics.

    .venv/bin/python bench/metrics_overhead.py [--batches 2000] [--records 500] [--size 100] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time

from prometheus_client import generate_latest

from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.lifecycle.shard_consumer import ConsumerSettings, ShardConsumer
from kcl_daemon.metrics.observer import NULL_SHARD_OBSERVER, ShardObserver
from kcl_daemon.metrics.registry import DaemonMetrics
from kcl_daemon.process.child import ChildProcess
from kcl_daemon.retrieval.source import Batch
from kcl_protocol import Record

NOOP_CHILD = r"""
import sys
out = sys.stdout
for line in sys.stdin:
    i = line.find('"action":"') + 10
    action = line[i:line.index('"', i)]
    out.write('{"action":"status","responseFor":"%s"}\n' % action)
    out.flush()
"""


class Source:
    def __init__(self, batches: list[Batch]) -> None:
        self._batches = iter(batches)
        self.done = asyncio.Event()

    async def start(self, after: ExtendedSequenceNumber) -> None:
        pass

    async def next_batch(self) -> Batch | None:
        batch = next(self._batches, None)
        if batch is None:
            self.done.set()
            await asyncio.Event().wait()  # the consumer's shutdown signal ends the wait
        return batch


class Store:
    async def load(self) -> ExtendedSequenceNumber:
        return ExtendedSequenceNumber("TRIM_HORIZON")

    async def save(self, target: ExtendedSequenceNumber) -> None:
        pass


def batches(count: int, per_batch: int, size: int) -> list[Batch]:
    payload = b"x" * size
    seq = 10**20
    out = []
    now_ms = int(time.time() * 1000)
    for _ in range(count):
        records = tuple(Record(payload, "pk", str(seq + i), 0, now_ms) for i in range(per_batch))
        seq += per_batch
        out.append(Batch(records, 0))
    return out


async def one_run(work: list[Batch], observer: ShardObserver) -> tuple[float, float]:
    """Wall seconds and this process's CPU seconds (all threads: the scraper too) for ``work``."""

    async def launch() -> ChildProcess:
        return await ChildProcess.spawn((sys.executable, "-c", NOOP_CHILD), line_limit_bytes=1 << 24)

    source = Source(work)
    consumer = ShardConsumer("shardId-0", source, Store(), launch, ConsumerSettings(), observer=observer)
    start, cpu_start = time.perf_counter(), time.process_time()
    running = asyncio.create_task(consumer.run())
    await source.done.wait()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    consumer.request_shutdown()
    await running
    return elapsed, cpu


def scraper(metrics: DaemonMetrics, every_s: float, stop: threading.Event) -> None:
    while not stop.wait(every_s):
        generate_latest(metrics.registry)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--records", type=int, default=500)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scrape-every", type=float, default=1.0)
    args = parser.parse_args()
    work = batches(args.batches, args.records, args.size)
    total = args.batches * args.records
    off: list[tuple[float, float]] = []
    on: list[tuple[float, float]] = []
    for _ in range(args.runs):
        off.append(asyncio.run(one_run(work, NULL_SHARD_OBSERVER)))
        metrics = DaemonMetrics()
        stop = threading.Event()
        thread = threading.Thread(target=scraper, args=(metrics, args.scrape_every, stop), name="scraper")
        thread.start()
        try:
            on.append(asyncio.run(one_run(work, metrics.shard("shardId-0"))))
        finally:
            stop.set()
            thread.join()
    base, mine = min(r[0] for r in off), min(r[0] for r in on)
    base_cpu, mine_cpu = min(r[1] for r in off), min(r[1] for r in on)
    print(
        f"{total} records in {args.batches} batches of {args.records} x {args.size} B (best of {args.runs})"
    )
    print(
        f"metrics off (baseline): {total / base:12,.0f} records/s {base_cpu / total * 1e9:6,.0f} ns CPU/rec"
    )
    print(
        f"metrics on:             {total / mine:12,.0f} records/s {mine_cpu / total * 1e9:6,.0f} ns CPU/rec"
    )
    print(f"ratio on/off:           {base / mine:12.2f}           {base_cpu / mine_cpu:6.2f} (CPU)")


if __name__ == "__main__":
    main()
