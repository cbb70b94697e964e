"""Where a Spark query's fixed cost goes: a timeline of small AvailableNow queries of the Kinesis source.

kinesalite + dynalite on 127.0.0.1, ``--records`` records (few: the read itself is short) in
``--shards`` shards, a ``local[2]`` session started and warmed up first. Each of ``--rounds`` queries
reads the stream from TRIM_HORIZON into ``noop`` through ``format("kinesis-timed")``
(``bench/_timed_source.py``: the source itself, every process that loads it writing a timeline) and
prints, in seconds from ``start()``:

* when Spark started the source runner (a new Python process per query), when that process began
  importing the source's modules (pyspark's start-up and imports before it) and when it was done;
* the start and end of every call Spark made on the stream reader (initialOffset, latestOffset,
  partitions, commit, stop ...) and of the executors' reads;
* the query's end, and Spark's own ``durationMs`` of each trigger.

    flock /tmp/kcl-heavy.lock .venv/bin/python bench/spark_fixed_cost.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support, bench

from bench.spark_cluster import make_stream
from tests.support.emulators import REGION, running_emulators
from tests.support.spark import start_session
from tests.support.streams import kinesis_client


def run(spark: Any, options: dict[str, str], root: Path, name: str) -> dict[str, Any]:
    frame = spark.readStream.format("kinesis-timed").options(**options).load()
    began = time.time()
    query = (
        frame.writeStream.format("noop")
        .option("checkpointLocation", str(root / name))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    ended = time.time()
    progress = [dict(p) for p in query.recentProgress]
    return {"began": began, "ended": ended, "progress": progress}


def timeline(events: list[dict[str, Any]], began: float, ended: float) -> list[tuple[float, str]]:
    """(seconds since start(), what) for this query's events."""
    mine = [e for e in events if began - 0.001 <= e["t"] <= ended + 0.5]
    runner = next((e["pid"] for e in mine if e.get("call") == "initialOffset"), None)
    rows: list[tuple[float, str]] = []
    counts: dict[str, int] = defaultdict(int)
    for e in mine:
        who = "runner" if e["pid"] == runner else f"pid {e['pid']}"
        if e["event"] == "imported":
            rows.append((e["process_start"] - began, f"{who}: process started ({e.get('pyspark_from')})"))
            rows.append((e["began"] - began, f"{who}: source import begins (had {e['loaded_before']})"))
            rows.append((e["t"] - began, f"{who}: source imported"))
        else:
            label = e["call"]
            if e["event"] == "begin":
                counts[f"{who}{label}"] += 1
            rows.append((e["t"] - began, f"{who}: {label} #{counts[f'{who}{label}']} {e['event']}"))
    rows.append((ended - began, "query ended"))
    return sorted(rows)


def phases(events: list[dict[str, Any]], began: float, ended: float) -> dict[str, float]:
    """The fixed cost split into named spans (seconds)."""
    mine = [e for e in events if began - 0.001 <= e["t"] <= ended + 0.5]
    runner = next(e["pid"] for e in mine if e.get("call") == "initialOffset")
    ours = [e for e in mine if e["pid"] == runner]
    imported = next(e for e in ours if e["event"] == "imported")

    def at(call: str, event: str, nth: int = 1) -> float:
        hits = [e["t"] for e in ours if e.get("call") == call and e["event"] == event]
        return hits[nth - 1] if len(hits) >= nth else float("nan")

    reads = [e for e in mine if e.get("call") == "read"]
    first_read = min(e["t"] for e in reads if e["event"] == "begin")
    last_read = max(e["t"] for e in reads if e["event"] == "end")
    latest = [e for e in ours if e.get("call") == "latestOffset" and e["event"] == "begin"]
    return {
        "start_to_runner_process": imported["process_start"] - began,
        "runner_pyspark_startup": imported["began"] - imported["process_start"],
        "runner_source_import": imported["t"] - imported["began"],
        "runner_to_initialOffset": at("initialOffset", "begin") - imported["t"],
        "initialOffset": at("initialOffset", "end") - at("initialOffset", "begin"),
        "latestOffset_1": at("latestOffset", "end") - at("latestOffset", "begin"),
        "initialOffset_to_first_read": first_read - at("initialOffset", "end"),
        "start_to_first_read": first_read - began,
        "reads": last_read - first_read,
        # an AvailableNow query that ends after one batch never commits it on the source: Spark
        # writes its commit log, then asks for the next offset once more
        "last_read_to_last_plan": at("latestOffset", "begin", len(latest)) - last_read,
        "latestOffset_last": at("latestOffset", "end", len(latest))
        - at("latestOffset", "begin", len(latest)),
        "last_latestOffset_end_to_query_end": ended - at("latestOffset", "end", len(latest)),
        "whole": ended - began,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=4000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--verbose", action="store_true", help="print each round's whole timeline")
    parser.add_argument(
        "--compiled-pyspark-zip",
        action="store_true",
        help="run Spark from a Spark home whose pyspark.zip carries bytecode (bench/_spark_home.py)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, running_emulators(shard_limit=50) as emulators:
        root = Path(tmp)
        log = root / "timeline.jsonl"
        os.environ["KCL_TIMELINE"] = str(log)  # inherited by the JVM, so by every Python process it starts
        if args.compiled_pyspark_zip:
            from bench._spark_home import compiled_spark_home

            os.environ["SPARK_HOME"] = str(compiled_spark_home(root))
        kinesis = kinesis_client(emulators.kinesis_endpoint, read_timeout_s=60)
        make_stream(kinesis, "measured", args.shards, args.records, 100)
        make_stream(kinesis, "warmup", 1, 100, 100)
        spark = start_session(
            args.master, "kcl-spark-fixed-cost", conf={"spark.executorEnv.KCL_TIMELINE": str(log)}
        )
        from bench._timed_source import TimedKinesisDataSource

        spark.dataSource.register(TimedKinesisDataSource)

        def options(stream: str) -> dict[str, str]:
            return {
                "streamName": stream,
                "region": REGION,
                "endpointUrl": emulators.kinesis_endpoint,
                "dynamoDbEndpointUrl": emulators.dynamodb_endpoint,
                "startingPosition": "TRIM_HORIZON",
                "shardDiscoveryIntervalMs": "10000",
            }

        run(spark, options("warmup"), root, "warmup")
        results = []
        for n in range(args.rounds):
            result = run(spark, options("measured"), root, f"q{n}")
            events = [json.loads(line) for line in log.read_text().splitlines()]
            split = phases(events, result["began"], result["ended"])
            results.append(split)
            if args.verbose:
                print(f"round {n + 1}:")
                for at, what in timeline(events, result["began"], result["ended"]):
                    print(f"  {at:7.3f}  {what}")
                for p in result["progress"]:
                    print(f"  trigger {p['batchId']}: {p['numInputRows']} rows, {p['durationMs']}")
        spark.stop()
    keys = list(results[0])
    if args.json:
        print(json.dumps({k: [round(r[k], 3) for r in results] for k in keys}))
    print(
        f"{args.records} records in {args.shards} shards, {args.rounds} queries on {args.master} (seconds):"
    )
    for k in keys:
        values = [r[k] for r in results]
        print(f"  {k:<36} median {statistics.median(values):6.3f}   " + " ".join(f"{v:6.3f}" for v in values))


if __name__ == "__main__":
    main()
