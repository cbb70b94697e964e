"""Poison records with real children: an unmodified amazon_kclpy processor that raises, exits or hangs on
chosen records, one shard consumer, records from a list (no emulator). Restart backoffs go through an
injected sleep; only child start-ups and the fault detection run in real time."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path

import pytest

from kcl_daemon.core.lifecycle.poison import PoisonPolicy
from kcl_daemon.core.lifecycle.restart_policy import RestartPolicy
from kcl_daemon.core.lifecycle.states import ShardState, ShutdownReason
from kcl_daemon.core.sequence import SHARD_END, TRIM_HORIZON
from kcl_daemon.dead_letters.letter import DeadLetter
from kcl_daemon.dead_letters.sinks import FileSink, read_file_letters
from kcl_daemon.lifecycle.shard_consumer import (
    ConsumerSettings,
    ShardConsumer,
    ShardOutcome,
    make_child_launcher,
)
from kcl_daemon.process.child import StopTimeouts
from kcl_daemon.process.session import ActionTimeouts
from kcl_daemon.replay.command import InMemoryCheckpointStore, ListRecordSource
from kcl_protocol import Record
from tests.support.clocks import FakeClock
from tests.support.paths import CHILDREN

KCLPY_POISON = str(CHILDREN / "kclpy_poison.py")
BATCH = 100


def records(count: int, poison: set[int]) -> list[Record]:
    return [
        Record(
            (f"poison-{i}" if i in poison else f"r{i}").encode(),
            f"pk{i}",
            str(1000 + i),
            0,
            1_700_000_000_000,
        )
        for i in range(count)
    ]


def settings(
    policy: PoisonPolicy,
    sink: FileSink | None,
    *,
    process_timeout_s: float | None = None,
    stop_s: float = 2.0,
) -> ConsumerSettings:
    return ConsumerSettings(
        timeouts=ActionTimeouts(
            default_s=30.0,
            per_action_s={} if process_timeout_s is None else {"processRecords": process_timeout_s},
        ),
        stop=StopTimeouts(after_eof_s=stop_s, after_sigterm_s=stop_s),
        restart=RestartPolicy(),  # the defaults: 1 s doubling, 5 failures without progress park
        poison_policy=policy,
        dead_letters=sink,
        application="poison-test",
        return_when_parked=True,
    )


async def run_shard(
    tmp_path: Path, mode: str, policy: PoisonPolicy, poison: set[int], count: int = 1000, **kw: float
) -> tuple[ShardOutcome, list[dict[str, object]], FakeClock]:
    out = tmp_path / "processed.jsonl"
    sink = FileSink(tmp_path / "dead") if policy is PoisonPolicy.DEAD_LETTER else None
    clock = FakeClock()
    consumer = ShardConsumer(
        "shardId-000000000000",
        ListRecordSource(records(count, poison), BATCH),
        InMemoryCheckpointStore(TRIM_HORIZON),
        make_child_launcher((sys.executable, KCLPY_POISON, mode, str(out)), line_limit_bytes=1 << 20),
        settings(policy, sink, process_timeout_s=kw.get("timeout"), stop_s=kw.get("stop", 2.0)),
        clock=clock,
    )
    outcome = await asyncio.wait_for(consumer.run(), timeout=120)
    lines = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    processed = [line for line in lines if line["event"] == "record"]
    return outcome, processed, clock


def assert_every_good_record_in_order(
    processed: list[dict[str, object]], count: int, poison: set[int]
) -> int:
    """Every other record processed; first deliveries in order; returns the re-deliveries."""
    seqs = [int(str(p["seq"])) - 1000 for p in processed]
    first_seen: list[int] = []
    seen: set[int] = set()
    for i in seqs:
        if i not in seen:
            seen.add(i)
            first_seen.append(i)
    assert first_seen == [i for i in range(count) if i not in poison]
    return len(seqs) - len(first_seen)


@pytest.mark.parametrize("mode", ["raise", "exit"])
def test_dead_letter_isolates_the_poison_record_and_delivers_the_rest(tmp_path: Path, mode: str) -> None:
    poison = {437}
    outcome, processed, clock = asyncio.run(run_shard(tmp_path, mode, PoisonPolicy.DEAD_LETTER, poison))
    assert outcome.state is ShardState.SHUTDOWN_COMPLETE and outcome.reason is ShutdownReason.SHARD_END
    assert outcome.checkpoint == SHARD_END
    redelivered = assert_every_good_record_in_order(processed, 1000, poison)
    letters = [item for _, _, item in read_file_letters(tmp_path / "dead")]
    assert len(letters) == 1 and isinstance(letters[0], DeadLetter)
    letter = letters[0]
    assert (letter.sequence_number, letter.record().data) == ("1437", b"poison-437")
    assert letter.shard_id == "shardId-000000000000" and letter.application == "poison-test"
    assert letter.failure.kind == {"raise": "exception", "exit": "exit"}[mode]
    if mode == "raise":
        assert any("Caught exception from action dispatch" in line for line in letter.failure.stderr)
    else:
        assert "exited with status 3" in letter.failure.detail
    stats = outcome.stats
    assert stats.set_aside == 1
    # The whole batch 3 times, then one failing sub-batch per level down to the record (100 -> 1: <= 7).
    assert 3 + 5 <= stats.failed_deliveries <= 3 + 7
    assert redelivered <= stats.redelivered_records
    # restarts wait only while the whole batch is retried: 1 s + 2 s with the default backoff
    if mode == "exit":
        assert clock.sleeps == pytest.approx([1.0, 2.0])


def test_skip_drops_the_poison_record_and_delivers_the_rest(tmp_path: Path) -> None:
    poison = {5, 250, 251, 999}
    outcome, processed, _ = asyncio.run(run_shard(tmp_path, "raise", PoisonPolicy.SKIP, poison))
    assert outcome.checkpoint == SHARD_END
    assert_every_good_record_in_order(processed, 1000, poison)
    assert outcome.stats.set_aside == 4
    assert not (tmp_path / "dead").exists()


def test_a_hanging_processor_times_out_and_is_dead_lettered(tmp_path: Path) -> None:
    # A small batch: each failure costs the timeout in real time (the hung child gets SIGTERM at once).
    # Four records: the whole batch three times, then [0, 1] goes through, [2, 3] and [2] time out and
    # [3] goes through - five timeouts, of half a second (a child that is up answers within milliseconds).
    poison = {2}
    outcome, processed, _ = asyncio.run(
        run_shard(tmp_path, "hang", PoisonPolicy.DEAD_LETTER, poison, count=4, timeout=0.5, stop=5.0)
    )
    assert outcome.checkpoint == SHARD_END
    assert_every_good_record_in_order(processed, 4, poison)
    assert outcome.stats.failed_deliveries == 5 and outcome.stats.set_aside == 1
    [(_, _, letter)] = list(read_file_letters(tmp_path / "dead"))
    assert isinstance(letter, DeadLetter) and letter.failure.kind == "timeout"


def test_retry_keeps_todays_behaviour_and_counts_the_exception(tmp_path: Path) -> None:
    """The default: the wrapper's swallowed exception ends the batch as done (the rest of that batch is
    never processed, as with the Java daemon), now with a warning and a count."""
    poison = {437}
    outcome, processed, _ = asyncio.run(run_shard(tmp_path, "raise", PoisonPolicy.RETRY, poison))
    assert outcome.checkpoint == SHARD_END
    seqs = {int(str(p["seq"])) - 1000 for p in processed}
    assert seqs == set(range(400, 437)).union(range(500, 1000)).union(range(400))
    assert outcome.stats.processor_exceptions == 1 and outcome.stats.set_aside == 0


def test_the_processor_hands_records_to_the_destination_itself(tmp_path: Path) -> None:
    """The channel's deadLetter (kcl_client's ``dead_letter(record, reason)``): no failure, no retry."""
    out = tmp_path / "processed.jsonl"
    sink = FileSink(tmp_path / "dead")
    data = [
        Record(
            (f"bad-{i}" if i % 97 == 5 else f"r{i}").encode(), f"pk{i}", str(1000 + i), 0, 1_700_000_000_000
        )
        for i in range(300)
    ]
    consumer = ShardConsumer(
        "shardId-000000000000",
        ListRecordSource(data, BATCH),
        InMemoryCheckpointStore(TRIM_HORIZON),
        make_child_launcher(
            (sys.executable, str(CHILDREN / "dead_letter_processor.py"), str(out)), line_limit_bytes=1 << 20
        ),
        dataclasses.replace(settings(PoisonPolicy.DEAD_LETTER, sink), child_channel=True),
        clock=FakeClock(),
    )
    outcome = asyncio.run(asyncio.wait_for(consumer.run(), timeout=60))
    assert outcome.checkpoint == SHARD_END
    bad = {i for i in range(300) if i % 97 == 5}
    processed = [json.loads(line) for line in out.read_text().splitlines()]
    assert [int(p["seq"]) - 1000 for p in processed] == [i for i in range(300) if i not in bad]
    letters = [item for _, _, item in read_file_letters(tmp_path / "dead")]
    assert all(isinstance(x, DeadLetter) for x in letters)
    assert sorted(int(x.sequence_number) - 1000 for x in letters if isinstance(x, DeadLetter)) == sorted(bad)
    assert {x.failure.kind for x in letters if isinstance(x, DeadLetter)} == {"processor"}
    assert outcome.stats.failed_deliveries == 0 and outcome.stats.set_aside == len(bad)


def test_a_processor_that_fails_on_everything_is_parked_not_dead_lettering_the_stream(tmp_path: Path) -> None:
    """Every record is "poison" (a dependency is down): after BROKEN_AFTER records isolated with none
    answered, the shard falls back to ordinary restarts and parks, having dead-lettered at most two."""
    everything = set(range(50))
    outcome, processed, _ = asyncio.run(
        run_shard(tmp_path, "exit", PoisonPolicy.DEAD_LETTER, everything, count=50)
    )
    assert outcome.state is ShardState.PARKED and not processed
    letters = list(read_file_letters(tmp_path / "dead"))
    assert len(letters) == 2 and outcome.stats.set_aside == 2


def test_a_kpl_aggregate_is_split_at_its_user_records(tmp_path: Path) -> None:
    """User records of one aggregate share a sequence number: the bisection isolates the poison one by its
    sub-sequence number; its siblings before and after it are processed, in order."""
    data = [
        Record(
            (f"poison-{sub}" if sub == 6 else f"u{sub}").encode(), f"pk{sub}", "5000", sub, 1_700_000_000_000
        )
        for sub in range(10)
    ] + [Record(b"after", "pk", "5001", 0, 1_700_000_000_000)]
    out = tmp_path / "processed.jsonl"
    sink = FileSink(tmp_path / "dead")
    consumer = ShardConsumer(
        "shardId-000000000000",
        ListRecordSource(data, BATCH),
        InMemoryCheckpointStore(TRIM_HORIZON),
        make_child_launcher((sys.executable, KCLPY_POISON, "raise", str(out)), line_limit_bytes=1 << 20),
        settings(PoisonPolicy.DEAD_LETTER, sink),
        clock=FakeClock(),
    )
    outcome = asyncio.run(asyncio.wait_for(consumer.run(), timeout=60))
    assert outcome.checkpoint == SHARD_END
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    first: list[tuple[str, int]] = []
    for p in lines:
        if p["event"] == "record" and (p["seq"], p["sub"]) not in first:
            first.append((p["seq"], p["sub"]))
    assert first == [("5000", sub) for sub in range(10) if sub != 6] + [("5001", 0)]
    [(_, _, letter)] = list(read_file_letters(tmp_path / "dead"))
    assert isinstance(letter, DeadLetter)
    assert (letter.sequence_number, letter.sub_sequence_number) == ("5000", 6)
