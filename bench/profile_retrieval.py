"""Where the daemon's CPU goes while it reads and delivers records: cProfile of the whole daemon,
in-process, against kinesalite + dynalite running as separate processes (so the profile and the
CPU-seconds are the daemon's alone; the no-op children are separate processes too).

Prints CPU-seconds per 10,000 records (``time.process_time`` of this process across the timed part)
and the top functions by own time and by cumulative time.

    .venv/bin/python bench/profile_retrieval.py [--records 40000] [--shards 4] [--size 100] [--top 25]
                                                [--max-records 10000]
                                                [--no-profile] [--botocore-parse]

``--botocore-parse`` turns the raw GetRecords path off (botocore parses and decodes every record, as
before it existed), for a before/after comparison in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from _local import create_stream, put_records, quiet_logs, run_daemon, worker_plan

from kcl_daemon.aws import kinesis as kinesis_module
from kcl_daemon.aws import records_page
from tests.support.emulators import running_emulators

_THREAD_PROFILES: list[cProfile.Profile] = []
_LOCAL = threading.local()


def profile_in_threads(cls: type, name: str) -> None:
    """cProfile sees one thread: wrap ``cls.name`` (run on the AWS thread pool) in a per-thread profiler."""
    original: Callable[..., Any] = getattr(cls, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        profiler = getattr(_LOCAL, "profiler", None)
        if profiler is None:
            profiler = _LOCAL.profiler = cProfile.Profile()
            _THREAD_PROFILES.append(profiler)
        profiler.enable()
        try:
            return original(*args, **kwargs)
        finally:
            profiler.disable()

    setattr(cls, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=40000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--max-records", type=int, default=10000, help="maxRecords (GetRecords Limit)")
    parser.add_argument("--no-profile", action="store_true", help="CPU-seconds only (no profiler overhead)")
    parser.add_argument("--botocore-parse", action="store_true", help="without the raw GetRecords path")
    args = parser.parse_args()
    if args.botocore_parse:
        records_page.install = lambda client: None  # type: ignore[assignment]
    quiet_logs()
    with running_emulators(shard_limit=200) as emulators:
        clients = emulators.clients(max_pool_connections=64, read_timeout_s=30.0)
        stream = create_stream(clients, args.shards)
        put_records(clients, stream, args.records, args.size)
        plan = worker_plan(stream, max_records=args.max_records)
        profiler = cProfile.Profile()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        if not args.no_profile:
            profile_in_threads(kinesis_module.Kinesis, "get_records")
            profiler.enable()
        timings = asyncio.run(
            run_daemon(plan, emulators.clients(max_pool_connections=64, read_timeout_s=30.0), args.records)
        )
        profiler.disable()
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    print(f"{args.records} records in {args.shards} shards, {args.size} B each")
    print(f"  daemon: {args.records / timings.all_done:,.0f} records/s (start to all checkpointed)")
    print(f"  daemon CPU: {cpu:.3f} s in {wall:.3f} s wall, {cpu / args.records * 10000:.3f} CPU-s per 10k")
    if args.no_profile:
        return
    for title, profiles in (("event loop thread", [profiler]), ("GetRecords threads", _THREAD_PROFILES)):
        if not profiles:  # the lean path awaits the reads on the event loop: no read thread ran
            print(f"--- {title}: none (the reads ran on the event loop) ---")
            continue
        for order in ("tottime", "cumulative"):
            out = io.StringIO()
            stats = pstats.Stats(profiles[0], stream=out)
            for more in profiles[1:]:
                stats.add(more)
            stats.sort_stats(order).print_stats(args.top)
            print(f"--- {title}, by {order} ---")
            print("\n".join(line for line in out.getvalue().splitlines() if line.strip()))


if __name__ == "__main__":
    main()
