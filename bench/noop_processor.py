"""A no-op kcl_client record processor for the benchmarks: drops every record, checkpoints each batch.

kcl-daemon executableName = python bench/noop_processor.py
"""

from __future__ import annotations

from kcl_client import ProcessRecordsInput, RecordProcessor, run


class NoopProcessor(RecordProcessor):
    def process_records(self, batch: ProcessRecordsInput) -> None:
        if batch.records:
            batch.checkpointer.checkpoint()


if __name__ == "__main__":
    run(NoopProcessor())
