"""Poison records: when a delivery failed, how often it is tried again, and which records are set aside.

Pure decisions over plain data (the shard consumer is the shell; see ``docs/failures.md``):

* A delivery *fails* when the child exits or is killed, times out, answers with an error (something
  the protocol does not allow), or, for the wrappers that swallow a
  processor's exception (amazon_kclpy prints ``Caught exception from action dispatch`` on stderr and then
  answers the batch as done), reports an exception while handling it. Under ``RETRY`` (the default, as
  the Java daemon does) a swallowed exception is only reported: the batch counts as done.
* Under ``SKIP`` and ``DEAD_LETTER`` a failed batch is held and delivered again (on its own, in order)
  until it has failed ``max_attempts`` times; then it is *bisected*: halves, then halves of the failing
  half, down to single records. A sub-batch is tried once; a sub-batch that answers is done; a single
  record that fails is *isolated* (skipped, or dead-lettered first). A batch of one record is isolated
  after ``max_attempts`` failures.
* A batch in which nothing is answered while :data:`BROKEN_AFTER` records are isolated one after the other
is not poison, the processor is broken (a dependency down, a bad deploy): the plan gives up
(:attr:`Bisection.broken`) and the shard goes back to ordinary restarts, with their backoff and
parking, rather than dead-letter a whole stream one record at a time.

* Sub-batches are delivered strictly in order, so every record that is not isolated is delivered in
  order, and a record after an isolated one is delivered only once the isolated one was set aside.

:class:`Bisection` works on indices into the held batch; the shell maps them to records.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final


class PoisonPolicy(enum.StrEnum):
    RETRY = "RETRY"
    SKIP = "SKIP"
    DEAD_LETTER = "DEAD_LETTER"


class FailureKind(enum.StrEnum):
    EXIT = "exit"  # the child exited, was killed, closed its output or broke the protocol
    TIMEOUT = "timeout"  # no answer within the action's timeout
    ERROR = "error"  # it answered something the protocol does not allow (a wrong status, a long line)
    EXCEPTION = "exception"  # it answered, after reporting an exception it swallowed
    PROCESSOR = "processor"  # the processor handed the record over itself (the channel extension)


#: Lines a wrapper writes on stderr when it caught a processor's exception and answers anyway.
SWALLOWED_EXCEPTION_MARKERS: Final = (
    "Caught exception from action dispatch",  # amazon_kclpy (all versions)
    "the handler for processRecords raised",  # the project's Python client (kcl_client)
    "processRecords handler failed",  # the project's Node and Go clients
    "processRecords handler panicked",  # the project's Go client
    "kcl_process_records failed with exit status",  # the project's shell client
)


def reports_swallowed_exception(stderr_line: str) -> bool:
    """Whether one stderr line is a wrapper saying it caught the processor's exception."""
    return any(marker in stderr_line for marker in SWALLOWED_EXCEPTION_MARKERS)


def delivery_failed(policy: PoisonPolicy, kind: FailureKind) -> bool:
    """Whether a delivery that ended so counts as failed (a swallowed exception does not under RETRY)."""
    return not (kind is FailureKind.EXCEPTION and policy is PoisonPolicy.RETRY)


Span = tuple[int, int]  # [start, end) into the held batch

#: Records isolated in one batch without a single sub-batch answered, after which the processor is
#: deemed broken rather than the records poison.
BROKEN_AFTER: Final = 3


@dataclass(frozen=True, slots=True)
class Isolated:
    """A record (its index in the held batch) that failed on its own, after so many deliveries."""

    index: int
    attempts: int


@dataclass(frozen=True, slots=True)
class Bisection:
    """The delivery plan of one held batch (see the module docstring)."""

    size: int
    max_attempts: int
    pending: tuple[Span, ...]
    #: failures of the head span so far (the whole batch: up to max_attempts; a sub-batch: 0 or 1)
    failures: int = 0
    splitting: bool = False
    #: deliveries each index took part in (failed or not), for the dead letter's ``attempts``
    tries: tuple[int, ...] = ()
    answered: int = 0  # sub-batches the processor answered
    isolated: int = 0  # records isolated so far

    @property
    def broken(self) -> bool:
        """Nothing answered, yet :data:`BROKEN_AFTER` records isolated: the processor, not the data."""
        return self.answered == 0 and self.isolated >= BROKEN_AFTER

    @classmethod
    def start(cls, size: int, max_attempts: int) -> Bisection:
        if size < 1 or max_attempts < 1:
            raise ValueError(f"a batch of {size} records with {max_attempts} attempts cannot be planned")
        return cls(size, max_attempts, ((0, size),), tries=(0,) * size)

    @property
    def done(self) -> bool:
        return not self.pending

    def next_span(self) -> Span | None:
        """The sub-batch to deliver next, or None once the plan is done."""
        return self.pending[0] if self.pending else None

    def _tried(self, span: Span) -> tuple[int, ...]:
        start, end = span
        return tuple(n + 1 if start <= i < end else n for i, n in enumerate(self.tries))

    def after_success(self) -> Bisection:
        """The head span was answered: go on with the next one."""
        head = self.pending[0]
        return Bisection(
            self.size,
            self.max_attempts,
            self.pending[1:],
            0,
            self.splitting,
            self._tried(head),
            self.answered + 1,
            self.isolated,
        )

    def after_failure(self) -> tuple[Bisection, Isolated | None]:
        """The head span failed: try it again, split it, or isolate its single record."""
        head, rest = self.pending[0], self.pending[1:]
        tries = self._tried(head)
        failures = self.failures + 1
        start, end = head
        keep = (self.answered, self.isolated)
        if not self.splitting and failures < self.max_attempts:
            return Bisection(self.size, self.max_attempts, self.pending, failures, False, tries, *keep), None
        if end - start == 1:
            plan = Bisection(
                self.size, self.max_attempts, rest, 0, True, tries, self.answered, self.isolated + 1
            )
            return plan, Isolated(start, tries[start])
        middle = (start + end) // 2
        pending = ((start, middle), (middle, end), *rest)
        return Bisection(self.size, self.max_attempts, pending, 0, True, tries, *keep), None

    def restart_attempt(self) -> int:
        """For the restart backoff of a child that died on the head span: 0 means "restart at once" (the
        bisection's deliveries), else the whole batch's failures so far (the usual backoff)."""
        return 0 if self.splitting else self.failures
