"""The poison-record fleet test, shared by its destinations (file, SQS, S3, Kinesis): one daemon, 4 shards,
10,000 records of which one is poison, an unmodified amazon_kclpy processor that fails on it
(``tests/fixtures/children/kclpy_poison.py``), ``poisonRecordPolicy = DEAD_LETTER``."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.dead_letters.letter import DeadLetter
from tests.support.emulators import Backend
from tests.support.fleet import Fleet
from tests.support.paths import CHILDREN

KCLPY_POISON = CHILDREN / "kclpy_poison.py"
RECORDS = 10_000
SHARDS = 4
POISON = 4321


@dataclass(frozen=True)
class PoisonRun:
    letters: list[DeadLetter]
    processed: list[dict[str, Any]]
    poison_events: list[dict[str, Any]]
    #: seconds from the processor's first failure on the poison record to its first record after it
    moved_on_s: float
    redelivered: int
    log: str


@dataclass(frozen=True)
class Outage:
    """What a test that takes the destination down needs: the fleet's lease table, where the poison is."""

    leases: DynamoLeaseTable
    poison_shard: str
    poison_seq: str
    fleet: Fleet


def put_with_poison(clients: AwsClients, stream: str) -> tuple[dict[str, str], str, str]:
    """Put RECORDS records, record-n except poison-POISON; (last sequence per shard, the poison's shard and
    sequence number)."""
    last: dict[str, str] = {}
    poison_shard = poison_seq = ""
    for offset in range(0, RECORDS, 250):
        numbers = range(offset, min(offset + 250, RECORDS))
        entries = [
            {"Data": (f"poison-{n}" if n == POISON else f"record-{n}").encode(), "PartitionKey": f"key-{n}"}
            for n in numbers
        ]
        reply = clients.kinesis.put_records(StreamName=stream, Records=entries)  # type: ignore[arg-type]
        assert reply.get("FailedRecordCount", 0) == 0
        for n, result in zip(numbers, reply["Records"], strict=True):
            last[result["ShardId"]] = result["SequenceNumber"]
            if n == POISON:
                poison_shard, poison_seq = result["ShardId"], result["SequenceNumber"]
    return last, poison_shard, poison_seq


def run_poison_fleet(
    tmp_path: Path,
    backend: Backend,
    clients: AwsClients,
    stream: str,
    destination: str,
    read_letters: Callable[[], list[DeadLetter]],
    *,
    mode: str = "raise",
    child: str | None = None,
    env: dict[str, str] | None = None,
    during: Callable[[Outage], None] | None = None,
) -> PoisonRun:
    """``child``: the processor's command without its MODE OUT_FILE arguments (default: kclpy_poison.py);
    ``during`` runs once the daemon started, before the wait for the end (a fault test's outage)."""
    last, poison_shard, poison_seq = put_with_poison(clients, stream)
    assert len(last) == SHARDS
    table = f"deadletters-{int(time.time() * 1000)}"
    out = tmp_path / "processed.jsonl"
    fleet = Fleet(
        tmp_path,
        backend,
        table,
        stream,
        extra=f"maxRecords = 100\npoisonRecordPolicy = DEAD_LETTER\ndeadLetterDestination = {destination}\n",
    )
    leases = DynamoLeaseTable(clients.dynamodb, table)

    def lines() -> list[dict[str, Any]]:
        if not out.exists():
            return []
        text = out.read_text()
        return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines() if line]

    def done() -> bool:
        try:
            checkpoints = {lease.shard_id: str(lease.checkpoint) for lease in leases.list_leases().leases}
        except Exception:  # noqa: BLE001 - the table does not exist yet
            return False
        return checkpoints == last and bool(read_letters())

    try:
        fleet.start("worker-a", f"{child or f'{sys.executable} {KCLPY_POISON}'} {mode} {out}", env=env)
        if during is not None:
            during(Outage(leases, poison_shard, poison_seq, fleet))
        fleet.wait(done, 120, "every shard checkpointed at its last record and the poison dead-lettered")
        log = fleet.logs()
    finally:
        fleet.close()
        clients.dynamodb.delete_table(TableName=table)
    everything = lines()
    processed = [line for line in everything if line["event"] == "record"]
    poison_events = [line for line in everything if line["event"] == "poison"]
    assert poison_events and all(p["shard"] == poison_shard for p in poison_events)
    first_poison = int(poison_events[0]["seq"])
    last_failure = max(p["t"] for p in poison_events)
    after = [
        p["t"]
        for p in processed
        if p["shard"] == poison_shard and int(p["seq"]) > first_poison and p["t"] > last_failure
    ]
    seen: set[tuple[str, str, int]] = set()
    redelivered = 0
    for p in processed:
        key = (p["shard"], p["seq"], p["sub"])
        redelivered += key in seen
        seen.add(key)
    return PoisonRun(
        read_letters(), processed, poison_events, min(after) - poison_events[0]["t"], redelivered, log
    )


def assert_nothing_lost_in_order(run: PoisonRun) -> None:
    """Every record but the poison one processed; per shard, first deliveries in sequence order; the
    poison one dead-lettered, once, with its failure."""
    texts = {p["text"] for p in run.processed}
    assert texts == {f"record-{n}" for n in range(RECORDS) if n != POISON}
    by_shard: dict[str, list[int]] = {}
    seen: set[tuple[str, str]] = set()
    for p in run.processed:
        if (p["shard"], p["seq"]) not in seen:
            seen.add((p["shard"], p["seq"]))
            by_shard.setdefault(p["shard"], []).append(int(p["seq"]))
    for shard, seqs in by_shard.items():
        assert seqs == sorted(seqs), f"{shard}: first deliveries out of order"
    assert len(run.letters) >= 1
    assert {letter.record().data for letter in run.letters} == {f"poison-{POISON}".encode()}
    letter = run.letters[0]
    assert letter.failure.kind in ("exception", "exit", "timeout") and letter.attempts >= 1
    assert f"poison-{POISON}" not in run.log, "a payload was logged"
