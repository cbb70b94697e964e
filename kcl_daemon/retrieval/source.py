"""What every record source of a shard looks like: polling, enhanced fan-out, a replay file, test fakes.

A shard consumer reads through :class:`RecordSource`; a shard task also needs the shard's children once
it has ended (:class:`ShardRecordSource`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import ChildShard
from kcl_protocol import AnyRecord


@dataclass(frozen=True, slots=True)
class Batch:
    #: a tuple, or a :class:`kcl_protocol.RecordColumns` (a page held column by column)
    records: Sequence[AnyRecord]
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
