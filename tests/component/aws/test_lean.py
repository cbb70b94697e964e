"""The lean request path (``kcl_daemon.aws.lean``) against a local endpoint that answers what each test
tells it to: every error reply maps to the error botocore's path maps it to (class, message and
``retriable``); refreshing credentials are frozen per call and keep working; the call counters see the
lean calls; settings the lean path cannot serve keep botocore, with the reason logged once.
(Transport faults: ``test_transport_faults.py``; the signer: ``tests/unit/aws/test_lean_sigv4.py``.)"""

from __future__ import annotations

import asyncio
import functools
import http.client
import itertools
import json
import logging
import os
import resource
import socket
import threading
import zlib
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Executor
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import boto3  # noqa: TID251 - clients built by hand: a refreshing provider, a proxy setting
import botocore.session  # noqa: TID251
import pytest
from botocore import UNSIGNED  # noqa: TID251
from botocore.config import Config  # noqa: TID251
from botocore.credentials import (  # noqa: TID251
    CredentialProvider,
    CredentialResolver,
    DeferredRefreshableCredentials,
)

from kcl_daemon.aws.clients import ClientSettings, build_clients
from kcl_daemon.aws.instrument import TableContact, instrument, watch_table
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.lean import client as lean_client
from kcl_daemon.aws.lean import connections
from kcl_daemon.aws.lease_table_3x import LeaseTable3x
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import TRIM_HORIZON
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.shards.iterator import IteratorPosition, IteratorType
from kcl_daemon.errors import AwsError, Throttled
from kcl_daemon.metrics.registry import DaemonMetrics
from kcl_daemon.retrieval.polling import PollingRecordSource
from kcl_daemon.retrieval.settings import RetrievalSettings
from kcl_daemon.retry import RetryPolicy
from tests.support.clocks import FakeClock

ONCE = RetryPolicy("once", max_attempts=1, deadline_s=5.0, initial_backoff_s=0.01, max_backoff_s=0.01)
PAGE = {"Records": [], "NextShardIterator": "it-2", "MillisBehindLatest": 0}
LATEST = IteratorPosition(IteratorType.LATEST)


