"""What a shard consumer needs from the outside world besides its records, as small protocols.

The DynamoDB lease table and replay's in-memory store implement :class:`CheckpointStore`; records come
from a :class:`kcl_daemon.retrieval.source.RecordSource`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.process.child import ChildProcess


class CheckpointStore(Protocol):
    async def load(self) -> ExtendedSequenceNumber:
        """The shard's current checkpoint."""

    async def save(self, target: ExtendedSequenceNumber) -> None:
        """Persist ``target``; raise :class:`~kcl_daemon.errors.CheckpointRefused` with the Java name."""


#: Starts a new child for the shard.
ChildLauncher = Callable[[], Awaitable[ChildProcess]]
