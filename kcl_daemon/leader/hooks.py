"""What the lease-assignment modes need from the worker that runs them, as one small protocol.

The worker's scheduler implements it; the modes never import the worker (it sits above them).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from kcl_daemon.leases.coordinator import LeaseCoordinator
from kcl_daemon.supervise import LoopFactory


class WorkerHooks(Protocol):
    #: set on a graceful stop when a restart grace keeps this worker's leases for its return: until when
    #: (epoch seconds); each lease is marked with it as the worker lets go (core.leases.restart_grace)
    keep_leases_until: float | None

    @property
    def coordinator(self) -> LeaseCoordinator:
        """The worker's lease coordinator: renewals, the 2.x taker, adopting assigned leases."""

    def add_loop(self, name: str, factory: LoopFactory) -> asyncio.Task[None]:
        """Start one more supervised background loop (cancelled when the worker stops)."""

    def stop_shard(self, lease_key: str) -> asyncio.Task[None] | None:
        """Hand-off: shut the shard's consumer down and do not start it again; returns its runner."""

    def bytes_delivered(self, lease_key: str) -> int | None:
        """Bytes delivered to the shard's child so far (None when it has no consumer)."""
