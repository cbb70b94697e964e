"""The embedded local backend (in-process moto), stream provisioning and the sample producer.

Records are read back with plain boto3 (GetShardIterator/GetRecords), not with the daemon, so these
tests check the local stack on its own.
"""

from __future__ import annotations

import base64
import builtins
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import boto3
import orjson
import pytest
from aws_kinesis_agg.deaggregator import iter_deaggregate_records
from botocore.config import Config

from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.provision import PutEntry, StreamWriter, ensure_stream
from kcl_daemon.errors import DependencyUnavailable, TransientNetwork
from kcl_daemon.local import (
    EmbeddedBackend,
    LocalBackendUnavailable,
    Producer,
    ProducerStats,
    local_stack,
    partition_keys_for,
)
from kcl_daemon.local.producer import open_hash_ranges, partition_key_hash

pytestmark = pytest.mark.integration

MAX_HASH_KEY = 2**128 - 1


def stream_name() -> str:
    return f"local-{uuid.uuid4().hex[:10]}"


def plain_kinesis(backend: EmbeddedBackend) -> Any:
    """A boto3 client built here, not by the backend, with the backend's credentials passed explicitly."""
    session = boto3.session.Session(
        aws_access_key_id=backend.credentials.access_key_id,
        aws_secret_access_key=backend.credentials.secret_access_key,
        region_name=backend.region,
    )
    config = Config(retries={"total_max_attempts": 1}, connect_timeout=2, read_timeout=5)
    return session.client("kinesis", endpoint_url=backend.kinesis_endpoint, config=config)


def read_shard(client: Any, name: str, shard_id: str) -> list[dict[str, Any]]:
    """Every record in the shard from TRIM_HORIZON, until a GetRecords at the tip comes back empty."""
    iterator = client.get_shard_iterator(StreamName=name, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON")[
        "ShardIterator"
    ]
    records: list[dict[str, Any]] = []
    while True:
        response = client.get_records(ShardIterator=iterator, Limit=1000)
        if not response["Records"]:
            return records
        records.extend(response["Records"])
        iterator = response["NextShardIterator"]


