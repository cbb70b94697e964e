"""What caps the Spark source's reads: the emulator, the client, or the executors' read path?

kinesalite on 127.0.0.1, ``--records`` records of 100 bytes in ``--shards`` shards, read from
TRIM_HORIZON three ways, each with 4, 2 and 1 threads (a thread per shard at a time):

* **boto3**: the raw GetRecords loop of the other benchmarks (botocore parses every page);
* **project client**: the same loop through the project's Kinesis adapter (``kcl_daemon.aws``, the
  pages parsed from the raw body), which the Spark source's executors use;
* **executor path**: what one Spark task does for a shard, without Spark: ``read_shard`` (pacing, the
  daemon's start rule, KPL de-aggregation, the budget) and the Arrow batch of its rows.

If the project client's rate stops growing with threads, the emulator is the cap. Last, one shard read
alone by the executor path under cProfile (``--top`` functions by own time). No Spark, no JVM.

    flock /tmp/kcl-heavy.lock .venv/bin/python bench/spark_read_profile.py
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.core.shards.iterator import IteratorPosition, IteratorType
from kcl_daemon.core.spark.offsets import AT_TRIM_HORIZON
from kcl_daemon.spark import source_clients
from kcl_daemon.spark.shard_reader import ReadLimits, read_shard
from tests.support.emulators import REGION, running_emulators, use_dummy_credentials
from tests.support.streams import kinesis_client, wait_active

STREAM = "profiled"


def fill(kinesis: Any, shards: int, records: int) -> list[str]:
    kinesis.create_stream(StreamName=STREAM, ShardCount=shards)
    wait_active(kinesis, STREAM)

    def put(offset: int) -> None:
        entries = [
            {"Data": f"{n:010d}".encode().ljust(100, b"."), "PartitionKey": f"key-{n}"}
            for n in range(offset, min(records, offset + 500))
        ]
        assert not kinesis.put_records(StreamName=STREAM, Records=entries).get("FailedRecordCount")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(put, range(0, records, 500)))
    return [shard["ShardId"] for shard in kinesis.list_shards(StreamName=STREAM)["Shards"]]


def readers(kinesis: Any, mine: Kinesis, per_shard_cap: int) -> dict[str, Callable[[str], int]]:
    def boto3_loop(shard_id: str) -> int:
        iterator = kinesis.get_shard_iterator(
            StreamName=STREAM, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        seen = 0
        while True:
            page = kinesis.get_records(ShardIterator=iterator, Limit=10000)
            seen += len(page["Records"])
            iterator = page["NextShardIterator"]
            if not page["Records"]:
                return seen

    def project_loop(shard_id: str) -> int:
        iterator = mine.get_shard_iterator(STREAM, shard_id, IteratorPosition(IteratorType.TRIM_HORIZON))
        seen = 0
        while True:
            page = mine.get_records(iterator, 10000)
            seen += len(page.records)
            if not page.records or page.next_iterator is None:
                return seen
            iterator = page.next_iterator

    def executor_path(shard_id: str) -> int:
        limits = ReadLimits(max_records=per_shard_cap, get_records_limit=10000, min_interval_s=0.2)
        read = read_shard(mine, STREAM, shard_id, AT_TRIM_HORIZON, limits=limits)
        return int(read.records.to_arrow(STREAM, shard_id).num_rows)

    return {"boto3": boto3_loop, "project client": project_loop, "executor path": executor_path}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    use_dummy_credentials()
    with running_emulators(shard_limit=50) as emulators:
        kinesis = kinesis_client(emulators.kinesis_endpoint, read_timeout_s=60)
        shard_ids = fill(kinesis, args.shards, args.records)
        mine = source_clients.kinesis_for(REGION, emulators.kinesis_endpoint, source_clients.Credentials())
        ways = readers(kinesis, mine, per_shard_cap=args.records)
        print(f"{args.records} records of 100 bytes in {args.shards} shards on kinesalite:")
        for name, read in ways.items():
            for threads in (4, 2, 1):
                started = time.perf_counter()
                with ThreadPoolExecutor(threads) as pool:
                    seen = sum(pool.map(read, shard_ids))
                took = time.perf_counter() - started
                assert seen == args.records, f"{name} read {seen} records, not {args.records}"
                print(f"  {name:<15} {threads} thread(s): {seen / took:>9,.0f} records/s ({took:.2f} s)")
        profile = cProfile.Profile()
        started = time.perf_counter()
        profile.enable()
        seen = ways["executor path"](shard_ids[0])
        profile.disable()
        took = time.perf_counter() - started
        print(f"executor path, one shard alone under cProfile: {seen} records in {took:.2f} s")
        pstats.Stats(profile, stream=sys.stdout).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
