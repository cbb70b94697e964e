"""Is kinesalite the cap of the Spark source's reads on this machine? Its CPU while each reader runs.

kinesalite + dynalite on 127.0.0.1, ``--records`` records of 100 bytes in 4 shards (as
``spark_cluster.py`` puts them). Each round times, over the same data:

* **raw**: ``spark_cluster.py``'s raw loop (boto3, a thread per shard, Limit 10000);
* **executor path**: what ``local[2]`` runs without Spark: two processes, each reading two shards one
  after the other as a task does (``read_shard`` with the executor's limits, then the Arrow batch);
* **executor path, shards at once**: the same two processes, each reading its two shards at the same
  time on two threads (four calls in flight, as the raw loop has): does more concurrency get more out
  of the emulator?

and the CPU seconds kinesalite (a single-threaded Node process) spent meanwhile, from /proc. A reader
that keeps it near 100 % of a core reads as fast as the emulator serves; nothing on the client side
can make that reader faster.

    flock /tmp/kcl-heavy.lock .venv/bin/python bench/spark_emulator_cap.py
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from bench.spark_cluster import cpu_s, kinesalite_pid, make_stream, project_kinesis, raw_loop_s
from tests.support.emulators import running_emulators, use_dummy_credentials
from tests.support.streams import kinesis_client

STREAM = "measured"


def task(args: tuple[str, list[str], bool]) -> int:
    """One executor process: its shards one after the other, as local[2]'s tasks read them, or all at
    once on a thread each (``together``)."""
    endpoint, shard_ids, together = args
    from concurrent.futures import ThreadPoolExecutor

    from kcl_daemon.core.spark.offsets import AT_TRIM_HORIZON
    from kcl_daemon.spark import shard_reader
    from kcl_daemon.spark.options import DEFAULT_MAX_BYTES_PER_SHARD_PER_BATCH, NO_ROW_CAP

    kinesis = project_kinesis(endpoint)
    limits = shard_reader.ReadLimits(max_records=NO_ROW_CAP, max_bytes=DEFAULT_MAX_BYTES_PER_SHARD_PER_BATCH)

    def one(shard_id: str) -> int:
        read = shard_reader.read_shard(kinesis, STREAM, shard_id, AT_TRIM_HORIZON, limits=limits)
        return int(read.records.to_arrow(STREAM, shard_id).num_rows)

    if not together:
        return sum(one(shard_id) for shard_id in shard_ids)
    with ThreadPoolExecutor(len(shard_ids), thread_name_prefix="cap-shard") as pool:
        return sum(pool.map(one, shard_ids))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    use_dummy_credentials()
    with running_emulators(shard_limit=50) as emulators:
        endpoint = emulators.kinesis_endpoint
        kinesis = kinesis_client(endpoint, read_timeout_s=60)
        per_shard = make_stream(kinesis, STREAM, 4, args.records, 100)
        pid = kinesalite_pid(endpoint)
        shard_ids = sorted(per_shard)

        def executor_path(together: bool) -> object:
            halves = [(endpoint, shard_ids[0::2], together), (endpoint, shard_ids[1::2], together)]
            with get_context("fork").Pool(2) as pool:
                rows = sum(pool.map(task, halves))
            assert rows == args.records, f"read {rows} rows, not {args.records}"
            return rows

        readers: dict[str, Callable[[], object]] = {
            "raw loop (4 threads)": lambda: raw_loop_s(kinesis, STREAM, per_shard),
            "executor path (2 processes)": lambda: executor_path(False),
            "shards at once (2 x 2 threads)": lambda: executor_path(True),
        }
        print(f"{args.records} records of 100 bytes in 4 shards on kinesalite:")
        for _ in range(args.rounds):
            for name, read in readers.items():
                cpu, started = cpu_s(pid), time.perf_counter()
                read()
                wall = time.perf_counter() - started
                used = cpu_s(pid) - cpu
                print(
                    f"  {name:<30} {wall:6.2f} s; kinesalite CPU {used:6.2f} s ({used / wall:.0%} of a core)"
                )


if __name__ == "__main__":
    main()
