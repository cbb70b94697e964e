"""The decoding kcl_client processor of ``bench/process_tree.py``: json-parses every record's payload.

The client has already base64-decoded each record (``record.data`` is bytes); this processor parses it as
JSON, adds up one field, checkpoints at the end of each batch and appends one line per batch to
``BENCH_BATCH_LOG`` ("<shard> <start epoch s> <end epoch s> <records>"), like the other bench processors.
``tree_kclpy_processor.py`` (amazon_kclpy) and ``tree_kclrs_worker.py`` (kcl-rs) do exactly the same.
With ``BENCH_PROFILE_DIR`` set it runs under cProfile and leaves ``<pid>.prof`` there when stdin closes.
"""

from __future__ import annotations

import json
import os
import time

from kcl_client import Position, ProcessRecordsInput, RecordProcessor, run


class DecodingProcessor(RecordProcessor):
    def __init__(self) -> None:
        self._log = open(os.environ["BENCH_BATCH_LOG"], "a", buffering=1)  # noqa: SIM115 - lives as long as the child
        self._shard = "?"
        self.total = 0.0

    def initialize(self, shard_id: str, checkpoint: Position) -> None:
        self._shard = shard_id

    def process_records(self, batch: ProcessRecordsInput) -> None:
        start = time.time()
        loads = json.loads
        total = 0.0
        for record in batch.records:
            total += loads(record.data)["amount"]
        self.total += total
        if batch.records:
            batch.checkpointer.checkpoint()
        self._log.write(f"{self._shard} {start:.6f} {time.time():.6f} {len(batch.records)}\n")


def main() -> None:
    """Serve the protocol; with ``BENCH_PROFILE_DIR`` set, under cProfile (``<dir>/<pid>.prof``)."""
    profile_dir = os.environ.get("BENCH_PROFILE_DIR")
    if not profile_dir:
        run(DecodingProcessor)  # the class: several shards in this process when kcl-daemon offers lanes
        return
    import cProfile

    profiler = cProfile.Profile()
    profiler.runcall(run, DecodingProcessor)
    profiler.dump_stats(os.path.join(profile_dir, f"{os.getpid()}.prof"))


if __name__ == "__main__":
    main()
