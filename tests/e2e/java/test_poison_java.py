"""What the real Java MultiLangDaemon (KCL 3.1.3) does with the poison-record processor kcl-daemon's tests
use (``tests/fixtures/children/kclpy_poison.py``: unmodified amazon_kclpy), for the comparison in
docs/failures.md: 10,000 records over 4 shards, one poison, ``maxRecords = 100``.

* raise: amazon_kclpy catches the exception and answers the batch as done; Java moves on and checkpoints
  past the rest of that batch, which is never processed.
* exit: the child dies; Java stops its whole worker (the JVM exits) and the shard moves no further.

The test measures and records what happens (``FIGURES``); it asserts only what the comparison relies on.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend
from tests.support.figures import FIGURES
from tests.support.java import H2cProxy, JavaDaemon, unavailable
from tests.support.poison import KCLPY_POISON, POISON, RECORDS, SHARDS, put_with_poison
from tests.support.streams import new_stream

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.java]
VERSION = 3


def lines(out: Path) -> list[dict[str, Any]]:
    if not out.exists():
        return []
    text = out.read_text()
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines() if line]


@pytest.mark.parametrize("mode", ["raise", "exit"])
def test_java_with_a_poison_record(
    tmp_path: Path, kinesalite_endpoint: str, dynalite_endpoint: str, mode: str
) -> None:
    if (why := unavailable(VERSION)) is not None:
        pytest.skip(why)
    backend = Backend("kinesalite+dynalite", kinesalite_endpoint, dynalite_endpoint)
    clients: AwsClients = backend.clients()
    stream = new_stream(clients.kinesis, SHARDS, prefix="poison")
    last, poison_shard, _ = put_with_poison(clients, stream)
    table = f"java-deadletters-{int(time.time() * 1000)}"
    leases = DynamoLeaseTable(clients.dynamodb, table)
    assert leases.create_table_if_missing(wait_s=10, poll_s=0.02)  # with its GSI, which dynalite needs first
    out = tmp_path / "processed.jsonl"
    proxy = H2cProxy(kinesalite_endpoint, tmp_path / "h2c.log")
    java = JavaDaemon(
        "java-1",
        VERSION,
        tmp_path,
        table=table,
        stream=stream,
        kinesis_endpoint=proxy.endpoint,
        dynamodb_endpoint=dynalite_endpoint,
        records=tmp_path / "unused.jsonl",
        extra=f"executableName = {sys.executable} {KCLPY_POISON} {mode} {out}\nmaxRecords = 100\n",
    )
    try:
        deadline = time.monotonic() + 150
        exited_after: float | None = None
        while time.monotonic() < deadline:
            if java.process.poll() is not None:
                exited_after = time.time()
                break
            try:
                checkpoints = {lease.shard_id: str(lease.checkpoint) for lease in leases.list_leases().leases}
            except Exception:  # noqa: BLE001 - the table does not exist yet
                checkpoints = {}
            if checkpoints == last:
                break
            if mode == "exit" and any(p["event"] == "poison" for p in lines(out)):
                first = min(p["t"] for p in lines(out) if p["event"] == "poison")
                if time.time() - first > 60:
                    break
            time.sleep(0.5)
        status = java.process.poll()
        log = java.tail(400)
    finally:
        java.stop()
        proxy.stop()
        clients.dynamodb.delete_table(TableName=table)
    everything = lines(out)
    texts = {p["text"] for p in everything if p["event"] == "record"}
    missing = sorted(
        int(t.split("-")[1]) for t in {f"record-{n}" for n in range(RECORDS) if n != POISON} - texts
    )
    poison_seq = int(next(p["seq"] for p in everything if p["event"] == "poison"))
    after = [
        p
        for p in everything
        if p["event"] == "record" and p["shard"] == poison_shard and int(p["seq"]) > poison_seq
    ]
    deliveries = sum(p["event"] == "poison" for p in everything)
    first_failure = min(p["t"] for p in everything if p["event"] == "poison")
    moved_on = min((p["t"] for p in after), default=None)
    # The figures first (docs/failures.md compares them with kcl-daemon's), then what the comparison needs.
    if mode == "raise":
        FIGURES["Java 3.1.3, processor raises on the poison record"] = (
            f"{len(missing)} records never processed (the rest of the poison record's batch), the checkpoint "
            f"moved past them; the shard moved on "
            + (f"{moved_on - first_failure:.1f} s after the failure" if moved_on else "never")
            + f"; the poison record was delivered {deliveries} time(s); the JVM "
            + ("kept running" if status is None else f"exited with {status}")
        )
        assert status is None, "the JVM exited\n" + log
        assert missing, "Java processed every record"
    else:
        FIGURES["Java 3.1.3, processor exits on the poison record"] = (
            f"JVM exit status {status}"
            + (f" ({exited_after - first_failure:.1f} s after the first failure)" if exited_after else "")
            + f"; {len(after)} records after the poison one processed on its shard; "
            f"{len(missing)} of {RECORDS - 1} records never processed; the poison record delivered "
            f"{deliveries} time(s)"
        )
        assert len(after) < RECORDS // SHARDS
