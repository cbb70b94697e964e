"""Drives one shard through its lifecycle (``kcl_daemon.core.lifecycle.states``) with its own child process.

The consumer is the imperative shell: the transition table decides the next state, the restart policy
decides between a restart and parking, the checkpoint rules decide each checkpoint; this module only
starts children, moves batches and persists checkpoints. A child fault never escapes: it becomes a
``child-failed`` event, the child is stopped, and a new one starts from the last checkpoint after a
backoff - or the shard is parked once it fails too often without progress. Lease loss and shutdown
requests are signals (:meth:`ShardConsumer.lease_lost`, :meth:`ShardConsumer.request_shutdown`) that
take effect between two actions, as in the Java KCL. The poison-record path (held batches, their
bisection, records skipped or dead-lettered) is :mod:`kcl_daemon.lifecycle.poison_delivery`; the settings,
stats and outcome are :mod:`kcl_daemon.lifecycle.settings`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from kcl_daemon.clock import Clock, SystemClock, sleep_unless_set
from kcl_daemon.core.lifecycle.checkpoint_rules import (
    AlreadyCheckpointed,
    CheckpointBounds,
    RefuseCheckpoint,
    WriteCheckpoint,
    decide_checkpoint,
)
from kcl_daemon.core.lifecycle.checkpoint_validity import unusable_checkpoint
from kcl_daemon.core.lifecycle.poison import Bisection, PoisonPolicy
from kcl_daemon.core.lifecycle.restart_policy import FailureHistory, Park, decide_restart
from kcl_daemon.core.lifecycle.states import (
    CHECKPOINT_ALLOWED,
    ShardEvent,
    ShardState,
    ShutdownReason,
    next_state,
)
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.core.shards.multi_stream import stream_fields
from kcl_daemon.errors import CheckpointRefused, CheckpointUnusable, ChildFault, ChildProtocolViolation
from kcl_daemon.lifecycle.poison_delivery import PoisonDelivery
from kcl_daemon.lifecycle.poison_delivery import position_of as _position
from kcl_daemon.lifecycle.ports import CheckpointStore, ChildLauncher
from kcl_daemon.lifecycle.settings import ConsumerSettings, ConsumerStats, ShardOutcome
from kcl_daemon.log_context import shard_id_var
from kcl_daemon.metrics.observer import NULL_SHARD_OBSERVER, ShardObserver
from kcl_daemon.process.channel_sink import ChannelSink
from kcl_daemon.process.child import ChildProcess
from kcl_daemon.process.lanes import LanePool
from kcl_daemon.process.session import ChildSession
from kcl_daemon.retrieval.prefetch import NothingYet, PrefetchingSource
from kcl_daemon.retrieval.source import Batch, RecordSource
from kcl_protocol import (
    ActionMessage,
    AnyRecord,
    ChannelOffer,
    CheckpointErrorName,
    CheckpointRequest,
    Initialize,
    LeaseLost,
    ProcessRecords,
    ShardEnded,
    ShutdownRequested,
    payload_bytes,
)
from kcl_protocol.extensions import CHANNEL_ACTIONS, DEAD_LETTER_ACTION

__all__ = [
    "BeforeShardEnd",
    "ConsumerSettings",
    "ConsumerStats",
    "MayDeliver",
    "ShardConsumer",
    "ShardOutcome",
    "make_child_launcher",
]

logger = logging.getLogger(__name__)

#: Runs when the shard has ended, before ``shardEnded`` is sent (the scheduler creates the child
#: leases here). False means "give the lease up": the child then gets ``leaseLost`` instead.
BeforeShardEnd = Callable[[], Awaitable[bool]]
#: Whether a batch expected to take so many seconds may be sent now (the lease's delivery fence).
MayDeliver = Callable[[float], bool]
#: How often a batch held back by the fence checks again (a lease renewed late flows again at once).
FENCE_POLL_S = 0.05
#: How long, at most, a batch's answer waits for the stderr line saying the wrapper swallowed an
#: exception (SKIP and DEAD_LETTER only; it was written before the answer, so it is already in the pipe).
STDERR_SETTLE_S = 0.005


class _Wake(asyncio.Event):
    """The consumer's signal flag; :meth:`notify` also resolves one future when it is set (waiting for
    a batch or a signal on one future: see ``_next_batch_or_signal``)."""

    def __init__(self) -> None:
        super().__init__()
        self._waiter: asyncio.Future[None] | None = None

    def notify(self, waiter: asyncio.Future[None]) -> None:
        self._waiter = waiter

    def set(self) -> None:
        super().set()
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class ShardConsumer(PoisonDelivery):
    def __init__(
        self,
        shard_id: str,
        source: RecordSource,
        store: CheckpointStore,
        launch_child: ChildLauncher,
        settings: ConsumerSettings,
        *,
        clock: Clock | None = None,
        before_shard_end: BeforeShardEnd | None = None,
        stream: str | None = None,
        observer: ShardObserver = NULL_SHARD_OBSERVER,
        may_deliver: MayDeliver | None = None,
    ) -> None:
        self.shard_id = shard_id
        #: multi-stream: the serialized stream identity, told to the child in ``initialize``
        self.stream = stream
        self.state = ShardState.WAITING_ON_PARENTS
        self.stats = ConsumerStats()
        self._source = source
        self._store = store
        self._launch_child = launch_child
        self._settings = settings
        self._clock = clock or SystemClock()
        self._before_shard_end = before_shard_end
        self._observer = observer
        self._may_deliver = may_deliver
        self._last_batch_s = 0.0
        self._signal: ShardEvent | None = None
        self._wake: _Wake = _Wake()
        self._session: ChildSession | None = None
        self._history = FailureHistory()
        self._reason: ShutdownReason | None = None
        self._parked_because: str | None = None
        self._checkpoint = ExtendedSequenceNumber("TRIM_HORIZON")
        self._largest_delivered = self._checkpoint
        self._in_flight_up_to: ExtendedSequenceNumber | None = None
        self._last_record_of_shard: ExtendedSequenceNumber | None = None
        #: For the readiness check (read from another thread: plain values only): when the child last
        #: finished a processRecords with records (or the consumer started), the records handed to it
        #: and not yet answered, and the last batch's millisBehindLatest.
        self.progress_at = self._clock.monotonic()
        self.records_in_flight = 0
        self.millis_behind_latest: int | None = None
        #: For the status page (read from another thread): when this consumer last wrote a checkpoint
        #: (monotonic; None: none yet), and the last stderr line of a child that has stopped.
        self.checkpointed_at: float | None = None
        self._last_stderr: str | None = None
        # Poison records (SKIP, DEAD_LETTER): the batch held after a failed delivery and its plan, the
        # records delivered and answered (the checkpoint's bound after a failure), the records set aside
        # (never delivered again by this consumer), and the exception reports of the child seen so far.
        self._held: Sequence[AnyRecord] = ()
        self._held_millis: int | None = None
        self._plan: Bisection | None = None
        self._answered_up_to = self._checkpoint
        self._set_aside: set[ExtendedSequenceNumber] = set()
        self._exceptions_seen = 0
        self._restart_for_plan = False
        self._in_flight_records: Sequence[AnyRecord] = ()
        #: The processor failed on every record of a batch: ordinary restarts (and parking) until it
        #: answers a batch again (kcl_daemon.core.lifecycle.poison.BROKEN_AFTER).
        self._broken = False

    @property
    def behind(self) -> bool:
        """Records wait for the child: a batch it has not finished, or the stream is ahead of us."""
        return self.records_in_flight > 0 or (self.millis_behind_latest or 0) > 0

    @property
    def checkpoint(self) -> ExtendedSequenceNumber:
        """The checkpoint loaded at the start or last written."""
        return self._checkpoint

    @property
    def child_pid(self) -> int | None:
        """The running child's pid (None between two children)."""
        session = self._session
        return None if session is None else getattr(session.child, "pid", None)

    @property
    def last_stderr_line(self) -> str | None:
        """The last line a child of this shard wrote on stderr: the running one's, else the last one's."""
        session = self._session
        tail = None if session is None else getattr(session.child, "stderr_tail", None)
        return tail[-1] if tail else self._last_stderr

    @property
    def stalled(self) -> str | None:
        """The action the child is stalled on (see ``childStallWarningMillis``), or None."""
        return None if self._session is None else self._session.stalled

    # -- signals from the scheduler ------------------------------------------------------------------

    def lease_lost(self) -> None:
        self._raise_signal(ShardEvent.LEASE_LOST)

    def request_shutdown(self) -> None:
        self._raise_signal(ShardEvent.SHUTDOWN_REQUESTED)

    def _raise_signal(self, event: ShardEvent) -> None:
        # A lost lease outranks a shutdown request; keep the stronger one.
        if self._signal is not ShardEvent.LEASE_LOST:
            self._signal = event
        self._wake.set()

    # -- the loop ------------------------------------------------------------------------------------

    def _feed(self, event: ShardEvent) -> None:
        new = next_state(self.state, event)
        if new is not self.state:
            logger.info("shard %s: %s -> %s (%s)", self.shard_id, self.state.value, new.value, event.value)
        self.state = new

    def _take_signal(self) -> bool:
        if self._signal is None:
            return False
        event, self._signal = self._signal, None
        self._wake.clear()
        self._feed(event)
        return True

    async def run(self) -> ShardOutcome:
        shard_id_var.set(self.shard_id if self.stream is None else f"{self.stream}:{self.shard_id}")
        try:
            await self._run()
        finally:
            await self._stop_child()
            self._observer.closed()
        return ShardOutcome(
            self.shard_id, self.state, self._reason, self._checkpoint, self.stats, self._parked_because
        )

    async def _run(self) -> None:
        if self._take_signal():
            return
        self._checkpoint = await self._store.load()
        if (problem := unusable_checkpoint(self._checkpoint)) is not None:
            raise CheckpointUnusable(f"shard {self.shard_id}: {problem}")
        if self._checkpoint.is_shard_end:
            self._feed(ShardEvent.ALREADY_AT_SHARD_END)
            return
        self._feed(ShardEvent.PARENTS_DONE)
        while self.state is not ShardState.SHUTDOWN_COMPLETE:
            if self.state is not ShardState.PARKED and self._take_signal():
                continue
            match self.state:
                case ShardState.INITIALIZING:
                    await self._step(self._initialize, ShardEvent.INITIALIZED)
                case ShardState.PROCESSING:
                    await self._process_next()
                case ShardState.SHUTDOWN_REQUESTED:
                    self._reason = ShutdownReason.REQUESTED
                    await self._step(self._send(ShutdownRequested()), ShardEvent.SHUTDOWN_ANSWERED)
                case ShardState.ENDING_SHARD:
                    self._reason = ShutdownReason.SHARD_END
                    await self._step(self._end_shard, ShardEvent.FINAL_ANSWERED)
                case ShardState.LOSING_LEASE:
                    self._reason = ShutdownReason.LEASE_LOST
                    await self._step(self._send(LeaseLost()), ShardEvent.FINAL_ANSWERED)
                case ShardState.RESTARTING:
                    await self._restart_or_park()
                case ShardState.PARKED:
                    if self._settings.return_when_parked:
                        return
                    await self._wake.wait()
                    self._take_signal()

    async def _step(self, action: Callable[[], Awaitable[None]], on_success: ShardEvent) -> None:
        try:
            await action()
        except ChildFault as fault:
            self.stats.child_failures += 1
            self.stats.failure_messages.append(str(fault))
            logger.error("shard %s: child failed during %s: %s", self.shard_id, self.state.value, fault)  # noqa: TRY400 - the message says it all; no traceback
            self._history = self._history.after_failure(self._in_flight_up_to)
            self._feed(ShardEvent.CHILD_FAILED)
            if self.state is not ShardState.RESTARTING:
                await self._stop_child()
            return
        self._feed(on_success)
        if self.state is ShardState.SHUTDOWN_COMPLETE:
            await self._stop_child()

    def _send(self, message: ActionMessage) -> Callable[[], Awaitable[None]]:
        async def send() -> None:
            assert self._session is not None
            started = self._clock.monotonic()
            await self._session.run_action(message, self._checkpoint_handler())
            self._observer.action_done(message.action, self._clock.monotonic() - started)

        return send

    async def _initialize(self) -> None:
        self._largest_delivered = self._checkpoint
        self._answered_up_to = self._checkpoint
        self._in_flight_up_to = None
        self._exceptions_seen = 0
        if self._plan is None:
            await self._source.start(self._checkpoint)
        # else: a held batch is delivered again to the new child; the source keeps its place after it
        child = await self._launch_child()
        self.stats.child_starts += 1
        if self.stats.child_starts > 1:
            self._observer.child_restart()
        channel = self._settings.child_channel
        sink = ChannelSink(self._observer, self._clock) if channel else None
        offer_dead_letter = channel and self._dead_lettering
        self._session = ChildSession(
            child,
            self._settings.timeouts,
            on_channel=sink,
            on_dead_letter=self._processor_dead_letter if offer_dead_letter else None,
        )
        checkpoint = self._checkpoint
        await self._send(
            Initialize(
                self.shard_id,
                checkpoint.sequence_number,
                checkpoint.sub_sequence_number,
                channel=(
                    ChannelOffer(
                        (*CHANNEL_ACTIONS, DEAD_LETTER_ACTION) if offer_dead_letter else CHANNEL_ACTIONS
                    )
                    if channel
                    else None
                ),
                **stream_fields(self.stream),
            )
        )()

    async def _process_next(self) -> None:
        if self._plan is not None:
            await self._deliver_held()
            return
        batch = await self._next_batch_or_signal()
        if batch is None:
            if self._signal is None:
                if self._before_shard_end is not None and not await self._before_shard_end():
                    self.lease_lost()  # taken at the top of the loop: the child gets leaseLost
                    return
                self._feed(ShardEvent.SHARD_END_REACHED)
            return
        records = self._after_checkpoint(batch.records)
        if self._set_aside:
            records = tuple(r for r in records if _position(r) not in self._set_aside)
        self._note_batch(batch.millis_behind_latest, len(records))
        if not records and not self._settings.call_process_records_even_for_empty_record_list:
            return
        if records and self._settings.poison_policy is not PoisonPolicy.RETRY and not self._broken:
            self._held, self._held_millis = records, batch.millis_behind_latest
            self._plan = Bisection.start(len(records), self._settings.max_delivery_attempts)
            await self._deliver_held()
            return
        if records:
            last = records[-1]
            self._in_flight_up_to = ExtendedSequenceNumber(last.sequence_number, last.sub_sequence_number)
            self._largest_delivered = max(self._largest_delivered, self._in_flight_up_to)
        if not await self._deliverable():
            return  # a signal came while the lease could not be confirmed: the batch is not sent
        self.stats.batches += 1
        self.stats.records_delivered += len(records)
        size = payload_bytes(records)  # never decodes a payload to count it
        self.stats.bytes_delivered += size
        self._report_batch(records, batch.millis_behind_latest, size)
        started = self._clock.monotonic()
        await self._step(
            self._send(ProcessRecords(records, batch.millis_behind_latest)), ShardEvent.BATCH_DONE
        )
        self._last_batch_s = self._clock.monotonic() - started
        if self.state is ShardState.PROCESSING:
            self._history = self._history.after_progress(self._in_flight_up_to)
            self.records_in_flight = 0
            if records:
                self.progress_at = self._clock.monotonic()
                self._broken = False  # the processor answers again: back to isolating poison records
            self._note_exception_reports(records)

    def _note_batch(self, millis_behind_latest: int | None, records: int) -> None:
        """Readiness bookkeeping: a shard that falls behind starts its stall clock now."""
        was_behind = self.behind
        self.millis_behind_latest = millis_behind_latest
        self.records_in_flight = records
        if self.behind and not was_behind:
            self.progress_at = self._clock.monotonic()

    async def _deliverable(self) -> bool:
        """The delivery fence: wait while the lease may not carry this batch to its end (its renewals are
        late); False if a signal (lease lost, shutdown) comes first."""
        if self._may_deliver is None or self._may_deliver(self._last_batch_s):
            return True
        logger.info("shard %s: lease not confirmed in time, holding the next batch back", self.shard_id)
        while not self._may_deliver(self._last_batch_s):
            if self._signal is not None or await sleep_unless_set(self._clock, FENCE_POLL_S, self._wake):
                return False
        logger.info("shard %s: lease confirmed again, delivering", self.shard_id)
        return True

    def _report_batch(
        self, records: Sequence[AnyRecord], millis_behind_latest: int | None, payload_bytes: int
    ) -> None:
        """One observer call per batch (never per record)."""
        age_ms = time.time() * 1000 - records[-1].approximate_arrival_timestamp if records else 0.0
        self._observer.batch(len(records), payload_bytes, millis_behind_latest, age_ms)

    def _after_checkpoint(self, records: Sequence[AnyRecord]) -> Sequence[AnyRecord]:
        """Drop records at or before the checkpoint (Java's rule). Batches are ordered, so only a prefix
        can be at or before it: once one record is past it, the rest of the batch is kept as is."""
        for index, record in enumerate(records):
            if ExtendedSequenceNumber(record.sequence_number, record.sub_sequence_number) > self._checkpoint:
                return records if index == 0 else records[index:]
        return ()

    async def _next_batch_or_signal(self) -> Batch | None:
        source = self._source
        if isinstance(source, PrefetchingSource):  # the daemon's: one future, no tasks, per batch
            loop = asyncio.get_running_loop()
            while True:
                item = source.next_batch_nowait()
                if not isinstance(item, NothingYet):
                    if item is None:
                        self._last_record_of_shard = self._largest_delivered
                    return item
                if self._wake.is_set():
                    return None
                waiter: asyncio.Future[None] = loop.create_future()
                source.notify(waiter)
                self._wake.notify(waiter)
                await waiter
        fetch = asyncio.ensure_future(source.next_batch())
        wake = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({fetch, wake}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            wake.cancel()
        if fetch.done():
            batch = fetch.result()
            if batch is None:
                self._last_record_of_shard = self._largest_delivered
            return batch
        fetch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await fetch
        return None

    async def _end_shard(self) -> None:
        await self._send(ShardEnded())()
        if not self._checkpoint.is_shard_end:
            raise ChildProtocolViolation(
                "the child answered shardEnded without checkpointing SHARD_END "
                f"(checkpoint is {self._checkpoint}); it must call checkpoint() before its status"
            )

    async def _restart_or_park(self) -> None:
        await self._stop_child()
        if self._restart_for_plan:
            await self._restart_for_held_batch()
            return
        decision = decide_restart(self._settings.restart, self._history)
        last = self.stats.failure_messages[-1] if self.stats.failure_messages else "unknown failure"
        if isinstance(decision, Park):
            self._parked_because = (
                f"the child failed {decision.consecutive_failures} times in a row without getting past "
                f"{self._history.high_water or 'initialize'}; last failure: {last}"
            )
            logger.error("shard %s parked: %s", self.shard_id, self._parked_because)
            self._observer.parked()
            self._feed(ShardEvent.GIVE_UP)
            return
        logger.warning(
            "shard %s: restarting the child in %.1fs from checkpoint %s (failure %d of at most %d)",
            self.shard_id,
            decision.delay_s,
            self._checkpoint,
            decision.consecutive_failures,
            self._settings.restart.max_consecutive_failures,
        )
        await sleep_unless_set(self._clock, decision.delay_s, self._wake)
        if self._signal is None:
            self._feed(ShardEvent.RESTART_DUE)

    async def _stop_child(self, *, hung: bool = False) -> None:
        """Stop the running child, if any. A ``hung`` one (it timed out holding a held batch) reads no
        more input: it gets SIGTERM at once instead of the end-of-input grace first."""
        session, self._session = self._session, None
        if session is not None:
            stop = self._settings.stop
            await session.child.stop(dataclasses.replace(stop, after_eof_s=0.0) if hung else stop)
            tail = getattr(session.child, "stderr_tail", None)  # test doubles may keep none
            if tail:
                self._last_stderr = tail[-1]

    # -- checkpoints ---------------------------------------------------------------------------------

    def _checkpoint_handler(self) -> Callable[[CheckpointRequest], Awaitable[str | None]] | None:
        if self.state not in CHECKPOINT_ALLOWED:
            return None
        return self._serve_checkpoint

    async def _serve_checkpoint(self, request: CheckpointRequest) -> str | None:
        at_shard_end = self.state is ShardState.ENDING_SHARD
        bounds = CheckpointBounds(
            last_checkpoint=self._checkpoint,
            largest_permitted=self._largest_delivered,
            at_shard_end=at_shard_end,
            last_record_of_shard=self._last_record_of_shard if at_shard_end else None,
        )
        decision = decide_checkpoint(request.sequence_number, request.sub_sequence_number, bounds)
        match decision:
            case RefuseCheckpoint(java_name=name, reason=reason):
                logger.warning("shard %s: refused checkpoint: %s", self.shard_id, reason)
                return name
            case AlreadyCheckpointed():
                return None
            case WriteCheckpoint(target=target):
                started = self._clock.monotonic()
                try:
                    await self._store.save(target)
                except CheckpointRefused as refused:
                    logger.warning(
                        "shard %s: checkpoint %s failed: %s", self.shard_id, target, refused.reason
                    )
                    if refused.java_name == CheckpointErrorName.SHUTDOWN:
                        self.lease_lost()
                    return refused.java_name
                self._checkpoint = target
                self.checkpointed_at = self._clock.monotonic()
                self.stats.checkpoints_written += 1
                self._observer.checkpoint(self.checkpointed_at - started)
                logger.debug("shard %s: checkpoint %s", self.shard_id, target)
                return None
        raise AssertionError(decision)  # pragma: no cover


def make_child_launcher(
    argv: tuple[str, ...], *, line_limit_bytes: int, cwd: str | None = None, shards_per_child: int = 1
) -> ChildLauncher:
    """Starts a child per shard; with ``shards_per_child`` > 1, offers each child lanes for that many
    shards and shares the children that accept (:mod:`kcl_daemon.process.lanes`)."""

    async def launch() -> ChildProcess:
        return await ChildProcess.spawn(argv, line_limit_bytes=line_limit_bytes, cwd=cwd)

    if shards_per_child > 1:
        return LanePool(launch, shards_per_child)
    return launch
