"""Write Kinesis record processors for kcl-daemon (or the Java MultiLangDaemon) in plain Python.

::

    from kcl_client import ProcessRecordsInput, RecordProcessor, run

    class Printer(RecordProcessor):
        def process_records(self, batch: ProcessRecordsInput) -> None:
            for record in batch.records:
                print(record.partition_key, record.text)  # print() goes to stderr, never the protocol
            batch.checkpointer.checkpoint()

    if __name__ == "__main__":
        run(Printer())

See ``clients/python/README.md`` for the whole API.
"""

from kcl_client._checkpointer import Checkpointer
from kcl_client._errors import RETRIABLE_ERRORS, CheckpointError, ProtocolError
from kcl_client._processor import ProcessRecordsInput, RecordProcessor
from kcl_client._records import Position, Record
from kcl_client._run import run

__all__ = [
    "RETRIABLE_ERRORS",
    "CheckpointError",
    "Checkpointer",
    "Position",
    "ProcessRecordsInput",
    "ProtocolError",
    "Record",
    "RecordProcessor",
    "run",
]