def user_payloads(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """De-aggregated payloads. aws_kinesis_agg answers in the Lambda shape (``{"kinesis": {...}}``), with
    base64 ``data`` for sub-records of an aggregate and raw bytes for plain records."""
    payloads = []
    for record in iter_deaggregate_records(records, data_format="Boto3"):
        user_record = record["kinesis"]
        data = user_record["data"]
        if user_record.get("aggregated"):
            data = base64.b64decode(data)
        payloads.append(orjson.loads(data))
    return payloads


def port_is_closed(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) != 0


def wait_for_threads(baseline: set[threading.Thread], timeout_s: float = 3.0) -> set[threading.Thread]:
    """Threads started since ``baseline`` that are still alive after up to ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        extra = {thread for thread in threading.enumerate() if thread not in baseline}
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.02)


@pytest.fixture
def backend() -> Iterator[EmbeddedBackend]:
    with EmbeddedBackend() as running:
        yield running


def test_produce_and_read_back_every_record() -> None:
    threads_before = set(threading.enumerate())
    env_before = dict(os.environ)
    name = stream_name()

    started = time.monotonic()
    with EmbeddedBackend() as backend:
        assert backend.kinesis_endpoint == backend.dynamodb_endpoint
        assert backend.kinesis_endpoint.startswith("http://127.0.0.1:")
        clients = backend.build_clients()
        assert ensure_stream(clients.kinesis, name, shard_count=4)
        ready_s = time.monotonic() - started
        shards = Kinesis(clients.kinesis).list_shards(name)
        assert len(shards) == 4

        keys = partition_keys_for(open_hash_ranges(shards))
        producer = Producer(StreamWriter(clients.kinesis, name), keys, rate_per_s=100.0, aggregate_every=3)
        with producer:
            time.sleep(0.6)
        stats = producer.stop()
        assert producer.failure is None
        assert stats.rejected_entries == 0
        assert stats.failed_calls == 0
        assert stats.kinesis_records >= 40
        assert stats.aggregated_records >= 10
        assert stats.user_records == stats.kinesis_records + 4 * stats.aggregated_records  # 5 per aggregate

        client = plain_kinesis(backend)
        received: list[int] = []
        for shard in shards:
            records = read_shard(client, name, shard.shard_id)
            assert records, f"{shard.shard_id} got no data"
            payloads = user_payloads(records)
            assert any(payload.get("agg") for payload in payloads), f"no aggregate in {shard.shard_id}"
            assert all(set(payload) <= {"n", "at", "agg"} for payload in payloads)
            received.extend(payload["n"] for payload in payloads)
        client.close()
        port = backend.port

    assert sorted(received) == list(range(stats.user_records))  # each exactly once, none missing
    assert port_is_closed(port)
    assert not backend.running
    assert wait_for_threads(threads_before) == set()
    assert dict(os.environ) == env_before  # the dummy credentials never reached the environment
    assert ready_s < 10
    print(
        f"embedded backend: start -> stream ACTIVE in {ready_s:.2f}s (server up in {backend.startup_s:.3f}s)"
    )


def test_ensure_stream_is_idempotent(backend: EmbeddedBackend, caplog: pytest.LogCaptureFixture) -> None:
    clients = backend.build_clients()
    name = stream_name()
    assert ensure_stream(clients.kinesis, name, shard_count=2) is True
    assert ensure_stream(clients.kinesis, name, shard_count=2) is False
    with caplog.at_level(logging.WARNING, logger="kcl_daemon.aws.provision"):
        assert ensure_stream(clients.kinesis, name, shard_count=3) is False
    assert "already exists with 2 open shards" in caplog.text
    assert len(Kinesis(clients.kinesis).list_shards(name)) == 2


def test_ensure_stream_rejects_a_bad_shard_count(backend: EmbeddedBackend) -> None:
    with pytest.raises(ValueError, match="shard_count"):
        ensure_stream(backend.build_clients().kinesis, stream_name(), shard_count=0)


def test_local_stack_starts_produces_and_stops() -> None:
    threads_before = set(threading.enumerate())
    with local_stack(stream_name(), shard_count=2, rate_per_s=50.0) as stack:
        assert stack.stream_created
        assert stack.settings.kinesis_endpoint == stack.backend.kinesis_endpoint
        assert stack.settings.region == stack.backend.region
        assert stack.producer is not None
        deadline = time.monotonic() + 5
        while stack.producer.stats.user_records < 10 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert stack.producer.stats.user_records >= 10
        port = stack.backend.port
    assert port_is_closed(port)
    assert wait_for_threads(threads_before) == set()
    assert not logging.getLogger("werkzeug").filters  # the access-log filter went with the backend


def test_missing_moto_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_moto(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "moto" or name.startswith("moto."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_moto)
    with pytest.raises(LocalBackendUnavailable, match=r"pip install 'kcl-daemon\[local\]'"):
        EmbeddedBackend().start()


def test_stopping_twice_and_clients_after_stop() -> None:
    backend = EmbeddedBackend()
    with pytest.raises(RuntimeError, match="not been started"):
        _ = backend.kinesis_endpoint
    backend.start()
    backend.stop()
    backend.stop()
    with pytest.raises(RuntimeError, match="not running"):
        backend.build_clients()


def test_partition_keys_cover_every_range_in_turn() -> None:
    quarter = (MAX_HASH_KEY + 1) // 4
    ranges = [(i * quarter, (i + 1) * quarter - 1) for i in range(4)]
    keys = partition_keys_for(ranges, per_range=3)
    assert len(keys) == 12
    assert len(set(keys)) == 12
    for index, key in enumerate(keys):
        low, high = ranges[index % 4]
        assert low <= partition_key_hash(key) <= high
    assert keys == partition_keys_for(ranges, per_range=3)  # deterministic
    with pytest.raises(ValueError, match="no open shards"):
        partition_keys_for([])


class FakeSink:
    """Records every batch; rejects the entries and raises the errors it is told to, once each."""

    def __init__(
        self, reject: dict[int, list[int]] | None = None, raise_once: Exception | None = None
    ) -> None:
        self.batches: list[list[PutEntry]] = []
        self.reject = reject or {}  # call number -> indices to reject in that call
        self.raise_once = raise_once

    def put_records(self, entries: Sequence[PutEntry]) -> list[int]:
        if self.raise_once is not None:
            error, self.raise_once = self.raise_once, None
            raise error
        self.batches.append(list(entries))
        return self.reject.get(len(self.batches) - 1, [])


def sent_numbers(sink: FakeSink) -> list[int]:
    return [orjson.loads(entry.data)["n"] for batch in sink.batches for entry in batch]


def test_producer_paces_by_rate_and_resends_rejected_records() -> None:
    now = [0.0]
    sink = FakeSink(reject={1: [0]})
    producer = Producer(sink, ["a", "b"], rate_per_s=10.0, monotonic=lambda: now[0])
    producer.produce_once()  # t=0: record 0 is due
    now[0] = 0.35
    producer.produce_once()  # records 1..3 are due; Kinesis rejects record 1
    assert producer.stats == ProducerStats(user_records=3, kinesis_records=3, rejected_entries=1)
    producer.produce_once()  # record 1 again, nothing new due yet
    assert sent_numbers(sink) == [0, 1, 2, 3, 1]
    assert [entry.partition_key for entry in sink.batches[1]] == ["b", "a", "b"]
    assert producer.stats.user_records == 4


def test_producer_retries_transient_failures_and_stops_on_others() -> None:
    now = [0.0]
    sink = FakeSink(raise_once=TransientNetwork("put records: connection reset"))
    producer = Producer(sink, ["a"], rate_per_s=10.0, monotonic=lambda: now[0])
    producer.produce_once()
    assert producer.stats == ProducerStats(failed_calls=1)
    producer.produce_once()
    assert sent_numbers(sink) == [0]

    broken = Producer(FakeSink(raise_once=DependencyUnavailable("no such stream")), ["a"])
    broken.start()
    stats = broken.stop()
    assert isinstance(broken.failure, DependencyUnavailable)
    assert stats.user_records == 0
