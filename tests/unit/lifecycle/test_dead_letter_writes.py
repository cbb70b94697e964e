"""The shard's dead-letter write: retried in place while the destination fails, abandoned on a signal.
Time is a fake clock: no test waits for a backoff."""

from __future__ import annotations

import asyncio

import pytest

from kcl_daemon.dead_letters.letter import DeadLetter, Failure
from kcl_daemon.errors import DeadLetterWriteFailed
from kcl_daemon.lifecycle.dead_letter_writes import write_dead_letter
from kcl_daemon.metrics.observer import NullShardObserver
from kcl_protocol import Record
from tests.support.clocks import FakeClock

LETTER = DeadLetter.of(
    Record(b"x", "pk", "1", 0, 0),
    shard_id="s",
    stream=None,
    application="a",
    attempts=1,
    failure=Failure("exit", ""),
)


class FlakySink:
    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.written: list[DeadLetter] = []

    def write(self, letter: DeadLetter) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise DeadLetterWriteFailed("the queue is down")
        self.written.append(letter)


class Counting(NullShardObserver):
    def __init__(self) -> None:
        self.events: list[str] = []

    def poison(self, event: str, count: int = 1) -> None:
        self.events.append(event)


def write(sink: FlakySink, clock: FakeClock, observer: Counting, interrupted: list[bool]) -> bool:
    return asyncio.run(
        write_dead_letter(
            sink,
            LETTER,
            shard_id="s",
            clock=clock,
            wake=asyncio.Event(),
            interrupted=lambda: interrupted[0],
            observer=observer,
        )
    )


def test_the_shard_waits_out_a_destination_that_is_down(caplog: pytest.LogCaptureFixture) -> None:
    sink, clock, observer = FlakySink(failures=12), FakeClock(), Counting()
    assert write(sink, clock, observer, [False])
    assert sink.written == [LETTER]
    assert observer.events == ["dead_letter_write_failed"] * 12
    assert len(clock.sleeps) == 12 and max(clock.sleeps) <= 5.0
    waits = [r.getMessage() for r in caplog.records if "waits" in r.getMessage()]
    assert len(waits) == 1 and "nothing is checkpointed past record s/1/0" in waits[0]


def test_a_signal_abandons_the_write() -> None:
    sink, clock, observer = FlakySink(failures=1_000_000), FakeClock(), Counting()
    interrupted = [False]
    clock.on_sleep.append(lambda: interrupted.__setitem__(0, len(clock.sleeps) >= 3))
    assert not write(sink, clock, observer, interrupted)
    assert sink.written == [] and len(clock.sleeps) == 3
