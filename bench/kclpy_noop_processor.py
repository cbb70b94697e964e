"""The same unmodified-style amazon_kclpy (v3 API) no-op processor for both daemons in bench/vs_java.py.

Drops every record, checkpoints each batch, and appends one line per batch to the file named by
``BENCH_BATCH_LOG`` ("<shard> <start epoch s> <end epoch s> <records>"), so the benchmark sees when the first
record arrived and when the last batch was checkpointed, the same way for either daemon.
"""

from __future__ import annotations

import os
import time
from typing import Any

from amazon_kclpy import kcl
from amazon_kclpy.v3 import processor


class NoopProcessor(processor.RecordProcessorBase):
    def __init__(self) -> None:
        self._log = open(os.environ["BENCH_BATCH_LOG"], "a", buffering=1)  # noqa: SIM115 - lives as long as the child
        self._shard = "?"

    def initialize(self, initialize_input: Any) -> None:
        self._shard = initialize_input.shard_id

    def process_records(self, process_records_input: Any) -> None:
        start = time.time()
        records = process_records_input.records
        if records:
            process_records_input.checkpointer.checkpoint()
        self._log.write(f"{self._shard} {start:.6f} {time.time():.6f} {len(records)}\n")

    def lease_lost(self, lease_lost_input: Any) -> None:
        pass

    def shard_ended(self, shard_ended_input: Any) -> None:
        shard_ended_input.checkpointer.checkpoint()

    def shutdown_requested(self, shutdown_requested_input: Any) -> None:
        shutdown_requested_input.checkpointer.checkpoint()


if __name__ == "__main__":
    kcl.KCLProcess(NoopProcessor()).run()
