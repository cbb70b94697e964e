"""What a shard consumer needs from the outside world, as small protocols.

Polling Kinesis, a replay file and in-memory fakes all implement :class:`RecordSource`; the DynamoDB
lease table and replay's in-memory store implement :class:`CheckpointStore`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import ChildShard
from kcl_daemon.process.child import ChildProcess
from kcl_protocol import AnyRecord


@dataclass(frozen=True, slots=True)
class Batch:
    records: tuple[AnyRecord, ...]
    millis_behind_latest: int | None = None


class RecordSource(Protocol):
    async def start(self, after: ExtendedSequenceNumber) -> None:
        """(Re)position the source so the next batch starts right after ``after`` (a checkpoint)."""

    async def next_batch(self) -> Batch | None:
        """The next batch (possibly empty), or None once the shard has ended.

        Records come in increasing (sequence number, sub-sequence number) order, as Kinesis returns them.
        """


class ShardRecordSource(RecordSource, Protocol):
    """A RecordSource that knows the shard's children once it has ended (None until then)."""

    child_shards: tuple[ChildShard, ...] | None


class CheckpointStore(Protocol):
    async def load(self) -> ExtendedSequenceNumber:
        """The shard's current checkpoint."""

    async def save(self, target: ExtendedSequenceNumber) -> None:
        """Persist ``target``; raise :class:`~kcl_daemon.errors.CheckpointRefused` with the Java name."""


#: Starts a new child for the shard.
ChildLauncher = Callable[[], Awaitable[ChildProcess]]
