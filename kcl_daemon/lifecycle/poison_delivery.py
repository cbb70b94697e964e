"""The poison-record delivery path of a shard consumer (docs/failures.md), apart from its main loop.

Under ``poisonRecordPolicy`` SKIP or DEAD_LETTER a batch is held and delivered by its plan
(``kcl_daemon.core.lifecycle.poison.Bisection``): again while the whole batch is retried, then in halves
down to the records that fail on their own, which are skipped or dead-lettered (the write waits while the
destination is down) before anything after them may be checkpointed. The processor may also hand a record
to the destination itself (the channel's ``deadLetter``). A processor that fails on every record is
broken, not poisoned: the plan is dropped and the shard restarts and parks as under RETRY.

:class:`PoisonDelivery` is a mixin of :class:`kcl_daemon.lifecycle.shard_consumer.ShardConsumer`: it keeps
no state of its own; the consumer's fields and the loop methods it calls are declared for the type checker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from kcl_daemon.clock import Clock, sleep_unless_set
from kcl_daemon.core.lifecycle.poison import (
    Bisection,
    FailureKind,
    Isolated,
    PoisonPolicy,
    delivery_failed,
)
from kcl_daemon.core.lifecycle.restart_policy import FailureHistory
from kcl_daemon.core.lifecycle.states import ShardEvent, ShardState
from kcl_daemon.core.sequence import ExtendedSequenceNumber, InvalidSequenceNumber
from kcl_daemon.dead_letters.letter import DeadLetter, Failure
from kcl_daemon.errors import ChildFault, ChildProtocolViolation, ChildTimeout
from kcl_daemon.lifecycle.dead_letter_writes import write_dead_letter
from kcl_daemon.lifecycle.settings import ConsumerSettings, ConsumerStats
from kcl_daemon.metrics.observer import ShardObserver
from kcl_daemon.process.session import ChildSession
from kcl_protocol import AnyRecord, CheckpointRequest, DeadLetterRequest, ProcessRecords, payload_bytes

logger = logging.getLogger(__name__)

#: How long, at most, a batch's answer waits for the stderr line saying the wrapper swallowed an
#: exception (SKIP and DEAD_LETTER only; it was written before the answer, so it is already in the pipe).
STDERR_SETTLE_S = 0.005


def position_of(record: AnyRecord) -> ExtendedSequenceNumber:
    return ExtendedSequenceNumber(record.sequence_number, record.sub_sequence_number)


_position = position_of


class PoisonDelivery:
    """Held batches, their bisection and the records set aside, for :class:`ShardConsumer`."""

    if TYPE_CHECKING:  # the consumer's fields and loop methods this path uses
        shard_id: str
        stream: str | None
        state: ShardState
        stats: ConsumerStats
        records_in_flight: int
        progress_at: float
        _settings: ConsumerSettings
        _clock: Clock
        _observer: ShardObserver
        _session: ChildSession | None
        _signal: ShardEvent | None
        _wake: asyncio.Event
        _history: FailureHistory
        _checkpoint: ExtendedSequenceNumber
        _largest_delivered: ExtendedSequenceNumber
        _in_flight_up_to: ExtendedSequenceNumber | None
        _last_batch_s: float
        _held: Sequence[AnyRecord]
        _held_millis: int | None
        _plan: Bisection | None
        _answered_up_to: ExtendedSequenceNumber
        _set_aside: set[ExtendedSequenceNumber]
        _exceptions_seen: int
        _restart_for_plan: bool
        _in_flight_records: Sequence[AnyRecord]
        _broken: bool

        def _feed(self, event: ShardEvent) -> None: ...
        async def _stop_child(self, *, hung: bool = False) -> None: ...
        async def _deliverable(self) -> bool: ...
        def _report_batch(
            self, records: Sequence[AnyRecord], millis_behind_latest: int | None, payload_bytes: int
        ) -> None: ...
        def _checkpoint_handler(
            self,
        ) -> Callable[[CheckpointRequest], Awaitable[str | None]] | None: ...

    def _note_exception_reports(self, records: Sequence[AnyRecord]) -> int:
        """Warn and count the exceptions the child's wrapper reported and swallowed since last seen."""
        session = self._session
        total = 0 if session is None else getattr(session.child, "exception_reports", 0)
        new, self._exceptions_seen = total - self._exceptions_seen, total
        if new > 0:
            self.stats.processor_exceptions += new
            self._observer.poison("exception", new)
            first = f" from {_position(records[0])}" if records else ""
            logger.warning(
                "shard %s: the processor raised while handling %d records%s; its wrapper caught the "
                "exception and answered the batch as done%s",
                self.shard_id,
                len(records),
                first,
                " (poisonRecordPolicy RETRY: records after the failing one in that batch were not processed)"
                if self._settings.poison_policy is PoisonPolicy.RETRY
                else "",
            )
        return new

    async def _exception_reported(self, records: Sequence[AnyRecord]) -> bool:
        """Whether the child reported a swallowed exception during the batch just answered. The wrapper
        writes it on stderr before its status on stdout, so it is in the pipe already: a few turns of the
        loop (and a few milliseconds at most) let the stderr reader take it."""
        session = self._session
        if session is None:
            return False
        for _ in range(8):
            await asyncio.sleep(0)
        if getattr(session.child, "exception_reports", 0) == self._exceptions_seen:
            await asyncio.sleep(STDERR_SETTLE_S)
        return self._note_exception_reports(records) > 0

    async def _attempt(self, part: Sequence[AnyRecord]) -> tuple[Failure, bool] | None:
        """Deliver one (sub-)batch; None when it was answered, else (the failure, whether the child died)."""
        session = self._session
        assert session is not None
        started = self._clock.monotonic()
        try:
            await session.run_action(ProcessRecords(part, self._held_millis), self._checkpoint_handler())
        except ChildFault as fault:
            kind = (
                FailureKind.TIMEOUT
                if isinstance(fault, ChildTimeout)
                else FailureKind.ERROR
                if isinstance(fault, ChildProtocolViolation)
                else FailureKind.EXIT
            )
            tail = tuple(getattr(session.child, "stderr_tail", ()))
            return Failure(kind.value, str(fault), tail), True
        self._observer.action_done("processRecords", self._clock.monotonic() - started)
        if await self._exception_reported(part) and delivery_failed(
            self._settings.poison_policy, FailureKind.EXCEPTION
        ):
            tail = tuple(getattr(session.child, "stderr_tail", ()))
            detail = "the processor raised; its wrapper caught the exception and answered anyway"
            return Failure(FailureKind.EXCEPTION.value, detail, tail), False
        return None

    async def _deliver_held(self) -> None:
        """Deliver the next sub-batch of the held batch (its plan decides which); set aside a record that
        fails on its own; restart a child that died on it."""
        plan = self._plan
        assert plan is not None
        span = plan.next_span()
        if span is None:
            self._plan, self._held = None, ()
            return
        span_records = self._held[span[0] : span[1]]
        part: Sequence[AnyRecord] = tuple(
            r for r in span_records if _position(r) > self._checkpoint and _position(r) not in self._set_aside
        )
        if len(part) == len(span_records):
            part = span_records  # as held (a column batch stays one: its line is written in one join)
        if not part:  # the child checkpointed past them before it failed: they were processed
            self._plan = plan.after_success()
            return
        if not await self._deliverable():
            return  # a signal came while the lease could not be confirmed: nothing is sent
        again = plan.failures > 0 or plan.splitting
        if again:
            self.stats.redelivered_records += len(part)
            self._observer.poison("redelivered", len(part))
        up_to = _position(part[-1])
        self._in_flight_up_to = up_to
        self._largest_delivered = max(self._largest_delivered, up_to)
        self.stats.batches += 1
        self.stats.records_delivered += len(part)
        size = payload_bytes(part)
        self.stats.bytes_delivered += size
        self._report_batch(part, self._held_millis, size)
        self.records_in_flight = len(part)
        started = self._clock.monotonic()
        self._in_flight_records = part
        try:
            outcome = await self._attempt(part)
        finally:
            self._in_flight_records = ()
        self._last_batch_s = self._clock.monotonic() - started
        if outcome is None:
            self._answered_up_to = max(self._answered_up_to, up_to)
            self._plan = plan.after_success()
            if self._plan.done:
                self._plan, self._held = None, ()
            self._history = self._history.after_progress(up_to)
            self.records_in_flight = 0
            self.progress_at = self._clock.monotonic()
            return
        failure, died = outcome
        # Nothing after the last answered record may be checkpointed until the failing ones are set aside.
        self._largest_delivered = max(self._checkpoint, self._answered_up_to)
        self.stats.failed_deliveries += 1
        self._observer.poison("failed_delivery")
        self._plan, isolated = plan.after_failure()
        if self._plan.broken:
            await self._give_up_plan(part, failure)
            return
        logger.warning(
            "shard %s: delivery of %d records from %s failed (%s: %s); %s",
            self.shard_id,
            len(part),
            _position(part[0]),
            failure.kind,
            failure.detail,
            "setting the record aside"
            if isolated is not None
            else "bisecting"
            if self._plan.splitting
            else f"attempt {self._plan.failures} of {self._settings.max_delivery_attempts}",
        )
        if died:
            self.stats.child_failures += 1
            self.stats.failure_messages.append(failure.detail)
            self._restart_for_plan = True
            self._feed(ShardEvent.CHILD_FAILED)
            await self._stop_child(hung=failure.kind == FailureKind.TIMEOUT.value)
        if isolated is not None and not await self._set_aside_record(isolated, failure):
            self._plan, self._held = None, ()  # a signal came first: nothing past it is delivered
            self._restart_for_plan = False

    @property
    def _dead_lettering(self) -> bool:
        return (
            self._settings.poison_policy is PoisonPolicy.DEAD_LETTER
            and self._settings.dead_letters is not None
        )

    async def _processor_dead_letter(self, request: DeadLetterRequest) -> None:
        """The processor handed a record of its batch to the dead-letter destination (the channel's
        ``deadLetter``): write it now (the child's next line waits), and never deliver it again."""
        try:
            position = ExtendedSequenceNumber(request.sequence_number, request.sub_sequence_number)
        except (InvalidSequenceNumber, ValueError):
            position = None
        record = next((r for r in self._in_flight_records if _position(r) == position), None)
        if record is None or position is None:
            logger.warning(
                "shard %s: the processor asked to dead-letter record %.140s/%d, which is not in the batch it "
                "is processing; ignored",
                self.shard_id,
                request.sequence_number,
                request.sub_sequence_number,
            )
            self._observer.channel_dropped("invalid")
            return
        if position in self._set_aside:
            return
        index = next((i for i, r in enumerate(self._held) if _position(r) == position), None)
        attempts = 1 if self._plan is None or index is None else self._plan.tries[index] + 1
        failure = Failure(FailureKind.PROCESSOR.value, request.reason[:2000], ())
        if not await self._dead_letter(record, attempts, failure):
            return
        self._set_aside.add(position)
        self.stats.set_aside += 1

    async def _dead_letter(self, record: AnyRecord, attempts: int, failure: Failure) -> bool:
        """Write one record's dead letter and log it; False if a signal came first."""
        letter = DeadLetter.of(
            record,
            shard_id=self.shard_id,
            stream=self.stream,
            application=self._settings.application,
            attempts=attempts,
            failure=failure,
        )
        if not await self._write_dead_letter(letter):
            return False
        self._observer.poison("dead_lettered")
        logger.warning(
            "shard %s: dead-lettered record %s to %s after %d deliveries (%s)",
            self.shard_id,
            _position(record),
            self._settings.dead_letters,
            attempts,
            failure.kind,
        )
        return True

    async def _give_up_plan(self, part: Sequence[AnyRecord], failure: Failure) -> None:
        """Not poison: the processor fails on everything. Drop the plan and fail the child as under RETRY
        (restart with backoff from the checkpoint, park after childMaxConsecutiveFailures)."""
        logger.error(
            "shard %s: the processor failed on %d records in a row, each on its own, and answered none: "
            "it is broken, not the records (%s: %s); restarting it as under RETRY until it answers again",
            self.shard_id,
            self._plan.isolated if self._plan is not None else 0,
            failure.kind,
            failure.detail,
        )
        self._plan, self._held, self._broken = None, (), True
        self._restart_for_plan = False
        self._history = self._history.after_failure(_position(part[-1]))
        self.stats.child_failures += 1
        self.stats.failure_messages.append(failure.detail)
        self._feed(ShardEvent.CHILD_FAILED)  # a child that answered is stopped too: it fails on everything
        await self._stop_child()

    async def _set_aside_record(self, isolated: Isolated, failure: Failure) -> bool:
        """Skip or dead-letter one record; False if a signal came before its dead letter was written."""
        record = self._held[isolated.index]
        position = _position(record)
        if self._settings.poison_policy is PoisonPolicy.DEAD_LETTER:
            if not await self._dead_letter(record, isolated.attempts, failure):
                return False
        else:
            self._observer.poison("skipped")
            logger.warning(
                "shard %s: skipped record %s after %d deliveries (%s; poisonRecordPolicy SKIP)",
                self.shard_id,
                position,
                isolated.attempts,
                failure.kind,
            )
        self._set_aside.add(position)
        self.stats.set_aside += 1
        return True

    async def _write_dead_letter(self, letter: DeadLetter) -> bool:
        """Write one letter; the shard waits while the destination fails. False if a signal came first."""
        sink = self._settings.dead_letters
        assert sink is not None, "DEAD_LETTER without a destination (config validation prevents it)"
        return await write_dead_letter(
            sink,
            letter,
            shard_id=self.shard_id,
            clock=self._clock,
            wake=self._wake,
            interrupted=lambda: self._signal is not None,
            observer=self._observer,
        )

    async def _restart_for_held_batch(self) -> None:
        """A child died on a held batch: restart it after the usual backoff while the whole batch is being
        retried, at once while it is bisected; these failures never park the shard (the plan ends)."""
        self._restart_for_plan = False
        attempt = 0 if self._plan is None else self._plan.restart_attempt()
        delay = self._settings.restart.backoff_s(attempt) if attempt else 0.0
        logger.warning(
            "shard %s: restarting the child%s to deliver the held batch again",
            self.shard_id,
            f" in {delay:.1f}s" if delay else "",
        )
        if delay:
            await sleep_unless_set(self._clock, delay, self._wake)
        if self._signal is None:
            self._feed(ShardEvent.RESTART_DUE)
