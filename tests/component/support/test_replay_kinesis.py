"""The benchmarks' replay endpoint: a held stream's reads answered as Kinesis would, the rest forwarded."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.core.shards.iterator import IteratorPosition, IteratorType
from tests.support.replay_kinesis import ReplayKinesis, ReplayRecord
from tests.support.streams import kinesis_client

#: shard -> (sequence number, arrival ms) of its records
SHARDS = {
    "shardId-000000000000": [(str(10**20 + 10 * i), 1_700_000_000_000 + 1000 * i) for i in range(25)],
    "shardId-000000000001": [(str(10**20 + 7 * i), 1_700_000_000_000 + 1000 * i) for i in range(3)],
}


class _Upstream(BaseHTTPRequestHandler):
    """Answers any call with the operation it was asked for (what the replay forwarded)."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"Forwarded": self.headers["X-Amz-Target"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def replay() -> Iterator[ReplayKinesis]:
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=upstream.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        with ReplayKinesis(f"http://127.0.0.1:{upstream.server_address[1]}") as server:
            server.hold(
                "s",
                {
                    shard: [
                        ReplayRecord(seq, ms, base64.b64encode(f"{shard[-1]}-{n}".encode()).decode(), f"k{n}")
                        for n, (seq, ms) in enumerate(rows)
                    ]
                    for shard, rows in SHARDS.items()
                },
            )
            yield server
    finally:
        upstream.shutdown()
        upstream.server_close()


@pytest.fixture
def client(replay: ReplayKinesis, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    made = kinesis_client(replay.endpoint)
    yield made
    made.close()


def _read_all(client: Any, iterator: str, limit: int) -> list[str]:
    seen: list[str] = []
    while True:
        page = client.get_records(ShardIterator=iterator, Limit=limit)
        seen += [r["SequenceNumber"] for r in page["Records"]]
        iterator = page["NextShardIterator"]  # open shards: always a next iterator
        if not page["Records"]:
            return seen


@pytest.mark.parametrize(
    ("kind", "extra", "first"),
    [
        ("TRIM_HORIZON", {}, 0),
        ("AT_SEQUENCE_NUMBER", {"StartingSequenceNumber": str(10**20 + 50)}, 5),
        ("AFTER_SEQUENCE_NUMBER", {"StartingSequenceNumber": str(10**20 + 50)}, 6),
        ("AFTER_SEQUENCE_NUMBER", {"StartingSequenceNumber": str(10**20 + 55)}, 6),  # between two records
        ("AT_TIMESTAMP", {"Timestamp": datetime.fromtimestamp(1_700_000_007.5, UTC)}, 8),
        ("LATEST", {}, 25),
    ],
)
def test_pages_from_each_iterator_type_as_kinesis_pages_them(
    replay: ReplayKinesis, client: Any, kind: str, extra: dict[str, Any], first: int
) -> None:
    iterator = client.get_shard_iterator(
        StreamName="s", ShardId="shardId-000000000000", ShardIteratorType=kind, **extra
    )["ShardIterator"]
    expected = [seq for seq, _ in SHARDS["shardId-000000000000"]][first:]
    assert _read_all(client, iterator, limit=4) == expected


def test_records_carry_their_payload_key_and_arrival_and_the_daemons_client_parses_them(
    replay: ReplayKinesis, client: Any
) -> None:
    kinesis = Kinesis(client)
    iterator = kinesis.get_shard_iterator(
        "s", "shardId-000000000001", IteratorPosition(IteratorType.TRIM_HORIZON)
    )
    page = kinesis.get_records(iterator, 10)
    assert [r.sequence_number for r in page.records] == [seq for seq, _ in SHARDS["shardId-000000000001"]]
    assert [r.data for r in page.records] == [b"1-0", b"1-1", b"1-2"]
    assert [r.partition_key for r in page.records] == ["k0", "k1", "k2"]
    assert page.millis_behind_latest == 0 and page.next_iterator is not None
    assert replay.served["GetRecords"] == 1 and replay.served["records"] == 3


def test_other_calls_and_other_streams_go_to_the_upstream(replay: ReplayKinesis, client: Any) -> None:
    client.meta.events.register("after-call.kinesis.*", _keep_raw)
    assert (
        client.list_shards(StreamName="s")["ResponseMetadata"]["kept"]["Forwarded"]
        == "Kinesis_20131202.ListShards"
    )
    other = client.get_shard_iterator(
        StreamName="t", ShardId="shardId-000000000000", ShardIteratorType="LATEST"
    )
    assert other["ResponseMetadata"]["kept"]["Forwarded"] == "Kinesis_20131202.GetShardIterator"
    assert replay.served["forwarded"] == 2


def _keep_raw(http_response: Any, parsed: dict[str, Any], **_: Any) -> None:
    parsed["ResponseMetadata"]["kept"] = json.loads(http_response.content)
