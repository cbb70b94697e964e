"""Every AWS call path the daemon has, against every way a transport can fail (issue 17, point 3).

Each call goes through the project's own adapter (``kcl_daemon.aws``) on clients built as the daemon
builds them, to an endpoint that refuses, resets, never answers, never accepts, cuts its reply short,
answers with garbage, closes a TLS handshake, or (event streams) sends a corrupt or truncated frame.
Whatever happens, the caller gets a :class:`~kcl_daemon.errors.KclError` that says it is retriable,
never a botocore, urllib3 or socket exception, never an empty "success" made of a cut reply, and nothing
is logged with a traceback.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest

from kcl_daemon.aws import coordinator_state, worker_metrics_table
from kcl_daemon.aws.clients import AwsClients, ClientSettings, build_clients, make_client
from kcl_daemon.aws.cloudwatch import CloudWatchPublisher, Datum
from kcl_daemon.aws.coordinator_state import CoordinatorStore
from kcl_daemon.aws.credentials import session_for
from kcl_daemon.aws.fanout import Fanout
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.lease_table_3x import LeaseTable3x
from kcl_daemon.aws.worker_metrics_table import WorkerMetricsTable
from kcl_daemon.core.leader.worker_metrics import WorkerMetricStats
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import TRIM_HORIZON
from kcl_daemon.core.shards.iterator import IteratorPosition, IteratorType
from kcl_daemon.errors import KclError
from kcl_daemon.retry import RetryPolicy
from tests.support.transport_faults import (
    HTTP_FAULTS,
    STREAM_FAULTS,
    TransportFault,
    TransportFaultServer,
)

ONCE = RetryPolicy("once", max_attempts=1, deadline_s=5.0, initial_backoff_s=0.01, max_backoff_s=0.01)
LEASE = Lease("shardId-000000000000", TRIM_HORIZON, lease_owner="w-1", lease_counter=3)

Call = Callable[[str], object]


def _settings(endpoint: str) -> ClientSettings:
    return ClientSettings(
        region="us-east-1",
        kinesis_endpoint=endpoint,
        dynamodb_endpoint=endpoint,
        connect_timeout_s=0.1,
        read_timeout_s=0.1,
    )


#: One boto3 session for every client of the module, as the daemon shares one per credential chain:
#: botocore then reads its service models and endpoint tables once, not once per fault's endpoint.
SESSION = session_for(None, "us-east-1")


@functools.cache
def _clients(endpoint: str) -> AwsClients:
    return build_clients(_settings(endpoint), session=SESSION)


def _table(endpoint: str) -> LeaseTable3x:
    return LeaseTable3x(_clients(endpoint).dynamodb, "app", item_retry=ONCE)


def _store(endpoint: str) -> CoordinatorStore:
    return CoordinatorStore(_clients(endpoint).dynamodb, "app-CoordinatorState")


def _metrics(endpoint: str) -> WorkerMetricsTable:
    return WorkerMetricsTable(_clients(endpoint).dynamodb, "app-WorkerMetricStats")


def _kinesis(endpoint: str, *, lean: bool = True) -> Kinesis:
    kinesis = Kinesis(_clients(endpoint).kinesis, lean=lean)
    assert kinesis.lean is lean  # GetRecords and GetShardIterator: the lean path, or botocore
    return kinesis


def _subscribe(endpoint: str) -> object:
    fanout = Fanout(_clients(endpoint).kinesis)
    position = IteratorPosition(IteratorType.TRIM_HORIZON)
    arn = "arn:aws:kinesis:us-east-1:123456789012:stream/s/consumer/c:1"
    return list(fanout.subscribe(arn, "shardId-000000000000", position))


@functools.cache
def _cloudwatch_publisher(endpoint: str) -> CloudWatchPublisher:
    return CloudWatchPublisher(
        make_client(_settings(endpoint), "cloudwatch", endpoint=endpoint, session=SESSION)
    )


def _cloudwatch(endpoint: str) -> object:
    publisher = _cloudwatch_publisher(endpoint)
    datum = Datum("RecordsProcessed", "Count", 1.0, (("Operation", "x"),), datetime.now(UTC))
    return publisher.put("ns", [datum])


PATHS: dict[str, Call] = {
    "renew": lambda e: _table(e).renew(LEASE),
    "take": lambda e: _table(e).take(LEASE, "w-2"),
    "checkpoint": lambda e: _table(e).checkpoint(LEASE, TRIM_HORIZON),
    "release": lambda e: _table(e).release(LEASE),
    "assign": lambda e: _table(e).assign(LEASE, "w-2"),
    "scan": lambda e: _table(e).list_leases(),
    "lease read": lambda e: _table(e).get_lease(LEASE.lease_key, consistent=True),
    "GSI query": lambda e: _table(e).lease_keys_owned_by("w-1"),
    "leader lock read": lambda e: _store(e).get("Leader"),
    "leader lock take": lambda e: _store(e).put("Leader", {"ownerName": "w-1"}, require_absent=True),
    "leader lock heartbeat": lambda e: _store(e).update(
        "Leader", {"leaseDuration": "10000"}, require_equal={"ownerName": "w-1"}
    ),
    "worker metrics publish": lambda e: _metrics(e).publish(WorkerMetricStats("w-1", 1.0)),
    "worker metrics scan": lambda e: _metrics(e).scan(),
    "coordinator state read": lambda e: _store(e).get("Migration3.0"),
    "coordinator state write": lambda e: _store(e).put("Migration3.0", {"cv": "x"}, require_absent=True),
    "GetRecords": lambda e: _kinesis(e).get_records("iterator", 100),
    "GetRecords (botocore)": lambda e: _kinesis(e, lean=False).get_records("iterator", 100),
    "GetRecords (event loop)": lambda e: asyncio.run(_kinesis(e).get_records_async("iterator", 100)),
    "ListShards": lambda e: _kinesis(e).list_shards("s"),
    "GetShardIterator": lambda e: _kinesis(e).get_shard_iterator(
        "s", "shardId-000000000000", IteratorPosition(IteratorType.TRIM_HORIZON)
    ),
    "GetShardIterator (botocore)": lambda e: _kinesis(e, lean=False).get_shard_iterator(
        "s", "shardId-000000000000", IteratorPosition(IteratorType.TRIM_HORIZON)
    ),
    "GetShardIterator (event loop)": lambda e: asyncio.run(
        _kinesis(e).get_shard_iterator_async(
            "s", "shardId-000000000000", IteratorPosition(IteratorType.TRIM_HORIZON)
        )
    ),
    "CloudWatch": _cloudwatch,
}


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[TransportFault, TransportFaultServer]]:
    """One misbehaving endpoint per fault, for the whole module (clients are cached per endpoint)."""
    running = {fault: TransportFaultServer(fault).__enter__() for fault in TransportFault}
    try:
        yield running
    finally:
        for server in running.values():
            server.__exit__(None, None, None)


@pytest.fixture(autouse=True)
def _single_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    """One attempt per call: the retry policies are not what is tested here, the mapping is. Dummy
    credentials: the calls must get as far as the network."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setattr(coordinator_state, "LEASE_IO", ONCE)
    monkeypatch.setattr(worker_metrics_table, "LEASE_IO", ONCE)