class _Endpoint(BaseHTTPRequestHandler):
    """Answers every POST with the server's current reply; notes each request's headers."""

    protocol_version = "HTTP/1.1"
    reply: ClassVar[tuple[int, dict[str, str], bytes]] = (200, {}, b"{}")
    seen: ClassVar[list[dict[str, str]]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        type(self).seen.append(dict(self.headers.items()))
        status, headers, body = type(self).reply
        self.send_response(status)
        for name, value in {"Content-Type": "application/x-amz-json-1.1", **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _answer(status: int, body: object, headers: dict[str, str] | None = None) -> None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    _Endpoint.reply = (status, headers or {}, raw)
    _Endpoint.seen.clear()


@pytest.fixture(autouse=True)
def _dummy_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


@functools.cache
def _kinesis(endpoint: str, *, lean: bool) -> Kinesis:
    """The daemon's Kinesis adapter on either path (one client each per module: building one is slow)."""
    clients = build_clients(
        ClientSettings(region="us-east-1", kinesis_endpoint=endpoint, dynamodb_endpoint=endpoint)
    )
    kinesis = Kinesis(clients.kinesis, lean=lean)
    assert kinesis.lean is lean
    return kinesis


def _records_async(kinesis: Kinesis, iterator: str = "it-1", limit: int = 100) -> Any:
    """GetRecords on the event loop (the asynchronous lean path the polling readers await)."""
    assert kinesis.reads_async()
    return asyncio.run(kinesis.get_records_async(iterator, limit))


def _iterator_async(kinesis: Kinesis, position: IteratorPosition = LATEST) -> str:
    assert kinesis.reads_async(position)
    return asyncio.run(kinesis.get_shard_iterator_async("s", "shardId-000000000000", position))


ERROR_REPLIES = [
    (400, {"__type": "ExpiredIteratorException", "message": "Iterator expired"}, {}),
    (400, {"__type": "InvalidArgumentException", "message": "bad iterator"}, {}),
    (400, {"__type": "ResourceNotFoundException", "message": "Shard not found"}, {}),
    (400, {"__type": "ProvisionedThroughputExceededException", "message": "Rate exceeded"}, {}),
    (400, {"__type": "com.amazonaws.kinesis#KMSThrottlingException", "message": "KMS"}, {}),
    (400, {"__type": "AccessDeniedException", "Message": "no"}, {}),
    (400, {}, {"x-amzn-ErrorType": "LimitExceededException:http://internal"}),
    (500, {"__type": "InternalFailure"}, {}),
    (503, b"<html>Service Unavailable</html>", {"Content-Type": "text/html"}),
    (403, b"Forbidden", {"Content-Type": "text/plain"}),
    (404, b"", {}),
]


def _outcome(call: Any) -> tuple[type[BaseException], str, bool]:
    with pytest.raises(AwsError) as raised:
        call()
    return type(raised.value), str(raised.value), raised.value.retriable


@pytest.mark.parametrize(("status", "body", "headers"), ERROR_REPLIES)
def test_every_error_reply_maps_as_on_botocore(
    endpoint: str, status: int, body: object, headers: dict[str, str]
) -> None:
    lean, botocore_path = _kinesis(endpoint, lean=True), _kinesis(endpoint, lean=False)
    _answer(status, body, headers)
    for name, call, on_loop in [
        ("GetRecords", lambda k: k.get_records("it-1", 100), _records_async),
        (
            "GetShardIterator",
            lambda k: k.get_shard_iterator("s", "shardId-000000000000", LATEST),
            _iterator_async,
        ),
    ]:
        expected = _outcome(functools.partial(call, botocore_path))
        assert _outcome(functools.partial(call, lean)) == expected, name
        assert _outcome(functools.partial(on_loop, lean)) == expected, f"{name} on the event loop"
    assert all("Kinesis_20131202." in h["X-Amz-Target"] for h in _Endpoint.seen)
    assert sum(h["User-Agent"].startswith("kcl-daemon-lean") for h in _Endpoint.seen) == 4


def test_a_page_reads_as_on_botocore(endpoint: str) -> None:
    page = {
        "Records": [
            {
                "SequenceNumber": "49590338271490256608559692538361571095921575989136588898",
                "Data": "aGVsbG8=",
                "PartitionKey": "pk",
                "ApproximateArrivalTimestamp": 1.714564800123e9,
            }
        ],
        "NextShardIterator": "it-2",
        "MillisBehindLatest": 7,
    }
    _answer(200, page)
    lean = _kinesis(endpoint, lean=True)
    on_botocore = _kinesis(endpoint, lean=False).get_records("it-1", 10)
    assert lean.get_records("it-1", 10) == on_botocore
    assert _records_async(lean, "it-1", 10) == on_botocore
    _answer(200, {"ShardIterator": "it-9"})
    position = IteratorPosition(IteratorType.AFTER_SEQUENCE_NUMBER, "5")
    assert lean.get_shard_iterator("s", "shardId-000000000000", position) == "it-9"
    assert _iterator_async(lean, position) == "it-9"
    for sent in _Endpoint.seen:
        assert sent["X-Amz-Target"] == "Kinesis_20131202.GetShardIterator"
    assert not lean.reads_async(IteratorPosition(IteratorType.AT_TIMESTAMP, timestamp=datetime.now(UTC)))


class _Rotating(CredentialProvider):
    """Credentials that expire within botocore's advisory refresh window: every use refreshes them."""

    METHOD = "test-rotating"

    def __init__(self) -> None:
        super().__init__()
        self.issued = itertools.count(1)

    def load(self) -> DeferredRefreshableCredentials:
        return DeferredRefreshableCredentials(refresh_using=self.fetch, method=self.METHOD)

    def fetch(self) -> dict[str, str]:
        n = next(self.issued)
        expiry = datetime.now(UTC) + timedelta(minutes=12)
        return {
            "access_key": f"AKID{n}",
            "secret_key": f"secret-{n}",
            "token": f"token-{n}",
            "expiry_time": expiry.isoformat(),
        }


@pytest.mark.parametrize("on_loop", [False, True], ids=["threads", "event loop"])
def test_refreshing_credentials_are_frozen_per_call_and_keep_working(endpoint: str, on_loop: bool) -> None:
    core = botocore.session.Session()
    core.register_component("credential_provider", CredentialResolver([_Rotating()]))
    client = boto3.session.Session(botocore_session=core, region_name="us-east-1").client(
        "kinesis", endpoint_url=endpoint
    )
    kinesis = Kinesis(client)
    assert kinesis.lean
    _answer(200, PAGE)
    for _ in range(3):
        page = _records_async(kinesis, "it-1", 10) if on_loop else kinesis.get_records("it-1", 10)
        assert page.next_iterator == "it-2"
    keys = [h["Authorization"].split("Credential=")[1].split("/")[0] for h in _Endpoint.seen]
    tokens = [h["X-Amz-Security-Token"] for h in _Endpoint.seen]
    assert len(set(keys)) == 3, keys  # a fresh credential set for each call
    assert [k.removeprefix("AKID") for k in keys] == [t.removeprefix("token-") for t in tokens]


def test_the_call_counters_see_lean_calls_errors_and_throttles(endpoint: str) -> None:
    clients = build_clients(
        ClientSettings(region="us-east-1", kinesis_endpoint=endpoint, dynamodb_endpoint=endpoint)
    )
    metrics = DaemonMetrics(process_metrics=False)
    instrument(clients.kinesis, "kinesis", metrics)
    kinesis = Kinesis(clients.kinesis)
    assert kinesis.lean
    _answer(200, PAGE)
    kinesis.get_records("it-1", 10)
    _records_async(kinesis)
    _answer(400, {"__type": "ProvisionedThroughputExceededException"})
    with pytest.raises(AwsError):
        kinesis.get_records("it-1", 10)
    with pytest.raises(AwsError):
        _records_async(kinesis)
    _answer(500, {"__type": "InternalFailure"})
    with pytest.raises(AwsError):
        kinesis.get_shard_iterator("s", "shardId-000000000000", LATEST)
    with pytest.raises(AwsError):
        _iterator_async(kinesis)
    counted: Counter[str] = Counter()
    for sample in metrics.snapshot():
        if sample.family.startswith("kcl_aws"):
            counted[sample.family] += int(sample.value)
    assert counted == {"kcl_aws_calls": 6, "kcl_aws_errors": 4, "kcl_aws_throttles": 2}


@pytest.mark.parametrize(
    ("config", "environ", "reason"),
    [
        (Config(proxies={"http": "http://127.0.0.1:9"}), {}, "a proxy is configured"),
        (Config(), {"HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""}, "a proxy is configured"),
        (Config(signature_version=UNSIGNED), {}, "unsigned or not SigV4"),
    ],
    ids=["configured proxy", "proxy from the environment", "unsigned"],
)
def test_settings_beyond_the_lean_path_keep_botocore_and_say_why_once(
    endpoint: str,
    config: Config,
    environ: dict[str, str],
    reason: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(lean_client, "_LOGGED", set())
    caplog.set_level(logging.INFO, logger="kcl_daemon.aws.lean")
    session = boto3.session.Session(region_name="us-east-1")
    kinesis = [Kinesis(session.client("kinesis", endpoint_url=endpoint, config=config)) for _ in range(2)]
    assert not any(k.lean for k in kinesis)
    said = [r.getMessage() for r in caplog.records if reason in r.getMessage()]
    assert len(said) == 1, said


# -- lease writes (DynamoDB UpdateItem) -------------------------------------------------------------------

LEASE_ITEM = {
    "leaseKey": {"S": "shardId-000000000000"},
    "leaseOwner": {"S": "w-1"},
    "leaseCounter": {"N": "4"},
    "checkpoint": {"S": "TRIM_HORIZON"},
    "checkpointSubSequenceNumber": {"N": "0"},
    "ownerSwitchesSinceCheckpoint": {"N": "0"},
    "pendingCheckpointState": {"B": "AAEC"},
    "javaExtra": {"M": {"b": {"B": "AAEC"}}},
}


@functools.cache
def _tables(endpoint: str) -> tuple[LeaseTable3x, LeaseTable3x]:
    """The lease table on the lean path, and on botocore's (the same client, the lean path taken away)."""
    clients = build_clients(
        ClientSettings(region="us-east-1", kinesis_endpoint=endpoint, dynamodb_endpoint=endpoint)
    )
    lean = LeaseTable3x(clients.dynamodb, "leases", item_retry=ONCE, scan_segments=1)
    plain = LeaseTable3x(clients.dynamodb, "leases", item_retry=ONCE, scan_segments=1)
    plain._lean = None
    assert lean._lean is not None
    return lean, plain


@pytest.mark.parametrize("write", ["renew", "checkpoint", "take"])
def test_lease_writes_read_and_fail_as_on_botocore(endpoint: str, write: str) -> None:
    lean, plain = _tables(endpoint)
    held = Lease("shardId-000000000000", TRIM_HORIZON, lease_owner="w-1", lease_counter=3)
    calls = {
        "renew": lambda t: t.renew(held),
        "checkpoint": lambda t: t.checkpoint(held, TRIM_HORIZON),
        "take": lambda t: t.take(held, "w-2"),
    }
    _answer(
        200,
        {"Attributes": LEASE_ITEM},
        {"x-amz-crc32": str(zlib.crc32(json.dumps({"Attributes": LEASE_ITEM}).encode()))},
    )
    assert calls[write](lean) == calls[write](plain)
    assert [h["X-Amz-Target"] for h in _Endpoint.seen] == ["DynamoDB_20120810.UpdateItem"] * 2
    assert _Endpoint.seen[0]["User-Agent"].startswith("kcl-daemon-lean")
    for status, body in [
        (400, {"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException", "message": "x"}),
        (400, {"__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"}),
        (500, {"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError"}),
        (200, {}),  # no item in the reply: the outcome is unknown
    ]:
        _answer(status, body)
        if write == "renew" and status == 400 and "Conditional" in str(body):
            continue  # a renewal's conflict is reconciled by a read: its own test below
        expected = _outcome(functools.partial(calls[write], plain))
        assert _outcome(functools.partial(calls[write], lean)) == expected, (status, body)


def test_lease_table_scans_and_queries_read_and_fail_as_on_botocore(endpoint: str) -> None:
    lean, plain = _tables(endpoint)
    other = {**LEASE_ITEM, "leaseKey": {"S": "shardId-000000000001"}, "leaseCounter": {"N": "9"}}
    page = {"Items": [LEASE_ITEM, other, {"leaseKey": {"S": "x"}, "leaseCounter": {"S": "bad"}}], "Count": 3}
    _answer(200, page)
    scanned = lean.list_leases()
    assert scanned == plain.list_leases()
    assert [lease.lease_counter for lease in scanned.leases] == [4, 9]
    assert len(scanned.skipped) == 1  # the corrupt one
    assert [h["X-Amz-Target"] for h in _Endpoint.seen] == ["DynamoDB_20120810.Scan"] * 2
    assert _Endpoint.seen[0]["User-Agent"].startswith("kcl-daemon-lean")
    for status, body in [
        (400, {"__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"}),
        (400, {"__type": "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException", "message": "x"}),
        (500, {"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError"}),
    ]:
        _answer(status, body)
        assert _outcome(lean.list_leases) == _outcome(plain.list_leases), (status, body)
        assert _outcome(functools.partial(lean.lease_keys_owned_by, "w-1")) == _outcome(
            functools.partial(plain.lease_keys_owned_by, "w-1")
        ), (status, body)
    _answer(200, {"Items": [{"leaseKey": {"S": "a"}}, {"leaseKey": {"S": "b"}}], "Count": 2})
    assert lean.lease_keys_owned_by("w-1") == plain.lease_keys_owned_by("w-1") == ["a", "b"]
    assert _Endpoint.seen[0]["X-Amz-Target"] == "DynamoDB_20120810.Query"
    assert _Endpoint.seen[0]["User-Agent"].startswith("kcl-daemon-lean")


def test_the_table_contact_sees_lean_lease_writes(endpoint: str) -> None:
    clients = build_clients(
        ClientSettings(region="us-east-1", kinesis_endpoint=endpoint, dynamodb_endpoint=endpoint)
    )
    contact = TableContact("leases")
    watch_table(clients.dynamodb, contact)
    table = LeaseTable3x(clients.dynamodb, "leases", item_retry=ONCE)
    held = Lease("shardId-000000000000", TRIM_HORIZON, lease_owner="w-1", lease_counter=3)
    _answer(500, {"__type": "InternalServerError"})
    with pytest.raises(AwsError):
        table.renew(held)
    assert contact.failing_for(contact.monotonic()) is not None
    assert "InternalServerError" in (contact.last_error or "")
    _answer(200, {"Attributes": LEASE_ITEM})
    table.renew(held)
    assert contact.failing_for(0.0) is None  # answered again
    assert contact.calls == 2


def test_a_kept_connection_is_reused_even_when_its_socket_number_is_above_1024(endpoint: str) -> None:
    """At 256 shards the daemon holds more than 1,024 descriptors (its children's pipes): the check that
    an idle connection is still open must work there too, or every call opens a new connection."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if 0 <= hard < 2048:  # RLIM_INFINITY is -1
        pytest.skip(f"the open-file limit ({hard}) does not allow descriptor 1500")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), hard))
    try:
        high = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        high.connect(("127.0.0.1", int(endpoint.rsplit(":", 1)[1])))
        moved = socket.socket(fileno=os.dup2(high.fileno(), 1500))
        high.close()
        connection = http.client.HTTPConnection("127.0.0.1")
        connection.sock = moved
        assert moved.fileno() == 1500
        assert not connections._closed_while_idle(connection)
        moved.shutdown(socket.SHUT_RDWR)
        assert connections._closed_while_idle(connection)
        moved.close()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class _NoThreads(Executor):
    """An executor for readers that must not use one: the reads are awaited on the event loop."""

    def submit(self, *_: Any, **__: Any) -> Any:
        raise AssertionError("a read was handed to a thread")


async def test_a_reader_on_the_event_loop_retries_under_its_named_policy(endpoint: str) -> None:
    """The polling reader awaits the lean path itself and keeps its retry policy: a throttled read is
    tried again (the policy's attempts, backed off), then the policy's error comes out."""
    kinesis = _kinesis(endpoint, lean=True)
    policy = RetryPolicy("reads", max_attempts=3, deadline_s=60.0, initial_backoff_s=0.01, max_backoff_s=0.01)
    clock = FakeClock(1000.0)
    settings = RetrievalSettings(max_records=10, idle_between_reads_s=0.0, retry=policy)
    source = PollingRecordSource(
        kinesis, "s", Shard("shardId-000000000000"), _NoThreads(), settings, clock=clock
    )
    await source.start(TRIM_HORIZON)
    _answer(400, {"__type": "ProvisionedThroughputExceededException", "message": "Rate exceeded"})
    with pytest.raises(Throttled):
        await source.next_batch()
    targets = [h["X-Amz-Target"].split(".")[1] for h in _Endpoint.seen]
    assert targets == ["GetShardIterator"] * 3  # every attempt throttled before it had an iterator
    assert source.stats.shard_iterators == 0
    assert sum(1 for s in clock.sleeps if s <= 0.01) == 2, clock.sleeps  # two backoffs (jittered)


def _one_reply_per_connection(server: socket.socket) -> None:
    """Answers the first request of each connection, then closes it at the next request unanswered
    (a server whose idle timeout raced the client's next request)."""
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            for answer in (True, False):
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                if not answer or not data:
                    break
                length = int(data.split(b"Content-Length: ")[1].split(b"\r\n")[0])
                body = data.partition(b"\r\n\r\n")[2]
                while len(body) < length:
                    body += conn.recv(65536)
                page = json.dumps(PAGE).encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(page), page))


def test_a_kept_connection_closed_before_the_request_is_retried_once_on_a_new_one() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=_one_reply_per_connection, args=(server,), daemon=True).start()
    try:
        kinesis = _kinesis(f"http://127.0.0.1:{server.getsockname()[1]}", lean=True)

        async def twice() -> list[str | None]:
            return [(await kinesis.get_records_async("it-1", 10)).next_iterator for _ in range(2)]

        assert asyncio.run(twice()) == ["it-2", "it-2"]
    finally:
        server.close()
