"""Helpers of the Spark source's tests: its options, running a query, reading its output back.

A query writes each micro-batch to ``<out>/batch=<id>`` (overwrite, so a replayed batch replaces its
own output: the idempotent sink of the Spark docs); the tests read every batch back with pyarrow.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tests.support.emulators import REGION


def source_options(stream: str, kinesis_endpoint: str, **extra: str | int) -> dict[str, str]:
    options = {
        "streamName": stream,
        "region": REGION,
        "endpointUrl": kinesis_endpoint,
        "startingPosition": "TRIM_HORIZON",
        "shardDiscoveryIntervalMs": "0",
    }
    options.update({k: str(v) for k, v in extra.items()})
    return options


def run_query(
    spark: Any,
    options: Mapping[str, str],
    out: Path,
    checkpoint: Path,
    *,
    on_batch: Callable[[int], None] | None = None,
    timeout_s: float = 90.0,
    listeners: tuple[Any, ...] = (),
) -> Any:
    """Run an AvailableNow query to its end; returns the finished query (its progress is kept)."""
    frame = spark.readStream.format("kinesis").options(**options).load()

    def write(batch: Any, batch_id: int) -> None:
        batch.write.mode("overwrite").parquet(str(out / f"batch={batch_id}"))
        if on_batch is not None:
            on_batch(batch_id)

    for listener in listeners:
        spark.streams.addListener(listener)
    try:
        query = (
            frame.writeStream.foreachBatch(write)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        finished = query.awaitTermination(timeout_s)
        if not finished:
            query.stop()
            raise AssertionError(f"the query did not finish within {timeout_s}s")
        return query
    finally:
        for listener in listeners:
            spark.streams.removeListener(listener)


def rows(out: Path) -> list[dict[str, Any]]:
    """Every row of every batch written under ``out``, with its batch id."""
    found: list[dict[str, Any]] = []
    for batch_dir in sorted(out.glob("batch=*"), key=lambda p: int(p.name.split("=")[1])):
        batch_id = int(batch_dir.name.split("=")[1])
        if not any(batch_dir.glob("*.parquet")):
            continue
        for row in pq.read_table(batch_dir).to_pylist():
            found.append({**row, "batch": batch_id})
    return found


def last_committed_offset(checkpoint: Path) -> dict[str, Any]:
    """The source's end offset of the last committed batch, from Spark's checkpoint files."""
    commits = sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    lines = (checkpoint / "offsets" / str(commits[-1])).read_text().splitlines()
    return dict(json.loads(lines[2]))
