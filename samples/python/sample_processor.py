"""A sample record processor for kcl-daemon, written with kcl_client (clients/python).

It logs one summary per batch to stderr (record count, bytes, the first record's partition key and
sequence number; never the payload: that is your data), sends the batch size as a metric on kcl-daemon's
channel (exported with the daemon's metrics; nothing under the Java daemon), checkpoints at the end of
a batch at most every 10 seconds, and checkpoints properly when the shard ends or the worker shuts
down. Throttled checkpoints are retried with a backoff.

Run it under the daemon with ``kcl-daemon run --properties app.properties`` (from this directory), or
without AWS: ``kcl-daemon replay --properties app.properties --records ../records.jsonl``.
"""

from __future__ import annotations

import logging
import time

from kcl_client import Checkpointer, CheckpointError, Position, ProcessRecordsInput, RecordProcessor, run

logger = logging.getLogger("sample_processor")

CHECKPOINT_INTERVAL_S = 10.0
CHECKPOINT_RETRIES = 5  # ThrottlingException: wait 1 s, 2 s, 4 s, 8 s, 16 s, then give up
CHECKPOINT_BACKOFF_S = 1.0


class SampleProcessor(RecordProcessor):
    def __init__(self) -> None:
        self.shard_id = "?"
        self.last_checkpoint = time.monotonic()

    def initialize(self, shard_id: str, checkpoint: Position) -> None:
        self.shard_id = shard_id
        self.last_checkpoint = time.monotonic()
        logger.info("%s: starting after %s", shard_id, checkpoint.sequence_number)

    def process_records(self, batch: ProcessRecordsInput) -> None:
        for _record in batch.records:
            pass  # Your processing goes here. Checkpoint only what is really done.
        if batch.records:
            first = batch.records[0]
            logger.info(
                "%s: %d record(s), %d bytes, first record key=%s seq=%s/%d, %s ms behind",
                self.shard_id,
                len(batch.records),
                sum(record.size for record in batch.records),
                first.partition_key,
                first.sequence_number,
                first.sub_sequence_number,
                batch.millis_behind_latest,
            )
            self.metric("sample_batch_records", len(batch.records), unit="Count")
        if time.monotonic() - self.last_checkpoint >= CHECKPOINT_INTERVAL_S:
            self.checkpoint(batch.checkpointer)

    def shard_ended(self, checkpointer: Checkpointer) -> None:
        # Mandatory: the child shards are only processed once this shard is checkpointed at its end.
        logger.info("%s: shard ended", self.shard_id)
        self.checkpoint(checkpointer)

    def shutdown_requested(self, checkpointer: Checkpointer) -> None:
        logger.info("%s: shutdown requested", self.shard_id)
        self.checkpoint(checkpointer)

    def lease_lost(self) -> None:
        logger.info("%s: lease lost; another worker has this shard now", self.shard_id)

    def checkpoint(self, checkpointer: Checkpointer) -> None:
        """Checkpoint everything delivered so far, retrying throttling; never let a failure stop the shard."""
        try:
            checkpointer.checkpoint(retries=CHECKPOINT_RETRIES, backoff_s=CHECKPOINT_BACKOFF_S)
        except CheckpointError as exc:
            if exc.name == "ShutdownException":
                logger.info("%s: lease already gone, not checkpointing", self.shard_id)
            else:
                logger.warning("%s: checkpoint failed, will try after the next batch: %s", self.shard_id, exc)
            return
        self.last_checkpoint = time.monotonic()


if __name__ == "__main__":
    run(SampleProcessor())
