"""A shard's checkpoints in the lease table, written through the coordinator (the held lease's counter).

Implements :class:`kcl_daemon.consumer.ports.CheckpointStore`. A write the table refuses because the
lease moved becomes ``ShutdownException`` for the child, as in Java: this worker no longer owns the
shard. A throttled write is ``ThrottlingException`` and any other failure
``KinesisClientLibDependencyException``, as in Java; the processor decides whether to retry.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from kcl_daemon.core.lease import Lease
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.errors import CheckpointRefused, KclError, LeaseConflict, Throttled
from kcl_protocol import CheckpointErrorName


class CheckpointWriter(Protocol):
    def held_lease(self, lease_key: str) -> Lease | None: ...

    async def checkpoint(
        self,
        lease_key: str,
        target: ExtendedSequenceNumber,
        *,
        child_shard_ids: Iterable[str] | None = None,
    ) -> Lease: ...


class LeaseCheckpointStore:
    def __init__(self, coordinator: CheckpointWriter, lease_key: str) -> None:
        self._coordinator = coordinator
        self._lease_key = lease_key
        self.child_shard_ids: tuple[str, ...] = ()  # written with SHARD_END, once known

    async def load(self) -> ExtendedSequenceNumber:
        lease = self._coordinator.held_lease(self._lease_key)
        if lease is None:
            raise CheckpointRefused(CheckpointErrorName.SHUTDOWN, f"lease {self._lease_key} is not held")
        return lease.checkpoint

    async def save(self, target: ExtendedSequenceNumber) -> None:
        children = self.child_shard_ids if target.is_shard_end else None
        try:
            await self._coordinator.checkpoint(self._lease_key, target, child_shard_ids=children)
        except LeaseConflict as exc:
            raise CheckpointRefused(
                CheckpointErrorName.SHUTDOWN, f"lease {self._lease_key} was lost: {exc}"
            ) from exc
        except Throttled as exc:
            raise CheckpointRefused(CheckpointErrorName.THROTTLING, str(exc)) from exc
        except KclError as exc:
            raise CheckpointRefused(CheckpointErrorName.DEPENDENCY, str(exc)) from exc
