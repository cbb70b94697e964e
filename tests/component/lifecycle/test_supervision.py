"""Supervision with real child processes that misbehave, next to a healthy shard that must not notice.

Each test runs two shard consumers at once: shard A's child commits a fault on the batch holding a
"poison" record; shard B's child is well behaved. Restart backoffs go through an injected sleep, so no
test waits for a backoff; only the fault detection timeouts (a fraction of a second) run in real time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from kcl_daemon.core.lifecycle.restart_policy import RestartPolicy
from kcl_daemon.core.lifecycle.states import ShardState, ShutdownReason
from kcl_daemon.core.sequence import SHARD_END, TRIM_HORIZON, ExtendedSequenceNumber
from kcl_daemon.lifecycle.shard_consumer import (
    ConsumerSettings,
    ShardConsumer,
    ShardOutcome,
    make_child_launcher,
)
from kcl_daemon.process.child import ChildProcess, StopTimeouts
from kcl_daemon.process.session import ActionTimeouts
from kcl_daemon.replay.command import InMemoryCheckpointStore, ListRecordSource
from kcl_protocol import Record
from tests.support.clocks import FakeClock
from tests.support.paths import FAULTY as FAULTY_CHILD

FAULTY = str(FAULTY_CHILD)
RECORDS = 30
POISON_AT = 15


def make_records(poison: bool) -> list[Record]:
    return [
        Record(
            b"poison" if poison and i == POISON_AT else f"r{i}".encode(),
            f"pk{i}",
            str(100 + i),
            0,
            1_700_000_000_000,
        )
        for i in range(RECORDS)
    ]


def settings(**timeouts: float) -> ConsumerSettings:
    return ConsumerSettings(
        timeouts=ActionTimeouts(
            default_s=timeouts.get("action", 10.0),
            # a short processRecords timeout alone: a child's start-up on a busy machine may take longer
            per_action_s={"processRecords": timeouts["processRecords"]}
            if "processRecords" in timeouts
            else {},
            write_s=timeouts.get("write", 10.0),
        ),
        stop=StopTimeouts(after_eof_s=timeouts.get("stop", 2.0), after_sigterm_s=timeouts.get("stop", 2.0)),
        restart=RestartPolicy(initial_backoff_s=1.0, max_backoff_s=8.0, max_consecutive_failures=3),
        return_when_parked=True,
    )


async def run_pair(
    tmp_path: Path, fault: str, times: str = "1", **timeouts: float
) -> tuple[ShardOutcome, ShardOutcome, FakeClock, dict[str, Counter[str]]]:
    sleep = FakeClock()
    outcomes = []
    consumers = []
    for shard, child_fault, poison in (("shard-A", fault, True), ("shard-B", "none", False)):
        state = tmp_path / shard
        state.mkdir()
        launch = make_child_launcher(
            (sys.executable, FAULTY, child_fault, str(state), times), line_limit_bytes=1 << 20
        )
        consumers.append(
            ShardConsumer(
                shard,
                ListRecordSource(make_records(poison), 10),
                InMemoryCheckpointStore(TRIM_HORIZON),
                launch,
                settings(**timeouts),
                clock=sleep,
            )
        )
    outcomes = await asyncio.wait_for(asyncio.gather(*(c.run() for c in consumers)), timeout=60)
    delivered = {
        shard: Counter((tmp_path / shard / "delivered.log").read_text().split())
        for shard in ("shard-A", "shard-B")
    }
    return outcomes[0], outcomes[1], sleep, delivered


def assert_healthy_shard_unaffected(outcome: ShardOutcome, delivered: Counter[str]) -> None:
    assert outcome.state is ShardState.SHUTDOWN_COMPLETE and outcome.reason is ShutdownReason.SHARD_END
    assert outcome.checkpoint == SHARD_END
    assert outcome.stats.child_starts == 1 and outcome.stats.child_failures == 0
    assert set(delivered.values()) == {1} and len(delivered) == RECORDS


@pytest.mark.parametrize(
    ("fault", "timeouts", "message"),
    [
        ("crash", {}, "stdout closed while waiting for processRecords: child pid \\d+ exited with status 3"),
        ("exit-early", {}, "stdout closed while waiting for processRecords: .*exited with status 0"),
        (
            "rt-signal",
            {},
            "stdout closed while waiting for processRecords: .*killed by signal \\d+ \\(SIGRTMIN\\+6\\)",
        ),
        (
            "orphan-stdout",
            {},
            "exited while waiting for processRecords, but a process it started still holds its stdout "
            "open: child pid \\d+ exited with status 3",
        ),
        # hang, long-line and stop-reading: the child sleeps after its fault and never sees the end of
        # its input, so a short end-of-input grace before the SIGTERM that stops it (the escalation has
        # a test of its own)
        ("hang", {"processRecords": 0.5, "stop": 0.3}, "no answer to processRecords within 0.5s"),
        ("wrong-status", {}, "child answered 'processRecords' with a status for 'initialize'"),
        ("long-line", {"stop": 0.3}, "longer than the 1048576 byte limit \\(childMaxLineBytes\\)"),
        ("stop-reading", {"write": 0.5, "stop": 0.3}, "did not read .* bytes from its stdin within 0.5s"),
        ("no-shard-end", {}, "answered shardEnded without checkpointing SHARD_END"),
    ],
)
async def test_a_failed_child_is_restarted_from_its_checkpoint(
    tmp_path: Path, fault: str, timeouts: dict[str, float], message: str
) -> None:
    faulty, healthy, sleep, delivered = await run_pair(tmp_path, fault, **timeouts)

    assert faulty.state is ShardState.SHUTDOWN_COMPLETE, faulty.stats.failure_messages
    assert faulty.reason is ShutdownReason.SHARD_END and faulty.checkpoint == SHARD_END
    assert faulty.stats.child_failures == 1 and faulty.stats.child_starts == 2
    assert faulty.stats.failure_messages[0].startswith("[Child")
    assert re.search(message, faulty.stats.failure_messages[0]), faulty.stats.failure_messages
    assert sleep.sleeps == [1.0]  # one backoff, through the injected clock
    # at least once: every record reached a child; re-delivery only after the last checkpoint
    assert len(delivered["shard-A"]) == RECORDS
    assert max(delivered["shard-A"].values()) <= 2
    assert_healthy_shard_unaffected(healthy, delivered["shard-B"])


async def test_a_child_failing_every_time_is_parked_not_crash_looped(tmp_path: Path) -> None:
    faulty, healthy, sleep, delivered = await run_pair(tmp_path, "crash", times="always")

    assert faulty.state is ShardState.PARKED
    assert faulty.stats.child_starts == 3 and faulty.stats.child_failures == 3
    assert sleep.sleeps == [1.0, 2.0]  # exponential backoff, then parked
    assert faulty.parked_because is not None and "failed 3 times in a row" in faulty.parked_because
    assert faulty.checkpoint.sequence_number == str(100 + 9)  # the last batch before the poison one
    assert_healthy_shard_unaffected(healthy, delivered["shard-B"])


async def test_noisy_child_is_not_a_failure(tmp_path: Path) -> None:
    noisy, healthy, sleep, delivered = await run_pair(tmp_path, "noisy")
    assert noisy.checkpoint == SHARD_END and noisy.stats.child_failures == 0
    assert sleep.sleeps == []
    assert_healthy_shard_unaffected(healthy, delivered["shard-B"])


async def test_missing_executable_parks_with_a_clear_error(tmp_path: Path) -> None:
    sleep = FakeClock()
    launch = make_child_launcher(("/nonexistent/processor", "--x"), line_limit_bytes=1 << 20)
    consumer = ShardConsumer(
        "s",
        ListRecordSource(make_records(False), 10),
        InMemoryCheckpointStore(TRIM_HORIZON),
        launch,
        settings(),
        clock=sleep,
    )
    outcome = await consumer.run()
    assert outcome.state is ShardState.PARKED
    assert (
        "cannot start '/nonexistent/processor': No such file or directory"
        in outcome.stats.failure_messages[0]
    )


async def test_lease_lost_and_shutdown_signals(tmp_path: Path) -> None:
    state = tmp_path / "s"
    state.mkdir()
    launch = make_child_launcher((sys.executable, FAULTY, "none", str(state)), line_limit_bytes=1 << 20)

    class SlowSource(ListRecordSource):
        async def next_batch(self):  # type: ignore[no-untyped-def]
            batch = await super().next_batch()
            await asyncio.sleep(0.05)
            return batch

    store = InMemoryCheckpointStore(TRIM_HORIZON)
    consumer = ShardConsumer("s", SlowSource(make_records(False), 2), store, launch, settings())
    task = asyncio.create_task(consumer.run())
    while consumer.stats.batches < 2:  # noqa: ASYNC110 - polls the consumer's own counter
        await asyncio.sleep(0.01)
    consumer.request_shutdown()
    outcome = await asyncio.wait_for(task, 10)
    # shutdownRequested (the child checkpoints everything delivered), then leaseLost
    assert outcome.reason is ShutdownReason.LEASE_LOST and outcome.state is ShardState.SHUTDOWN_COMPLETE
    assert not outcome.checkpoint.is_sentinel
    assert outcome.stats.records_delivered < RECORDS


async def test_stop_escalates_to_sigkill_for_a_child_that_ignores_eof_and_sigterm(tmp_path: Path) -> None:
    child = await ChildProcess.spawn(
        (sys.executable, FAULTY, "ignore-eof", str(tmp_path)), line_limit_bytes=1 << 16
    )
    await asyncio.sleep(0.3)  # let it install its SIGTERM handler
    code = await child.stop(StopTimeouts(after_eof_s=0.2, after_sigterm_s=0.2))
    assert code == -9


async def test_records_at_or_before_the_checkpoint_are_never_delivered(tmp_path: Path) -> None:
    """A source that re-reads from the checkpoint (AT_SEQUENCE_NUMBER, mid-aggregate) re-sends old records."""

    class RereadingSource(ListRecordSource):
        async def start(self, after):  # type: ignore[no-untyped-def]
            self._next = 0  # ignores the position: everything again, like a re-fetch from an older point

    records = [Record(b"r", "pk", "500", sub, 1) for sub in range(4)] + [Record(b"r", "pk", "501", 0, 1)]
    launch = make_child_launcher((sys.executable, FAULTY, "none", str(tmp_path)), line_limit_bytes=1 << 20)
    store = InMemoryCheckpointStore(ExtendedSequenceNumber("500", 1))
    outcome = await ShardConsumer("s", RereadingSource(records, 3), store, launch, settings()).run()
    delivered = (tmp_path / "delivered.log").read_text().split()
    assert delivered == ["500/2", "500/3", "501/0"]
    assert outcome.checkpoint == SHARD_END


async def test_a_checkpoint_request_the_codec_cannot_use_is_answered_not_skipped(tmp_path: Path) -> None:
    faulty, healthy, sleep, delivered = await run_pair(tmp_path, "bad-checkpoint", action=10.0)
    replies = [json.loads(line) for line in (tmp_path / "shard-A" / "replies.log").read_text().splitlines()]
    # 0.0 is coerced to 0 as Java does (a valid checkpoint at the batch's last record)
    # then a 5,000-digit sequence number (as a string and as a JSON number) and an exponent that
    # would overflow: refused with the Java name, never a traceback (issue 17)
    assert [r["error"] for r in replies] == [None] + ["IllegalArgumentException"] * 5
    assert replies[0]["subSequenceNumber"] == 0
    assert faulty.state is ShardState.SHUTDOWN_COMPLETE and faulty.stats.child_failures == 0
    assert faulty.checkpoint == SHARD_END and sleep.sleeps == []
    assert_healthy_shard_unaffected(healthy, delivered["shard-B"])


async def test_a_silent_child_is_reported_stalled_once_per_stall(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "s"
    state.mkdir()
    launch = make_child_launcher((sys.executable, FAULTY, "hang", str(state)), line_limit_bytes=1 << 20)
    consumer_settings = ConsumerSettings(
        timeouts=ActionTimeouts(default_s=None, write_s=10.0, stall_warning_s=0.3),
        stop=StopTimeouts(after_eof_s=0.3, after_sigterm_s=1.0),  # it never sees the end of input
        return_when_parked=True,
    )
    consumer = ShardConsumer(
        "s",
        ListRecordSource(make_records(True), 10),
        InMemoryCheckpointStore(TRIM_HORIZON),
        launch,
        consumer_settings,
    )
    task = asyncio.create_task(consumer.run())
    for _ in range(200):
        if consumer.stalled is not None:
            break
        await asyncio.sleep(0.05)
    assert consumer.stalled == "processRecords"
    await asyncio.sleep(0.8)  # still stalled: no second warning
    consumer.request_shutdown()
    consumer.lease_lost()  # the hanging child never answers; lease loss stops it
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    warnings = [r.getMessage() for r in caplog.records if "has not answered" in r.getMessage()]
    assert len(warnings) == 1, warnings
    # the warning says how long the child has been silent: 0.3 s, or more on a loaded machine
    found = re.search(
        r"has not answered processRecords for (\d+\.\d)s \(no timeoutInSeconds is set", warnings[0]
    )
    assert found is not None and float(found.group(1)) >= 0.3, warnings[0]
