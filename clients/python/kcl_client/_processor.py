"""The :class:`RecordProcessor` base class a user subclasses, and the batch passed to it.

One child process serves one shard, so one processor instance sees exactly one shard's life:
``initialize``, then ``process_records`` zero or more times, then at most one of ``lease_lost`` or
``shard_ended`` (possibly after ``shutdown_requested``), then the process exits when stdin closes.
Only ``process_records`` must be written; every other method has a sensible default.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from kcl_client._checkpointer import Checkpointer
from kcl_client._errors import CheckpointError
from kcl_client._messages import dead_letter_line, log_line, metric_line
from kcl_client._records import Position, Record

_LEVELS = {"warn": logging.WARNING, "fatal": logging.CRITICAL, **logging.getLevelNamesMapping()}
_LEVELS = {name.lower(): level for name, level in _LEVELS.items()}


class Telemetry(Protocol):
    def offered(self, action: str) -> bool: ...

    def send(self, line: bytes) -> None: ...


logger = logging.getLogger("kcl_client")

_SHARD_END_RETRIES = 3


@dataclass(frozen=True, slots=True)
class ProcessRecordsInput:
    """One delivered batch: its records in shard order, how far behind the tip it is, and a checkpointer."""

    records: tuple[Record, ...]
    millis_behind_latest: int | None
    checkpointer: Checkpointer


class RecordProcessor(abc.ABC):
    """Subclass this and pass an instance to :func:`kcl_client.run`.

    An exception raised by any method is logged (with its traceback) to stderr and the daemon still gets
    its status, so one bad record does not stop the shard. Checkpoint only after the records are really
    processed: the next owner of the shard resumes after the last checkpoint.
    """

    _telemetry: Telemetry | None = None
    #: the shard's stream when the daemon reads several (kcl-daemon's streamNames), set before
    #: ``initialize``; None for a single-stream daemon (and the Java daemon)
    stream_name: str | None = None
    #: that stream's ``accountId:streamName:creationEpoch`` (a re-created stream has a new one)
    stream_identifier: str | None = None

    def log(self, level: str, message: str) -> None:
        """Have the daemon log ``message`` under this shard at ``level`` (debug, info, warning, error,
        critical). Without kcl-daemon's channel (the Java daemon), it is logged to stderr instead."""
        if self._telemetry is not None and self._telemetry.offered("log"):
            self._telemetry.send(log_line(level, message))
        else:
            logger.log(_LEVELS.get(level.lower(), logging.INFO), "%s", message)

    def metric(
        self, name: str, value: float, unit: str | None = None, dimensions: Mapping[str, str] | None = None
    ) -> None:
        """Export one value of a metric with the daemon's metrics (Prometheus, CloudWatch, OTLP). ``unit``
        is a CloudWatch unit (``Count``, ``Milliseconds``, ``Bytes``, ...). Without kcl-daemon's channel it
        is dropped. The daemon rate-limits the channel and bounds the number of distinct series."""
        if self._telemetry is not None and self._telemetry.offered("metric"):
            self._telemetry.send(metric_line(name, value, unit, dimensions or {}))

    def dead_letter(self, record: Record, reason: str) -> bool:
        """Hand ``record`` (of the batch being processed) to the daemon's dead-letter destination and go on:
        it is written before any later checkpoint of yours is, and never delivered again. True when the
        daemon offered it (kcl-daemon with ``poisonRecordPolicy = DEAD_LETTER``); False otherwise (the
        Java daemon, another policy): then it is up to you (raise, or skip the record)."""
        if self._telemetry is None or not self._telemetry.offered("deadLetter"):
            return False
        self._telemetry.send(dead_letter_line(record.sequence_number, record.sub_sequence_number, reason))
        return True

    def initialize(self, shard_id: str, checkpoint: Position) -> None:  # noqa: B027 (optional hook)
        """Called once, before any records. ``checkpoint`` is where processing resumes."""

    @abc.abstractmethod
    def process_records(self, batch: ProcessRecordsInput) -> None:
        """Process ``batch.records``; checkpoint with ``batch.checkpointer`` when that is safe."""

    def lease_lost(self) -> None:  # noqa: B027 (optional hook)
        """Another worker took this shard. Checkpointing is no longer possible; clean up and return."""

    def shard_ended(self, checkpointer: Checkpointer) -> None:
        """The shard is fully read (it was split or merged). The default checkpoints the end of the shard.

        A shard must be checkpointed at its end before its child shards are processed, so an override must
        call ``checkpointer.checkpoint()`` too.
        """
        try:
            checkpointer.checkpoint(retries=_SHARD_END_RETRIES)
        except CheckpointError as exc:
            logger.warning("could not checkpoint the end of the shard: %s", exc)

    def shutdown_requested(self, checkpointer: Checkpointer) -> None:  # noqa: B027 (optional hook)
        """The worker is shutting down, or the lease is being handed to another worker.

        This is the last chance to checkpoint (``checkpointer.checkpoint()`` for everything delivered).
        The default does nothing, which suits a processor that checkpoints in ``process_records``.
        """
