"""The named retry policies: what they retry, how long they back off, and when they give up."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from kcl_daemon.errors import (
    AwsError,
    ChildExited,
    ConfigError,
    DependencyUnavailable,
    InconsistentResponse,
    IteratorExpired,
    LeaseConflict,
    ShardNotFound,
    Throttled,
    TransientNetwork,
)
from kcl_daemon.retry import (
    GET_RECORDS,
    KINESIS,
    LEASE_IO,
    RetryPolicy,
    is_retriable,
    kinesis_retry,
    lease_io_retry,
)


class FakeTime:
    """A monotonic clock that only moves when something sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)


def failing(times: int, error: Callable[[], Exception], result: str = "ok") -> Callable[[], str]:
    calls = {"n": 0}

    def fn() -> str:
        calls["n"] += 1
        if calls["n"] <= times:
            raise error()
        return result

    fn.calls = calls  # type: ignore[attr-defined]
    return fn


@pytest.mark.parametrize(
    ("error", "retriable"),
    [
        (Throttled("x"), True),
        (TransientNetwork("x"), True),
        (IteratorExpired("x"), True),
        (InconsistentResponse("x"), True),
        (ChildExited("x"), True),
        (AwsError("x"), False),
        (LeaseConflict("x"), False),
        (DependencyUnavailable("x"), False),
        (ShardNotFound("x"), False),
        (ConfigError(["x"]), False),
        (ValueError("x"), False),
        (KeyboardInterrupt(), False),
    ],
)
def test_is_retriable(error: BaseException, retriable: bool) -> None:
    assert is_retriable(error) is retriable


@pytest.mark.parametrize("policy", [LEASE_IO, KINESIS, GET_RECORDS])
def test_retries_retriable_errors_then_returns(policy: RetryPolicy) -> None:
    time = FakeTime()
    fn = failing(2, lambda: Throttled("slow down"))
    assert policy.retrying(sleep=time.sleep, monotonic=time.monotonic)(fn) == "ok"
    assert fn.calls["n"] == 3  # type: ignore[attr-defined]
    assert len(time.sleeps) == 2
    assert all(0 <= s <= policy.max_backoff_s for s in time.sleeps)


@pytest.mark.parametrize("policy", [LEASE_IO, KINESIS, GET_RECORDS])
def test_non_retriable_errors_propagate_at_once(policy: RetryPolicy) -> None:
    time = FakeTime()
    fn = failing(1, lambda: LeaseConflict("lost"))
    with pytest.raises(LeaseConflict):
        policy.retrying(sleep=time.sleep, monotonic=time.monotonic)(fn)
    assert fn.calls["n"] == 1  # type: ignore[attr-defined]
    assert time.sleeps == []


@pytest.mark.parametrize("policy", [LEASE_IO, KINESIS, GET_RECORDS])
def test_gives_up_after_max_attempts_or_deadline_with_the_last_error(policy: RetryPolicy) -> None:
    time = FakeTime()
    fn = failing(10**6, lambda: TransientNetwork("down"))
    with pytest.raises(TransientNetwork):
        policy.retrying(sleep=time.sleep, monotonic=time.monotonic)(fn)
    calls = fn.calls["n"]  # type: ignore[attr-defined]
    assert 1 <= calls <= policy.max_attempts
    assert calls == policy.max_attempts or time.now - 100.0 >= policy.deadline_s


def test_deadline_stops_before_max_attempts() -> None:
    policy = RetryPolicy("t", max_attempts=100, deadline_s=1.0, initial_backoff_s=0.5, max_backoff_s=0.5)
    time = FakeTime()
    fn = failing(10**6, lambda: Throttled("x"))
    with pytest.raises(Throttled):
        policy.retrying(sleep=time.sleep, monotonic=time.monotonic)(fn)
    assert fn.calls["n"] < 100  # type: ignore[attr-defined]
    assert time.now - 100.0 >= 1.0


def test_backoff_grows_exponentially_up_to_the_cap() -> None:
    policy = RetryPolicy("t", max_attempts=12, deadline_s=10**6, initial_backoff_s=0.1, max_backoff_s=1.0)
    time = FakeTime()
    with pytest.raises(Throttled):
        policy.retrying(sleep=time.sleep, monotonic=time.monotonic)(failing(10**6, lambda: Throttled("x")))
    assert len(time.sleeps) == 11
    for attempt, slept in enumerate(time.sleeps, start=1):
        assert 0 <= slept <= min(1.0, 0.1 * 2**attempt)


