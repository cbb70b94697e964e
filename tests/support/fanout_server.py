"""A SubscribeToShard test server: enhanced fan-out in front of kinesalite, which has none.

No emulator implements SubscribeToShard (kinesalite answers UnknownOperationException, moto HTTP 500;
see clients-and-emulators.md), so the fan-out tests run against this. It listens on 127.0.0.1 and:

* answers ``SubscribeToShard`` with a real AWS event stream (``application/vnd.amazon.eventstream``,
  binary messages with prelude and message CRC32s, ``:message-type``/``:event-type``/``:content-type``
  headers), sent with chunked transfer encoding: first an ``initial-response`` event, then one
  ``SubscribeToShardEvent`` per non-empty GetRecords page read from kinesalite from the requested
  ``StartingPosition`` (``Records``, ``ContinuationSequenceNumber``, ``MillisBehindLatest``). A closed
  shard read to its end gets a last event without a continuation sequence number and with
  ``ChildShards`` (from ListShards). A subscription ends after ``subscription_s`` (Kinesis: 5 minutes);
  ``fail_every_events`` ends subscriptions with an ``InternalFailure`` exception event instead;
  ``behind_on_full_pages``: an event from a full page says ``MillisBehindLatest`` 1 (more records wait),
  as the service does, where kinesalite answers 0 for every page of an open shard; ``tip_event_s``: at
  the tip, an event without records at ``MillisBehindLatest`` 0 every that many seconds (the service
  keeps sending events while a shard is idle);
* keeps stream consumers in memory (``RegisterStreamConsumer``, ``DescribeStreamConsumer``,
  ``DeregisterStreamConsumer``, ``ListStreamConsumers``);
* forwards every other Kinesis request to kinesalite unchanged.

Writes block when the client stops reading (a slow child): back-pressure reaches the server as on AWS.
``subscriptions`` and ``events_sent`` count what happened, per shard.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3  # noqa: TID251 - the server reads kinesalite with its own client
from botocore.config import Config  # noqa: TID251

TARGET_PREFIX = "Kinesis_20131202."


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return bytes([len(raw_name)]) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value


def event_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude (total length, headers length, CRC32), headers, payload, CRC32."""
    encoded = b"".join(_header(name, value) for name, value in headers.items())
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    message = prelude + struct.pack(">I", binascii.crc32(prelude)) + encoded + payload
    return message + struct.pack(">I", binascii.crc32(message))


def json_event(event_type: str, body: dict[str, Any]) -> bytes:
    headers = {":message-type": "event", ":event-type": event_type, ":content-type": "application/json"}
    return event_message(headers, json.dumps(body).encode())


def exception_event(code: str, message: str) -> bytes:
    headers = {":message-type": "exception", ":exception-type": code, ":content-type": "application/json"}
    return event_message(headers, json.dumps({"message": message}).encode())


