"""A read-only Kinesis endpoint that serves copies of streams from memory, for benchmarks (test helper).

kinesalite is a single-threaded Node process: on a small machine every reader of it (a raw GetRecords
loop, a Spark query) keeps it busy all the time, so comparing two readers of kinesalite compares the
emulator with itself. This server holds a copy of a stream's records, each rendered to its JSON once,
and answers ``GetShardIterator`` and ``GetRecords`` for that stream by joining the rendered records of a
page: a few milliseconds of one thread per 10,000 records, so the readers, not the endpoint, set the
pace. Every other call, and every call for a stream it holds no copy of, is forwarded as it is to the
``upstream`` endpoint (the emulator the copy came from), so ``ListShards``, the other streams and writes
behave as the emulator's.

What a copy answers as kinesalite does: every shard stays open (a read at the end gets an empty page and
a next iterator), ``MillisBehindLatest`` is 0, iterators never expire. Iterators are opaque strings of
this server's own, so one from the upstream is not accepted here and the other way round. Independent of
kcl_daemon; request bodies are never logged.
"""

from __future__ import annotations

import base64
import bisect
import http.client
import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

_PREFIX = "Kinesis_20131202."


@dataclass(frozen=True)
class ReplayRecord:
    """One record of a copy: what GetRecords returns for it."""

    sequence_number: str
    arrival_ms: int
    data_b64: str
    partition_key: str


@dataclass
class _Shard:
    sequence_numbers: list[int] = field(default_factory=list)
    arrivals_ms: list[int] = field(default_factory=list)
    rendered: list[bytes] = field(default_factory=list)


def _render(record: ReplayRecord) -> bytes:
    return json.dumps(
        {
            "SequenceNumber": record.sequence_number,
            "ApproximateArrivalTimestamp": record.arrival_ms / 1000,
            "Data": record.data_b64,
            "PartitionKey": record.partition_key,
        },
        separators=(",", ":"),
    ).encode()


class ReplayKinesis:
    """``endpoint`` serves the copies given to :meth:`hold`; everything else goes to ``upstream``."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._streams: dict[str, dict[str, _Shard]] = {}
        self._local = threading.local()
        self._connections: list[http.client.HTTPConnection] = []  # closed on exit
        self.served: dict[str, int] = {"GetShardIterator": 0, "GetRecords": 0, "records": 0, "forwarded": 0}
        self._lock = threading.Lock()
        handler = type("_Handler", (_Handler,), {"replay": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="replay-kinesis", daemon=True
        )

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def hold(self, stream: str, shards: Mapping[str, Iterable[ReplayRecord]]) -> None:
        """Serve ``stream`` from these records (each shard's in sequence order) from now on."""
        copy: dict[str, _Shard] = {}
        for shard_id, records in shards.items():
            shard = copy[shard_id] = _Shard()
            for record in records:
                shard.sequence_numbers.append(int(record.sequence_number))
                shard.arrivals_ms.append(record.arrival_ms)
                shard.rendered.append(_render(record))
        self._streams[stream] = copy

    def __enter__(self) -> ReplayKinesis:
        self._thread.start()
        return self

    def __exit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
        with self._lock:
            for connection in self._connections:
                connection.close()

    # the operations it answers itself ------------------------------------------------------------

    def answer(self, operation: str, request: dict[str, Any]) -> tuple[int, bytes] | None:
        """The reply to a call on a held stream, or None: forward it."""
        if operation == "GetShardIterator":
            shard = self._streams.get(request.get("StreamName", ""), {}).get(request.get("ShardId", ""))
            if shard is None:
                return None
            index = self._start(shard, request)
            iterator = self._iterator(request["StreamName"], request["ShardId"], index)
            self._count("GetShardIterator", 0)
            return 200, json.dumps({"ShardIterator": iterator}).encode()
        if operation == "GetRecords":
            found = self._parse_iterator(request.get("ShardIterator", ""))
            if found is None:
                return None
            stream, shard_id, index = found
            shard = self._streams[stream][shard_id]
            end = min(len(shard.rendered), index + int(request.get("Limit") or 10_000))
            iterator = self._iterator(stream, shard_id, end)
            self._count("GetRecords", end - index)
            return 200, b"".join(
                (
                    b'{"Records":[',
                    b",".join(shard.rendered[index:end]),
                    b'],"NextShardIterator":"',
                    iterator.encode(),
                    b'","MillisBehindLatest":0}',
                )
            )
        return None

    @staticmethod
    def _start(shard: _Shard, request: dict[str, Any]) -> int:
        kind = request["ShardIteratorType"]
        if kind == "TRIM_HORIZON":
            return 0
        if kind == "LATEST":
            return len(shard.rendered)
        if kind == "AT_SEQUENCE_NUMBER":
            return bisect.bisect_left(shard.sequence_numbers, int(request["StartingSequenceNumber"]))
        if kind == "AFTER_SEQUENCE_NUMBER":
            return bisect.bisect_right(shard.sequence_numbers, int(request["StartingSequenceNumber"]))
        if kind == "AT_TIMESTAMP":
            return bisect.bisect_left(shard.arrivals_ms, round(float(request["Timestamp"]) * 1000))
        raise ValueError(f"unknown ShardIteratorType {kind!r}")

    @staticmethod
    def _iterator(stream: str, shard_id: str, index: int) -> str:
        return "replay:" + base64.b64encode(f"{stream}\0{shard_id}\0{index}".encode()).decode()

    def _parse_iterator(self, iterator: str) -> tuple[str, str, int] | None:
        if not iterator.startswith("replay:"):
            return None
        stream, shard_id, index = base64.b64decode(iterator[7:]).decode().split("\0")
        return stream, shard_id, int(index)

    def _count(self, operation: str, records: int) -> None:
        with self._lock:
            self.served[operation] += 1
            self.served["records"] += records

    # everything else --------------------------------------------------------------------------------

    def forward(self, headers: Mapping[str, str], body: bytes) -> tuple[int, Mapping[str, str], bytes]:
        """Send the request to the upstream on this thread's connection; its status, headers and body."""
        with self._lock:
            self.served["forwarded"] += 1
        for attempt in (1, 2):  # a kept-alive connection the upstream closed meanwhile: once more
            connection = getattr(self._local, "connection", None)
            if connection is None:
                connection = self._local.connection = http.client.HTTPConnection(*self._upstream, timeout=60)
                with self._lock:
                    self._connections.append(connection)
            try:
                connection.request("POST", "/", body, dict(headers))
                reply = connection.getresponse()
                data = reply.read()
            except (ConnectionError, http.client.HTTPException):
                connection.close()
                self._local.connection = None
                if attempt == 2:
                    raise
                continue
            return reply.status, dict(reply.getheaders()), data
        raise AssertionError("unreachable")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    replay: ReplayKinesis

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        target = self.headers.get("X-Amz-Target", "")
        answered = None
        if target.startswith(_PREFIX):
            answered = self.replay.answer(target[len(_PREFIX) :], json.loads(body or b"{}"))
        if answered is not None:
            status, reply = answered
            headers: Mapping[str, str] = {"Content-Type": "application/x-amz-json-1.1"}
        else:
            skip = {"host", "content-length", "connection"}
            sent = {k: v for k, v in self.headers.items() if k.lower() not in skip}
            status, received, reply = self.replay.forward(sent, body)
            headers = {
                k: v for k, v in received.items() if k.lower() not in {"content-length", "connection", "date"}
            }
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the benchmarks print their own figures."""
