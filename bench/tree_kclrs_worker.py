"""kcl-rs (PyPI ``kcl-rs``, a Rust KCL with in-process Python processors) for ``bench/process_tree.py``.

Runs in its own venv (``process_tree.py`` makes one), never the project's. One process: the Rust KCL on
its own threads and, per shard, an instance of the same decoding processor as ``tree_processor.py``
(json-parse every record, checkpoint each batch, one line per batch to ``BENCH_BATCH_LOG``). Endpoints
come from ``AWS_ENDPOINT_URL_KINESIS`` / ``AWS_ENDPOINT_URL_DYNAMODB``; SIGTERM shuts it down.

    python tree_kclrs_worker.py STREAM APPLICATION MAX_RECORDS IDLE_MS
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Any

import kcl_rs


class DecodingProcessor(kcl_rs.RecordProcessorBase):
    def __init__(self) -> None:
        self._log = open(os.environ["BENCH_BATCH_LOG"], "a", buffering=1)  # noqa: SIM115 - lives as long as the worker
        self._shard = "?"
        self.total = 0.0

    def initialize(self, initialize_input: Any) -> None:
        self._shard = initialize_input.shard_id

    def process_records(self, process_records_input: Any) -> None:
        start = time.time()
        records = process_records_input.records
        loads = json.loads
        total = 0.0
        for record in records:
            total += loads(record.data)["amount"]
        self.total += total
        if records:
            process_records_input.checkpointer.checkpoint()
        self._log.write(f"{self._shard} {start:.6f} {time.time():.6f} {len(records)}\n")

    def lease_lost(self, lease_lost_input: Any) -> None:
        pass

    def shard_ended(self, shard_ended_input: Any) -> None:
        shard_ended_input.checkpointer.checkpoint()

    def shutdown_requested(self, shutdown_requested_input: Any) -> None:
        shutdown_requested_input.checkpointer.checkpoint()


def main() -> None:
    stream, app, max_records, idle_ms = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    scheduler = kcl_rs.Scheduler(
        stream_name=stream,
        application_name=app,
        record_processor_factory=DecodingProcessor,
        region=os.environ.get("AWS_REGION", "us-east-1"),
        initial_position="TRIM_HORIZON",
        retrieval_mode="POLLING",
        max_records=max_records,
        idle_time_between_reads_millis=idle_ms,
        shard_sync_interval_millis=5000,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    scheduler.start()
    while not stop.wait(0.5):
        pass
    scheduler.shutdown()


if __name__ == "__main__":
    main()
