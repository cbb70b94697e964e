"""The conformance processor of protocol/transcripts/README.md, written with kcl_client.

Per record: payload ``checkpoint`` checkpoints at that record, ``checkpoint-batch`` checkpoints everything
delivered so far, anything else (including bytes that are not UTF-8) does nothing. ``shard_ended`` and
``shutdown_requested`` checkpoint everything delivered. ``log`` and ``metric`` use kcl-daemon's
channel; ``dead-letter`` hands the record to the dead-letter destination (reason ``conformance``) when
the daemon offered it. A ``ThrottlingException`` is retried once,
immediately; any other checkpoint error is logged and processing carries on.
"""

from __future__ import annotations

import logging

from kcl_client import Checkpointer, CheckpointError, ProcessRecordsInput, Record, RecordProcessor, run

logger = logging.getLogger("conformance")


def checkpoint(checkpointer: Checkpointer, record: Record | None = None) -> None:
    for attempt in (1, 2):
        try:
            checkpointer.checkpoint(record)
        except CheckpointError as exc:
            if exc.name == "ThrottlingException" and attempt == 1:
                continue
            logger.warning("checkpoint failed: %s", exc)
        return


class Conformance(RecordProcessor):
    def process_records(self, batch: ProcessRecordsInput) -> None:
        for record in batch.records:
            try:
                text = record.text
            except UnicodeDecodeError:
                continue
            if text == "checkpoint":
                checkpoint(batch.checkpointer, record)
            elif text == "log":
                self.log("info", "log")
            elif text == "metric":
                self.metric("conformance", 1, unit="Count", dimensions={"source": "transcript"})
            elif text == "dead-letter":
                self.dead_letter(record, "conformance")
            elif text == "checkpoint-batch":
                checkpoint(batch.checkpointer)

    def shard_ended(self, checkpointer: Checkpointer) -> None:
        checkpoint(checkpointer)

    def shutdown_requested(self, checkpointer: Checkpointer) -> None:
        checkpoint(checkpointer)


if __name__ == "__main__":
    run(Conformance)  # the class: takes kcl-daemon's offer of lanes (protocol/transcripts/lanes.jsonl)