def test_retries_are_logged_as_warnings(caplog: pytest.LogCaptureFixture) -> None:
    time = FakeTime()
    with caplog.at_level(logging.WARNING, logger="kcl_daemon.retry"):
        LEASE_IO.retrying(sleep=time.sleep, monotonic=time.monotonic)(failing(1, lambda: Throttled("busy")))
    assert "lease_io: attempt 1 failed" in caplog.text
    assert "busy" in caplog.text


def test_call_and_helpers_use_the_named_policies() -> None:
    assert KINESIS.call(lambda x, *, y: x + y, 1, y=2) == 3
    time = FakeTime()
    for build, policy in ((lease_io_retry, LEASE_IO), (kinesis_retry, KINESIS)):
        fn = failing(10**6, lambda: Throttled("x"))
        with pytest.raises(Throttled):
            build(sleep=time.sleep, monotonic=time.monotonic)(fn)
        assert fn.calls["n"] <= policy.max_attempts  # type: ignore[attr-defined]


def test_lease_io_gives_up_well_inside_the_default_failover_time() -> None:
    assert LEASE_IO.deadline_s < 10.0
    assert LEASE_IO.max_backoff_s < LEASE_IO.deadline_s


async def test_async_retrying_retries_with_the_injected_sleep() -> None:
    time = FakeTime()
    fn = failing(3, lambda: IteratorExpired("old"))
    result = None
    async for attempt in GET_RECORDS.async_retrying(sleep=time.async_sleep, monotonic=time.monotonic):
        with attempt:
            result = fn()
    assert result == "ok"
    assert len(time.sleeps) == 3


async def run_async(policy: RetryPolicy, time: FakeTime, fn: Callable[[], str]) -> str:
    async for attempt in policy.async_retrying(sleep=time.async_sleep, monotonic=time.monotonic):
        with attempt:
            return fn()
    raise AssertionError("unreachable")


async def test_async_retrying_non_retriable_and_exhaustion() -> None:
    time = FakeTime()
    gone = failing(10**6, lambda: ShardNotFound("gone"))
    with pytest.raises(ShardNotFound):
        await run_async(GET_RECORDS, time, gone)
    assert time.sleeps == []
    policy = RetryPolicy("t", max_attempts=4, deadline_s=10**6, initial_backoff_s=0.1, max_backoff_s=0.1)
    throttled = failing(10**6, lambda: Throttled("x"))
    with pytest.raises(Throttled):
        await run_async(policy, time, throttled)
    assert throttled.calls["n"] == 4  # type: ignore[attr-defined]


async def test_run_async_keeps_the_policy_with_a_bare_first_attempt() -> None:
    policy = RetryPolicy("t", max_attempts=4, deadline_s=10**6, initial_backoff_s=0.1, max_backoff_s=10.0)

    async def attempt(fn: Callable[[], str]) -> str:
        return fn()

    time = FakeTime()
    ok = failing(0, lambda: Throttled("x"))
    assert (
        await policy.run_async(lambda: attempt(ok), sleep=time.async_sleep, monotonic=time.monotonic) == "ok"
    )
    assert time.sleeps == []  # the common case: one call, no backoff

    befores: list[float] = []

    async def before() -> None:
        befores.append(time.now)

    flaky = failing(2, lambda: Throttled("x"))
    result = await policy.run_async(
        lambda: attempt(flaky), sleep=time.async_sleep, monotonic=time.monotonic, before_retry=before
    )
    assert result == "ok" and flaky.calls["n"] == 3  # type: ignore[attr-defined]
    assert len(time.sleeps) == 2 and len(befores) == 2
    assert time.sleeps[0] <= 0.1 and time.sleeps[1] <= 0.2  # the backoff doubles from attempt 1's

    always = failing(10**6, lambda: Throttled("x"))
    with pytest.raises(Throttled):
        await policy.run_async(lambda: attempt(always), sleep=time.async_sleep, monotonic=time.monotonic)
    assert always.calls["n"] == 4  # type: ignore[attr-defined]

    gone = failing(10**6, lambda: ShardNotFound("gone"))
    sleeps = len(time.sleeps)
    with pytest.raises(ShardNotFound):
        await policy.run_async(lambda: attempt(gone), sleep=time.async_sleep, monotonic=time.monotonic)
    assert gone.calls["n"] == 1 and len(time.sleeps) == sleeps  # type: ignore[attr-defined]

    short = RetryPolicy("t", max_attempts=10, deadline_s=1.0, initial_backoff_s=0.5, max_backoff_s=0.5)
    slow = failing(10**6, lambda: Throttled("x"))

    async def slow_attempt() -> str:
        time.now += 0.4
        return slow()

    with pytest.raises(Throttled):
        await short.run_async(slow_attempt, sleep=time.async_sleep, monotonic=time.monotonic)
    assert slow.calls["n"] <= 3  # the deadline counts from the first attempt