@dataclass
class FanoutServer:
    kinesalite: str
    subscription_s: float = 300.0
    fail_every_events: int = 0  # 0: never
    behind_on_full_pages: bool = False
    tip_event_s: float = 0.0  # 0: no events while the shard is idle
    poll_s: float = 0.2
    page_limit: int = 1000
    consumers: dict[str, dict[str, Any]] = field(default_factory=dict)  # ARN -> description
    subscriptions: Counter[str] = field(default_factory=Counter)
    registrations: int = 0  # RegisterStreamConsumer calls that created a consumer
    events_sent: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.kinesis = boto3.session.Session(region_name="us-east-1").client(
            "kinesis", endpoint_url=self.kinesalite, config=Config(retries={"total_max_attempts": 1})
        )
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._http.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._http.server_address[1]}"
        self._thread = threading.Thread(target=self._http.serve_forever, name="fanout-server", daemon=True)

    def __enter__(self) -> FanoutServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()

    # -- consumers -------------------------------------------------------------------------------

    def _consumer_action(self, action: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            if action == "RegisterStreamConsumer":
                name, stream_arn = body["ConsumerName"], body["StreamARN"]
                if any(
                    c["ConsumerName"] == name and c["StreamARN"] == stream_arn
                    for c in self.consumers.values()
                ):
                    return 400, {"__type": "ResourceInUseException", "message": f"consumer {name} exists"}
                arn = f"{stream_arn}/consumer/{name}:{int(time.time())}"
                consumer = {
                    "ConsumerName": name,
                    "ConsumerARN": arn,
                    "ConsumerStatus": "ACTIVE",
                    "ConsumerCreationTimestamp": time.time(),
                    "StreamARN": stream_arn,
                }
                self.consumers[arn] = consumer
                self.registrations += 1
                return 200, {"Consumer": {k: v for k, v in consumer.items() if k != "StreamARN"}}
            found = self._find(body)
            if action == "ListStreamConsumers":
                listed = [c for c in self.consumers.values() if c["StreamARN"] == body["StreamARN"]]
                return 200, {"Consumers": [{k: v for k, v in c.items() if k != "StreamARN"} for c in listed]}
            if found is None:
                return 400, {"__type": "ResourceNotFoundException", "message": "no such consumer"}
            if action == "DescribeStreamConsumer":
                return 200, {"ConsumerDescription": found}
            del self.consumers[found["ConsumerARN"]]  # DeregisterStreamConsumer
            return 200, {}

    def _find(self, body: dict[str, Any]) -> dict[str, Any] | None:
        if body.get("ConsumerARN"):
            return self.consumers.get(body["ConsumerARN"])
        for consumer in self.consumers.values():
            if consumer["ConsumerName"] == body.get("ConsumerName") and consumer["StreamARN"] == body.get(
                "StreamARN"
            ):
                return consumer
        return None

    # -- SubscribeToShard --------------------------------------------------------------------------

    def _iterator(self, stream: str, shard_id: str, position: dict[str, Any]) -> str:
        request: dict[str, Any] = {
            "StreamName": stream,
            "ShardId": shard_id,
            "ShardIteratorType": position["Type"],
        }
        if "SequenceNumber" in position:
            request["StartingSequenceNumber"] = position["SequenceNumber"]
        if "Timestamp" in position:
            request["Timestamp"] = position["Timestamp"]
        return str(self.kinesis.get_shard_iterator(**request)["ShardIterator"])

    def _children(self, stream: str, shard_id: str) -> list[dict[str, Any]]:
        shards = self.kinesis.list_shards(StreamName=stream)["Shards"]
        return [
            {
                "ShardId": s["ShardId"],
                "ParentShards": [p for p in (s.get("ParentShardId"), s.get("AdjacentParentShardId")) if p],
                "HashKeyRange": s["HashKeyRange"],
            }
            for s in shards
            if shard_id in (s.get("ParentShardId"), s.get("AdjacentParentShardId"))
        ]

    def subscribe(self, body: dict[str, Any], send: Any) -> None:
        """Stream events to ``send`` (a callable taking bytes) until the subscription ends."""
        consumer = self.consumers.get(body["ConsumerARN"])
        if consumer is None:
            raise LookupError("ResourceNotFoundException")
        stream = consumer["StreamARN"].rsplit("/", 1)[1]
        shard_id = body["ShardId"]
        iterator = self._iterator(stream, shard_id, body["StartingPosition"])
        with self.lock:
            self.subscriptions[shard_id] += 1
        send(json_event("initial-response", {}))
        opened = time.monotonic()
        last_event = 0.0
        sent = 0
        continuation: str | None = None
        while time.monotonic() - opened < self.subscription_s:
            page = self.kinesis.get_records(ShardIterator=iterator, Limit=self.page_limit)
            records = [
                {
                    "SequenceNumber": r["SequenceNumber"],
                    "ApproximateArrivalTimestamp": r["ApproximateArrivalTimestamp"].timestamp(),
                    "Data": base64.b64encode(r["Data"]).decode(),
                    "PartitionKey": r["PartitionKey"],
                }
                for r in page["Records"]
            ]
            if records:
                continuation = records[-1]["SequenceNumber"]
            next_iterator = page.get("NextShardIterator")
            if next_iterator is None:  # closed and read to its end
                event = {
                    "Records": records,
                    "MillisBehindLatest": 0,
                    "ChildShards": self._children(stream, shard_id),
                }
                send(json_event("SubscribeToShardEvent", event))
                self._count(shard_id)
                return
            iterator = next_iterator
            if records:
                behind = int(page.get("MillisBehindLatest", 0))
                if self.behind_on_full_pages and len(records) >= self.page_limit:
                    behind = max(behind, 1)
                event = {
                    "Records": records,
                    "ContinuationSequenceNumber": continuation,
                    "MillisBehindLatest": behind,
                }
                send(json_event("SubscribeToShardEvent", event))
                self._count(shard_id)
                last_event = time.monotonic()
                sent += 1
                if self.fail_every_events and sent % self.fail_every_events == 0:
                    send(exception_event("InternalFailureException", "injected by the test server"))
                    return
            else:
                if self.tip_event_s and time.monotonic() - last_event >= self.tip_event_s:
                    event = {
                        "Records": [],
                        "ContinuationSequenceNumber": continuation or self._starting(stream, shard_id),
                        "MillisBehindLatest": 0,
                    }
                    send(json_event("SubscribeToShardEvent", event))
                    self._count(shard_id)
                    last_event = time.monotonic()
                time.sleep(self.poll_s)

    def _starting(self, stream: str, shard_id: str) -> str:
        shards = self.kinesis.list_shards(StreamName=stream)["Shards"]
        return next(
            str(s["SequenceNumberRange"]["StartingSequenceNumber"])
            for s in shards
            if s["ShardId"] == shard_id
        )

    def _count(self, shard_id: str) -> None:
        with self.lock:
            self.events_sent[shard_id] += 1

    # -- HTTP --------------------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _reply(
                self, status: int, body: bytes, content_type: str = "application/x-amz-json-1.1"
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                action = self.headers.get("X-Amz-Target", "").removeprefix(TARGET_PREFIX)
                if action in (
                    "RegisterStreamConsumer",
                    "DescribeStreamConsumer",
                    "DeregisterStreamConsumer",
                    "ListStreamConsumers",
                ):
                    status, reply = server._consumer_action(action, json.loads(raw))
                    self._reply(status, json.dumps(reply).encode())
                elif action == "SubscribeToShard":
                    self._subscribe(json.loads(raw))
                else:
                    self._forward(raw)

            def _subscribe(self, body: dict[str, Any]) -> None:
                if body.get("ConsumerARN") not in server.consumers:
                    error = {"__type": "ResourceNotFoundException", "message": "no such consumer"}
                    self._reply(400, json.dumps(error).encode())
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.amazon.eventstream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

                def send(chunk: bytes) -> None:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()

                try:
                    server.subscribe(body, send)
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client closed the subscription
                except Exception as exc:  # noqa: BLE001 - reported to the client as an exception event
                    try:
                        send(exception_event("InternalFailureException", repr(exc)))
                        self.wfile.write(b"0\r\n\r\n")
                    except OSError:
                        pass
                self.close_connection = True

            def _forward(self, raw: bytes) -> None:
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")
                }
                request = urllib.request.Request(  # noqa: S310 - the emulator on loopback
                    server.kinesalite, data=raw, headers=headers, method="POST"
                )
                try:
                    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - loopback
                        status, body, kind = (
                            response.status,
                            response.read(),
                            response.headers.get_content_type(),
                        )
                except urllib.error.HTTPError as exc:
                    status, body, kind = exc.code, exc.read(), exc.headers.get_content_type()
                self._reply(status, body, kind)

        return Handler
