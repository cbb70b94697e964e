"""Named retry policies. Only errors whose class says ``retriable = True`` are retried.

Each policy has exponential backoff with full jitter, a cap on attempts and a total deadline. The sleep
and the monotonic clock are injectable, so tests (and a fake :class:`Clock`) never wait for real.
Use them at the boundary of an operation, never as ad-hoc ``@retry`` decorators::

    lease = LEASE_IO.call(table.renew, lease)
    for attempt in KINESIS.retrying(): ...
    async for attempt in GET_RECORDS.async_retrying(sleep=clock.sleep, monotonic=clock.monotonic): ...
    page = await GET_RECORDS.run_async(read_once, sleep=clock.sleep, monotonic=clock.monotonic)

A :class:`tenacity.Retrying` built here is for one operation: its deadline starts when it is built.
:meth:`RetryPolicy.run_async` is for calls made hundreds of times a second (a read per shard, a renewal
per lease): its first attempt builds no retry machinery at all.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Final, ParamSpec, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)
from tenacity.stop import stop_base

from kcl_daemon.errors import KclError

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


def is_retriable(exc: BaseException) -> bool:
    return isinstance(exc, KclError) and exc.retriable


class _StopAtDeadline(stop_base):
    """Stop once ``deadline_s`` have passed on ``monotonic`` since this object was built."""

    def __init__(self, deadline_s: float, monotonic: Callable[[], float]) -> None:
        self._monotonic = monotonic
        self._deadline = monotonic() + deadline_s

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self._monotonic() >= self._deadline


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    name: str
    max_attempts: int
    deadline_s: float
    initial_backoff_s: float
    max_backoff_s: float

    def within(self, deadline_s: float) -> RetryPolicy:
        """This policy with its total deadline cut to ``deadline_s`` (a lease's remaining time, say)."""
        return replace(self, deadline_s=max(min(self.deadline_s, deadline_s), 0.0))

    def _log_retry(self, state: RetryCallState) -> None:
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        logger.warning(
            "%s: attempt %d failed (%s); retrying in %.2fs", self.name, state.attempt_number, exc, wait
        )

    def _options(
        self, monotonic: Callable[[], float], retry_if: Callable[[BaseException], bool] = is_retriable
    ) -> dict[str, Any]:
        return {
            "retry": retry_if_exception(retry_if),
            "wait": wait_random_exponential(multiplier=self.initial_backoff_s, max=self.max_backoff_s),
            "stop": stop_after_attempt(self.max_attempts) | _StopAtDeadline(self.deadline_s, monotonic),
            "before_sleep": self._log_retry,
            "reraise": True,
        }

    def retrying(
        self,
        *,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> Retrying:
        return Retrying(sleep=sleep, **self._options(monotonic))

    def async_retrying(
        self,
        *,
        sleep: Callable[[float], Awaitable[None]],
        monotonic: Callable[[], float],
        retry_if: Callable[[BaseException], bool] = is_retriable,
    ) -> AsyncRetrying:
        """The asyncio twin of :meth:`retrying`: ``async for attempt in ...: with attempt: ...``.

        Pass a :class:`~kcl_daemon.clock.Clock`'s ``sleep`` and ``monotonic``, so tests never wait.
        ``retry_if`` replaces the default "the error says it is retriable".
        """
        return AsyncRetrying(sleep=sleep, **self._options(monotonic, retry_if))

    async def run_async(
        self,
        attempt: Callable[[], Awaitable[T]],
        *,
        sleep: Callable[[float], Awaitable[None]],
        monotonic: Callable[[], float],
        retry_if: Callable[[BaseException], bool] = is_retriable,
        before_retry: Callable[[], Awaitable[None]] | None = None,
    ) -> T:
        """``await attempt()`` under this policy, the same as an :meth:`async_retrying` loop, but the first
        attempt runs bare: building the retry machinery cost more than a quick call. After a failure that
        ``retry_if`` accepts, the remaining attempts follow the policy (backoff, attempts and deadline
        counted from the first attempt); ``before_retry`` runs before each of them."""
        started = monotonic()
        try:
            return await attempt()
        except Exception as exc:
            if not retry_if(exc) or self.max_attempts <= 1:
                raise
            failure = exc
        wait = min(random.uniform(0, self.initial_backoff_s), self.max_backoff_s)  # noqa: S311 - jitter
        left = self.deadline_s - (monotonic() - started)
        if left <= wait:
            raise failure
        logger.warning("%s: attempt 1 failed (%s); retrying in %.2fs", self.name, failure, wait)
        await sleep(wait)
        rest = replace(  # attempts 2.. of this policy: the backoff goes on doubling from attempt 1's
            self, max_attempts=self.max_attempts - 1, initial_backoff_s=self.initial_backoff_s * 2
        ).within(self.deadline_s - (monotonic() - started))
        async for retry in rest.async_retrying(sleep=sleep, monotonic=monotonic, retry_if=retry_if):
            with retry:
                if before_retry is not None:
                    await before_retry()
                return await attempt()
        raise AssertionError("unreachable: the retry policy re-raises the last error")  # pragma: no cover

    def call(
        self,
        fn: Callable[P, T],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(*args, **kwargs)`` under this policy with the real clock; the last error propagates."""
        return self.retrying()(fn, *args, **kwargs)


# Lease I/O must finish well inside failoverTimeMillis (10 s by default): a renewal that keeps failing
# for longer than that has lost the lease anyway.
LEASE_IO: Final = RetryPolicy(
    "lease_io", max_attempts=5, deadline_s=4.0, initial_backoff_s=0.05, max_backoff_s=1.0
)
# Start-up calls (DescribeTable, CreateTable, the first shard sync): nothing runs yet, so wait longer for a
# throttled or briefly unavailable endpoint before giving up with exit code 1.
STARTUP: Final = RetryPolicy(
    "startup", max_attempts=10, deadline_s=60.0, initial_backoff_s=0.2, max_backoff_s=5.0
)
# One attempt and no retry: for callers that repeat and reconcile on their own (the lease keeper).
SINGLE_ATTEMPT: Final = RetryPolicy(
    "single_attempt", max_attempts=1, deadline_s=60.0, initial_backoff_s=0.0, max_backoff_s=0.0
)
# Start-up reads and writes of single items (Migration3.0, where the coordinator state lives): as STARTUP,
# a throttle or a timeout at start-up is waited out, never fatal at once. Its read timeout (botocore's
# 5 s) is well inside the deadline, so one hung call leaves room for the next ones.
STARTUP_ITEM: Final = RetryPolicy(
    "startup_item", max_attempts=10, deadline_s=60.0, initial_backoff_s=0.2, max_backoff_s=5.0
)
# A lease-table write at shard end (child leases, childShardIds, the SHARD_END checkpoint) is retried in
# place, whatever the error, for as long as the lease is held: the child must not be restarted (and the
# shard's last batch sent again) for a fault of the lease table.
SHARD_END: Final = RetryPolicy(
    "shard_end", max_attempts=10_000, deadline_s=3600.0, initial_backoff_s=0.2, max_backoff_s=5.0
)
# Kinesis control-plane and read calls (ListShards is limited to 100 TPS per stream).
KINESIS: Final = RetryPolicy(
    "kinesis", max_attempts=8, deadline_s=30.0, initial_backoff_s=0.2, max_backoff_s=5.0
)
# One shard's polling read (GetShardIterator + GetRecords), contract §7: throttling, network trouble, an
# expired iterator (refreshed before the next attempt) or an inconsistent response. Reads are cheap to
# repeat and a shard has nothing better to do, so this waits longer than KINESIS before the error
# reaches the shard consumer (the reader also keeps 0.2 s between call starts on top of the backoff).
GET_RECORDS: Final = RetryPolicy(
    "get_records", max_attempts=30, deadline_s=300.0, initial_backoff_s=0.2, max_backoff_s=10.0
)

# The Spark source's published batch ends (conditional UpdateItem, consistent GetItem/BatchGetItem): a
# task or the planner waits for them, so retry a while, but not for as long as a shard's read.
BATCH_ENDS: Final = RetryPolicy(
    "batch_ends", max_attempts=8, deadline_s=30.0, initial_backoff_s=0.1, max_backoff_s=2.0
)
# A Spark executor's SubscribeToShard for one batch: ResourceInUseException within 5 s of the previous
# subscription of the consumer to the shard, throttling, a reset stream.
FANOUT_SUBSCRIBE: Final = RetryPolicy(
    "fanout_subscribe", max_attempts=12, deadline_s=60.0, initial_backoff_s=0.5, max_backoff_s=2.0
)
# The Kinesis sink's PutRecords: whole-call failures, and entries a response reports throttled or
# failed inside (sent again alone). Records are already in the sink's hands: give them time.
PUT_RECORDS: Final = RetryPolicy(
    "put_records", max_attempts=20, deadline_s=120.0, initial_backoff_s=0.1, max_backoff_s=5.0
)

# A poison record's dead-letter write (SQS, Kinesis, S3, a directory): the shard waits on it, because its
# checkpoint may not move past the record before the write succeeded. Retried in place, whatever the error,
# for as long as the lease is held and no signal came; the backoff stays short so the shard resumes soon
# after the destination is back.
DEAD_LETTER_WRITE: Final = RetryPolicy(
    "dead_letter_write",
    max_attempts=100_000,
    deadline_s=7 * 86400.0,
    initial_backoff_s=0.5,
    max_backoff_s=5.0,
)


def lease_io_retry(
    *, sleep: Callable[[float], None] = time.sleep, monotonic: Callable[[], float] = time.monotonic
) -> Retrying:
    return LEASE_IO.retrying(sleep=sleep, monotonic=monotonic)


def kinesis_retry(
    *, sleep: Callable[[float], None] = time.sleep, monotonic: Callable[[], float] = time.monotonic
) -> Retrying:
    return KINESIS.retrying(sleep=sleep, monotonic=monotonic)
