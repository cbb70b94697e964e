"""A shard's checkpoints in the lease table, written through the coordinator (the held lease's counter).

Implements :class:`kcl_daemon.lifecycle.ports.CheckpointStore`. A write the table refuses because the
lease moved becomes ``ShutdownException`` for the child, as in Java: this worker no longer owns the
shard. A throttled write is ``ThrottlingException`` and any other failure
``KinesisClientLibDependencyException``, as in Java; the processor decides whether to retry.

The SHARD_END checkpoint is different: the child cannot do anything useful with an error there (it
would answer ``shardEnded`` without the checkpoint, be restarted and get the shard's last batch
again), so a failed SHARD_END write is retried in place (policy ``SHARD_END``) for as long as the
lease is held.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from kcl_daemon.clock import Clock, SystemClock
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.errors import CheckpointRefused, KclError, LeaseConflict, Throttled
from kcl_daemon.retry import SHARD_END
from kcl_protocol import CheckpointErrorName

logger = logging.getLogger(__name__)


def retry_in_place(exc: BaseException) -> bool:
    """Shard-end writes: every lease-table error but a lost lease is worth another try."""
    return isinstance(exc, KclError) and not isinstance(exc, LeaseConflict)


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
    def __init__(self, coordinator: CheckpointWriter, lease_key: str, *, clock: Clock | None = None) -> None:
        self._coordinator = coordinator
        self._lease_key = lease_key
        self._clock = clock or SystemClock()
        self.child_shard_ids: tuple[str, ...] = ()  # written with SHARD_END, once known

    async def load(self) -> ExtendedSequenceNumber:
        lease = self._coordinator.held_lease(self._lease_key)
        if lease is None:
            raise CheckpointRefused(CheckpointErrorName.SHUTDOWN, f"lease {self._lease_key} is not held")
        return lease.checkpoint

    async def save(self, target: ExtendedSequenceNumber) -> None:
        children = self.child_shard_ids if target.is_shard_end else None
        try:
            if target.is_shard_end:
                await self._save_shard_end(target, children)
            else:
                await self._coordinator.checkpoint(self._lease_key, target, child_shard_ids=children)
        except LeaseConflict as exc:
            raise CheckpointRefused(
                CheckpointErrorName.SHUTDOWN, f"lease {self._lease_key} was lost: {exc}"
            ) from exc
        except Throttled as exc:
            raise CheckpointRefused(CheckpointErrorName.THROTTLING, str(exc)) from exc
        except KclError as exc:
            raise CheckpointRefused(CheckpointErrorName.DEPENDENCY, str(exc)) from exc

    async def _save_shard_end(self, target: ExtendedSequenceNumber, children: Iterable[str] | None) -> None:
        retrying = SHARD_END.async_retrying(
            sleep=self._clock.sleep, monotonic=self._clock.monotonic, retry_if=retry_in_place
        )
        async for attempt in retrying:
            with attempt:
                if self._coordinator.held_lease(self._lease_key) is None:
                    raise LeaseConflict(f"lease {self._lease_key} is no longer held")
                try:
                    await self._coordinator.checkpoint(self._lease_key, target, child_shard_ids=children)
                except LeaseConflict:
                    raise
                except KclError as exc:
                    logger.warning(
                        "lease %s: the SHARD_END checkpoint failed, retrying in place: %s",
                        self._lease_key,
                        exc,
                    )
                    raise
