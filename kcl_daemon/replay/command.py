"""`kcl-daemon replay`: run the configured record processor over records from a file, without AWS.

Every shard in the file gets its own child and the full protocol and supervision of the real daemon:
initialize, processRecords in batches with checkpoint round trips, restarts with backoff from the last
checkpoint, and finally ``shardEnded``. Checkpoints live in memory and are reported at the end.
The first Ctrl-C (or SIGTERM/SIGHUP) asks every child to shut down; the second kills them all and
stops at once (``kcl_daemon.stopping``).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from kcl_daemon.config.settings import Settings
from kcl_daemon.core.lifecycle.states import ShardState, ShutdownReason
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.errors import CheckpointRefused
from kcl_daemon.lifecycle.configure import consumer_settings
from kcl_daemon.lifecycle.shard_consumer import (
    ShardConsumer,
    ShardOutcome,
    make_child_launcher,
)
from kcl_daemon.replay.input import InjectedFailure
from kcl_daemon.retrieval.source import Batch
from kcl_daemon.stopping import StoppedAtOnce, StopSignals
from kcl_protocol import CheckpointErrorName, Record

logger = logging.getLogger(__name__)


class ListRecordSource:
    """Serves a fixed list of records in batches; the shard ends after the last one."""

    def __init__(self, records: Sequence[Record], batch_size: int) -> None:
        self._records = list(records)
        self._keys = [ExtendedSequenceNumber(r.sequence_number, r.sub_sequence_number) for r in self._records]
        self._batch_size = batch_size
        self._next = 0

    async def start(self, after: ExtendedSequenceNumber) -> None:
        self._next = bisect.bisect_right(self._keys, after)  # sentinels sort before every number

    async def next_batch(self) -> Batch | None:
        if self._next >= len(self._records):
            return None
        batch = self._records[self._next : self._next + self._batch_size]
        self._next += len(batch)
        return Batch(tuple(batch), millis_behind_latest=0)


@dataclass(frozen=True, slots=True)
class CheckpointEvent:
    target: ExtendedSequenceNumber
    error: str | None  # None = written


@dataclass(slots=True)
class InMemoryCheckpointStore:
    """Holds one shard's checkpoint; can fail chosen attempts with a Java error name."""

    checkpoint: ExtendedSequenceNumber
    failures: list[InjectedFailure] = field(default_factory=list)
    history: list[CheckpointEvent] = field(default_factory=list)
    attempts: int = 0
    simulated_lease_loss: bool = False

    async def load(self) -> ExtendedSequenceNumber:
        return self.checkpoint

    async def save(self, target: ExtendedSequenceNumber) -> None:
        self.attempts += 1
        for failure in self.failures:
            if failure.attempt in (None, self.attempts):
                self.failures.remove(failure)
                self.history.append(CheckpointEvent(target, failure.java_name))
                self.simulated_lease_loss |= failure.java_name == CheckpointErrorName.SHUTDOWN
                raise CheckpointRefused(
                    failure.java_name, f"injected by --fail-checkpoint (attempt {self.attempts})"
                )
        self.checkpoint = target
        self.history.append(CheckpointEvent(target, None))


@dataclass(frozen=True, slots=True)
class ShardReport:
    outcome: ShardOutcome
    history: tuple[CheckpointEvent, ...]
    records_in_file: int
    simulated_lease_loss: bool = False

    @property
    def ended_cleanly(self) -> bool:
        """The child finished its shard at SHARD_END, or answered the lease loss we simulated."""
        if self.outcome.state is not ShardState.SHUTDOWN_COMPLETE:
            return False
        if self.outcome.reason is ShutdownReason.LEASE_LOST:
            return self.simulated_lease_loss
        return self.outcome.reason is ShutdownReason.SHARD_END and self.outcome.checkpoint.is_shard_end


async def run_replay(
    settings: Settings,
    shards: dict[str, list[Record]],
    *,
    batch_size: int,
    initial_checkpoint: ExtendedSequenceNumber,
    failures: Sequence[InjectedFailure] = (),
    cwd: str | None = None,
) -> list[ShardReport]:
    assert settings.executable is not None
    launch = make_child_launcher(settings.executable, line_limit_bytes=settings.child_max_line_bytes, cwd=cwd)
    common = consumer_settings(settings, return_when_parked=True)
    stores = {shard: InMemoryCheckpointStore(initial_checkpoint, list(failures)) for shard in shards}
    consumers = [
        ShardConsumer(shard, ListRecordSource(records, batch_size), stores[shard], launch, common)
        for shard, records in shards.items()
    ]
    running = asyncio.ensure_future(asyncio.gather(*(c.run() for c in consumers)))
    signals = StopSignals(on_first=lambda: _request_shutdown(consumers), on_second=running.cancel)
    with signals:
        try:
            outcomes = await running
        except asyncio.CancelledError:
            if not signals.immediate:
                raise
            raise StoppedAtOnce(
                f"stopped at once by a second {signals.received[-1]}; checkpoints were not reported"
            ) from None
    return [
        ShardReport(
            outcome,
            tuple(stores[outcome.shard_id].history),
            len(shards[outcome.shard_id]),
            stores[outcome.shard_id].simulated_lease_loss,
        )
        for outcome in outcomes
    ]


def _request_shutdown(consumers: Sequence[ShardConsumer]) -> None:
    logger.warning("interrupted: asking every child to shut down (interrupt again to stop at once)")
    for consumer in consumers:
        consumer.request_shutdown()
