"""The poison-record fleet test, shared by its destinations (file, SQS, S3, Kinesis): one daemon, 4 shards,
10,000 records of which one is poison, ``poisonRecordPolicy = DEAD_LETTER``. The shards run real children
on different clients at once (``tests/fixtures/children/poison_children.py``): an unmodified amazon_kclpy
processor (``kclpy_poison.py``), the project's Node and shell clients (``poison_processor.js``, ``.sh``);
each run chooses which one gets the poison record's shard and how it fails there: ``error`` (it raises or
returns an error and its client answers anyway), ``crash`` (it exits) or ``hang`` (it never answers; the
run sets ``processRecordsTimeoutInSeconds``)."""

from __future__ import annotations

import base64
import json
import re
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
from tests.support.figures import FIGURES
from tests.support.fleet import Fleet
from tests.support.paths import CHILDREN

KCLPY_POISON = CHILDREN / "kclpy_poison.py"
POISON_CHILDREN = CHILDREN / "poison_children.py"
#: the daemon's WARNING for each failed delivery of a held batch (kcl_daemon.lifecycle.poison_delivery)
FAILED_DELIVERY = re.compile(r"shard (\S+): delivery of (\d+) records from \S+ failed")
RECORDS = 10_000
SHARDS = 4
POISON = 4321
CLIENTS = ("kclpy", "node", "shell")
#: maxRecords of the fleet: the largest batch, so the bisection takes at most ceil(log2(100)) = 7 steps
MAX_RECORDS = 100
#: the hang runs' processRecordsTimeoutInSeconds (unset by default: a hung processor is waited for)
HANG_TIMEOUT_S = 3


@dataclass(frozen=True)
class PoisonRun:
    letters: list[DeadLetter]
    processed: list[dict[str, Any]]
    poison_events: list[dict[str, Any]]
    #: seconds from the processor's first failure on the poison record to its first record after it
    moved_on_s: float
    redelivered: int
    #: of those, the ones sent again after the last whole-batch attempt failed (by the bisection)
    redelivered_in_bisection: int
    log: str
    #: the client each shard ran, the poison record's shard
    children: dict[str, str]
    poison_shard: str

    def failed_delivery_records(self) -> dict[str, int]:
        """Per shard, the records of the deliveries the daemon logged as failed (each such record is
        delivered again at most once for each failure: whole, or in one of the halves)."""
        counts: dict[str, int] = {}
        for shard, records in FAILED_DELIVERY.findall(self.log):
            counts[shard] = counts.get(shard, 0) + int(records)
        return counts


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
    client: str = "kclpy",
    kind: str = "error",
    env: dict[str, str] | None = None,
    during: Callable[[Outage], None] | None = None,
) -> PoisonRun:
    """``client`` runs the poison record's shard and fails there as ``kind`` says; the other shards run
    the other clients (every client runs in every run). ``during`` runs once the daemon started, before
    the wait for the end (a fault test's outage)."""
    last, poison_shard, poison_seq = put_with_poison(clients, stream)
    assert len(last) == SHARDS
    others = [c for c in CLIENTS if c != client] + [client]
    children = {poison_shard: client} | dict(zip(sorted(set(last) - {poison_shard}), others, strict=True))
    (tmp_path / "children.json").write_text(json.dumps(children))
    table = f"deadletters-{int(time.time() * 1000)}"
    out = tmp_path / "processed.jsonl"
    extra = (
        f"maxRecords = {MAX_RECORDS}\npoisonRecordPolicy = DEAD_LETTER\n"
        f"deadLetterDestination = {destination}\n"
    )
    if kind == "hang":
        extra += f"processRecordsTimeoutInSeconds = {HANG_TIMEOUT_S}\n"
    fleet = Fleet(tmp_path, backend, table, stream, extra=extra)
    leases = DynamoLeaseTable(clients.dynamodb, table)

    def lines() -> list[dict[str, Any]]:
        if not out.exists():
            return []
        text = out.read_text()
        return [_with_text(json.loads(line)) for line in text[: text.rfind("\n") + 1].splitlines() if line]

    def done() -> bool:
        try:
            checkpoints = {lease.shard_id: str(lease.checkpoint) for lease in leases.list_leases().leases}
        except Exception:  # noqa: BLE001 - the table does not exist yet
            return False
        return checkpoints == last and bool(read_letters())

    try:
        command = f"{sys.executable} {POISON_CHILDREN} {tmp_path / 'children.json'} {kind} {out}"
        fleet.start("worker-a", command, env=env)
        if during is not None:
            during(Outage(leases, poison_shard, poison_seq, fleet))
        fleet.wait(done, 120, "every shard checkpointed at its last record and the poison dead-lettered")
        log = fleet.daemons["worker-a"].text()  # all of it: payloads must be in none of it
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
    redelivered = in_bisection = 0
    # the whole batch fails maxDeliveryAttempts (3) times: every later failure is the bisection's
    bisecting_from = poison_events[min(2, len(poison_events) - 1)]["t"]
    for p in processed:
        key = (p["shard"], p["seq"], p["sub"])
        redelivered += key in seen
        in_bisection += key in seen and p["t"] > bisecting_from
        seen.add(key)
    return PoisonRun(
        read_letters(),
        processed,
        poison_events,
        min(after) - poison_events[0]["t"],
        redelivered,
        in_bisection,
        log,
        children,
        poison_shard,
    )


def _redelivered_by_shard(run: PoisonRun) -> dict[str, int]:
    seen: set[tuple[str, str, int]] = set()
    counts: dict[str, int] = {}
    for p in run.processed:
        key = (p["shard"], p["seq"], p["sub"])
        if key in seen:
            counts[p["shard"]] = counts.get(p["shard"], 0) + 1
        seen.add(key)
    return counts


def _with_text(line: dict[str, Any]) -> dict[str, Any]:
    """The shell processor writes a record's payload as base64 (``data``): add its ``text``."""
    if "data" in line and "text" not in line:
        line["text"] = base64.b64decode(line["data"]).decode(errors="replace")
    return line


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
    assert set(run.children.values()) == set(CLIENTS), run.children
    # Re-deliveries come only from the retries and the bisection, each of a delivery the daemon counted
    # as failed: the poison record's batch, and any batch whose checkpoint failed under load (the
    # processor raised). A failed delivery's records are delivered again once: whole, or in halves.
    redelivered, failed = _redelivered_by_shard(run), run.failed_delivery_records()
    assert all(count <= failed.get(shard, 0) for shard, count in redelivered.items()), (redelivered, failed)
    # The poison record is handed over at most maxDeliveryAttempts times whole, then once per level.
    assert len(run.poison_events) <= 3 + 7, len(run.poison_events)


#: each failure kind as the letter names it
LETTER_KIND = {"error": "exception", "crash": "exit", "hang": "timeout"}


def record_figures(run: PoisonRun, client: str, kind: str, destination: str) -> None:
    """The closing note's figures for this run (printed at the end of the test run)."""
    FIGURES[f"poison record ({client} {kind}, {destination}): first failure -> shard moves on"] = (
        f"{run.moved_on_s:.1f} s; {run.redelivered} records re-delivered by the retries and the bisection "
        f"({run.redelivered_in_bisection} by the bisection); "
        f"{len(run.poison_events)} deliveries failed on the poison record; shards ran "
        + ", ".join(sorted(set(run.children.values())))
    )
