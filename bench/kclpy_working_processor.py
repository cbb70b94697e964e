"""An ordinary amazon_kclpy (v3 API) processor for both daemons in the throughput benchmarks.

Unlike ``kclpy_noop_processor.py`` it touches every record, as a user's processor would: it decodes each
record's data (amazon_kclpy's ``binary_data``: base64), appends it with its sequence number as one line
to a file of its own (``BENCH_OUTPUT_DIR/<shard>.out``), and checkpoints at the record it has just
written after every 1,000 records (so a batch of 10,000 makes ten checkpoint round trips, in the middle
of the batch, as amazon_kclpy's samples do). Nothing else: the same file for kcl-daemon and Java.

Like the no-op processor it appends one line per batch to ``BENCH_BATCH_LOG`` ("<shard> <start epoch s>
<end epoch s> <records>"), which is how the benchmarks see each batch for either daemon.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from amazon_kclpy import kcl
from amazon_kclpy.v3 import processor

CHECKPOINT_EVERY = 1000


class WorkingProcessor(processor.RecordProcessorBase):
    def __init__(self) -> None:
        self._log = open(os.environ["BENCH_BATCH_LOG"], "a", buffering=1)  # noqa: SIM115 - lives as long as the child
        self._out_dir = Path(os.environ.get("BENCH_OUTPUT_DIR", "."))
        self._out: Any = None
        self._shard = "?"
        self._since_checkpoint = 0

    def initialize(self, initialize_input: Any) -> None:
        self._shard = initialize_input.shard_id
        self._out = (self._out_dir / f"{self._shard}.out").open("ab")

    def process_records(self, process_records_input: Any) -> None:
        start = time.time()
        records = process_records_input.records
        out = self._out
        for record in records:
            data = record.binary_data
            out.write(record.sequence_number.encode() + b" " + data + b"\n")
            self._since_checkpoint += 1
            if self._since_checkpoint >= CHECKPOINT_EVERY:
                out.flush()
                process_records_input.checkpointer.checkpoint(
                    record.sequence_number, record.sub_sequence_number
                )
                self._since_checkpoint = 0
        out.flush()
        self._log.write(f"{self._shard} {start:.6f} {time.time():.6f} {len(records)}\n")

    def lease_lost(self, lease_lost_input: Any) -> None:
        pass

    def shard_ended(self, shard_ended_input: Any) -> None:
        shard_ended_input.checkpointer.checkpoint()

    def shutdown_requested(self, shutdown_requested_input: Any) -> None:
        shutdown_requested_input.checkpointer.checkpoint()


if __name__ == "__main__":
    kcl.KCLProcess(WorkingProcessor()).run()
