"""Poison records with the project's Node and shell clients as real children: a record the processor
throws on (the client logs it and answers; the daemon notices), exits on, or hangs on, is isolated and
dead-lettered; records the processor hands over itself (``deadLetter``) go straight to the destination.
One shard consumer, records from a list, restart backoffs through an injected sleep."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from kcl_daemon.core.lifecycle.poison import PoisonPolicy
from kcl_daemon.core.sequence import SHARD_END, TRIM_HORIZON
from kcl_daemon.dead_letters.letter import DeadLetter
from kcl_daemon.dead_letters.sinks import FileSink, read_file_letters
from kcl_daemon.lifecycle.shard_consumer import ShardConsumer, make_child_launcher
from kcl_daemon.replay.command import InMemoryCheckpointStore, ListRecordSource
from kcl_protocol import Record
from tests.component.lifecycle.test_poison_records import settings
from tests.support.clocks import FakeClock
from tests.support.paths import CHILDREN
from tests.support.requirements import require_tool

# real Python, Node and shell children: a client toolchain, so not in the fast loop (tests/support/layout.py)
pytestmark = [pytest.mark.integration, pytest.mark.clients]

COUNT = 200
POISON = {61}
BAD = {17, 150}


def argv(client: str, mode: str, out: Path) -> tuple[str, ...]:
    if client == "node":
        return (require_tool("node"), str(CHILDREN / "poison_processor.js"), mode, str(out))
    require_tool("jq")
    return (require_tool("bash"), str(CHILDREN / "poison_processor.sh"), mode, str(out))


def records() -> list[Record]:
    def text(i: int) -> str:
        return f"poison-{i}" if i in POISON else f"bad-{i}" if i in BAD else f"r{i}"

    return [Record(text(i).encode(), f"pk{i}", str(1000 + i), 0, 1_700_000_000_000) for i in range(COUNT)]


@pytest.mark.parametrize(
    ("client", "mode", "kind"),
    [
        ("node", "throw", "exception"),
        ("node", "exit", "exit"),
        ("node", "hang", "timeout"),
        ("shell", "fail", "exception"),
        ("shell", "exit", "exit"),
    ],
)
def test_a_poison_record_is_isolated_and_the_rest_flows(
    tmp_path: Path, client: str, mode: str, kind: str
) -> None:
    out = tmp_path / "processed.jsonl"
    sink = FileSink(tmp_path / "dead")
    timeout = 2.0 if mode == "hang" else None
    consumer = ShardConsumer(
        "shardId-000000000000",
        ListRecordSource(records(), 100 if mode != "hang" else 20),
        InMemoryCheckpointStore(TRIM_HORIZON),
        make_child_launcher(argv(client, mode, out), line_limit_bytes=1 << 20),
        dataclasses.replace(
            settings(PoisonPolicy.DEAD_LETTER, sink, process_timeout_s=timeout, stop_s=0.5),
            child_channel=True,
        ),
        clock=FakeClock(),
    )
    outcome = asyncio.run(asyncio.wait_for(consumer.run(), timeout=120))
    assert outcome.checkpoint == SHARD_END
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    processed = [line for line in lines if line["event"] == "record"]
    first: list[int] = []
    for p in processed:
        if (i := int(p["seq"]) - 1000) not in first:
            first.append(i)
    assert first == [i for i in range(COUNT) if i not in POISON | BAD]
    letters = [x for _, _, x in read_file_letters(tmp_path / "dead") if isinstance(x, DeadLetter)]
    kinds = {int(x.sequence_number) - 1000: x.failure.kind for x in letters}
    assert {i: k for i, k in kinds.items() if i in POISON} == dict.fromkeys(POISON, kind)
    assert {i: k for i, k in kinds.items() if i in BAD} == dict.fromkeys(BAD, "processor")
