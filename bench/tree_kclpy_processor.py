"""The decoding amazon_kclpy (v3 API) processor of ``bench/process_tree.py``, for kcl-daemon and Java.

The same work as ``tree_processor.py``: base64-decode each record (amazon_kclpy's ``binary_data``),
parse it as JSON, add up one field, checkpoint at the end of each batch, and append one line per batch to
``BENCH_BATCH_LOG``.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from amazon_kclpy import kcl
from amazon_kclpy.v3 import processor


class DecodingProcessor(processor.RecordProcessorBase):
    def __init__(self) -> None:
        self._log = open(os.environ["BENCH_BATCH_LOG"], "a", buffering=1)  # noqa: SIM115 - lives as long as the child
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
            total += loads(record.binary_data)["amount"]
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


if __name__ == "__main__":
    kcl.KCLProcess(DecodingProcessor()).run()