def _assert_mapped(call: Call, server: TransportFaultServer, caplog: pytest.LogCaptureFixture) -> None:
    # as the daemon logs: botocore at WARNING (kcl_daemon.log_setup), ours at DEBUG
    caplog.set_level(logging.DEBUG, logger="kcl_daemon")
    caplog.set_level(logging.WARNING, logger="botocore")
    fault = server.fault
    raised: KclError | None = None
    try:
        result = call(server.endpoint)
    except KclError as exc:
        raised = exc
    except BaseException as exc:  # noqa: BLE001 - the point: nothing else may come out
        pytest.fail(f"{fault}: unmapped {type(exc).__module__}.{type(exc).__name__}: {exc}")
    else:
        pytest.fail(f"{fault}: no error at all, the call returned {result!r}")
    assert raised.retriable, f"{fault}: {raised!r} is not retriable"
    for record in caplog.records:
        assert record.exc_info is None, f"logged with a traceback: {record.getMessage()}"
    assert "Traceback" not in caplog.text


@pytest.mark.parametrize("fault", HTTP_FAULTS, ids=[f.name.lower() for f in HTTP_FAULTS])
@pytest.mark.parametrize("path", list(PATHS))
def test_every_call_path_maps_every_transport_fault_to_a_retriable_error(
    path: str,
    fault: TransportFault,
    servers: dict[TransportFault, TransportFaultServer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _assert_mapped(PATHS[path], servers[fault], caplog)


@pytest.mark.parametrize("fault", [*HTTP_FAULTS, *STREAM_FAULTS], ids=lambda f: f.name.lower())
def test_subscribe_to_shard_maps_every_transport_fault_to_a_retriable_error(
    fault: TransportFault,
    servers: dict[TransportFault, TransportFaultServer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _assert_mapped(_subscribe, servers[fault], caplog)


def test_a_subscribe_reply_botocore_cannot_parse_has_its_connection_closed_before_the_error(
    servers: dict[TransportFault, TransportFaultServer],
) -> None:
    """A 200 whose body is cut short fails inside botocore's parse of the initial response, which leaves
    the connection open (the exception's frames hold it); the error must not come out before it is
    closed, or the garbage collector later finalises the socket unclosed, in whatever test runs then."""
    endpoint = servers[TransportFault.TRUNCATED].endpoint
    kinesis = _clients(endpoint).kinesis
    replies: list[tuple[object, object]] = []

    def note(*, response_dict: dict[str, object], **_: object) -> None:
        body = response_dict["body"]
        replies.append((body, getattr(body, "connection", None)))

    kinesis.meta.events.register("before-parse.kinesis.SubscribeToShard", note)
    try:
        with pytest.raises(KclError) as raised:
            _subscribe(endpoint)
    finally:
        kinesis.meta.events.unregister("before-parse.kinesis.SubscribeToShard", note)
    assert raised.value.retriable
    [(body, connection)] = replies
    assert connection is not None, "the reply was not streamed: nothing tested"
    assert getattr(connection, "sock", None) is None, "the connection was left open"
    assert getattr(body, "closed", False)


def test_the_paths_cover_every_kind_the_issue_names() -> None:
    named = {"renew", "take", "scan", "GSI query", "GetRecords", "ListShards", "CloudWatch"}
    assert named <= set(PATHS)
    assert any("leader lock" in p for p in PATHS) and any("worker metrics" in p for p in PATHS)
    assert any("coordinator state" in p for p in PATHS)
