"""The lease table as the hand-over point between kcl-daemon processes and a Spark query (moto_server).

Real daemons (``python -m kcl_daemon run`` with the recording processor as child) and the tests' Spark
cluster (executors read and publish their ends on the lease items) share one stream and one lease
table: daemons, then Spark, then daemons again, and every record is processed exactly once across the
three phases. With a daemon left running, the query
refuses to start, or waits for the daemon's leases when told to.
"""

from __future__ import annotations

import json
import signal
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_kinesis_agg.aggregator import RecordAggregator

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.core.spark.batches import parse_offset
from kcl_daemon.spark.handover import positions_after, sync_lease_table
from kcl_daemon.spark.listener import KinesisLeaseSyncListener
from kcl_daemon.spark.options import parse_options
from tests.support.daemon import run_cli
from tests.support.emulators import REGION, Backend
from tests.support.fleet import Fleet
from tests.support.spark import rows, run_query
from tests.support.streams import put, wait_for_stream

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.e2e, pytest.mark.timeout(300)]

FAILOVER_MS = 2000  # the fleet's failoverTimeMillis (tests.support.fleet.Fleet)


@pytest.fixture
def moto(moto_endpoint: str) -> Backend:
    return Backend("moto", moto_endpoint, moto_endpoint)


@pytest.fixture
def clients(moto: Backend) -> AwsClients:
    return moto.clients()


@pytest.fixture
def handover(tmp_path: Path, moto: Backend, clients: AwsClients) -> Iterator[Fleet]:
    stream = f"handover-{uuid.uuid4().hex[:8]}"
    clients.kinesis.create_stream(StreamName=stream, ShardCount=2)
    wait_for_stream(clients, stream)
    fleet = Fleet(tmp_path, moto, f"app-{uuid.uuid4().hex[:8]}", stream)
    yield fleet
    fleet.close()
    clients.kinesis.delete_stream(StreamName=stream)
    clients.dynamodb.delete_table(TableName=fleet.table)


def spark_options(fleet: Fleet, **extra: str | int) -> dict[str, str]:
    options = {
        "streamName": fleet.stream,
        "region": REGION,
        "endpointUrl": fleet.backend.kinesis_endpoint,
        "dynamoDbEndpointUrl": fleet.backend.dynamodb_endpoint,
        "leaseTableName": fleet.table,
        "leaseFailoverMs": str(FAILOVER_MS),
        "shardDiscoveryIntervalMs": "0",
    }
    options.update({k: str(v) for k, v in extra.items()})
    return options


def texts(found: list[dict[str, Any]]) -> list[str]:
    return [row["data"].decode() for row in found]


def put_aggregate(clients: AwsClients, stream: str, names: list[str]) -> None:
    aggregator = RecordAggregator()
    for name in names:
        assert aggregator.add_user_record(f"key-{name}", name.encode()) is None
    partition_key, _, data = aggregator.clear_and_get().get_contents()
    clients.kinesis.put_record(StreamName=stream, Data=data, PartitionKey=partition_key)


def test_daemons_then_spark_then_daemons_process_every_record_exactly_once(
    handover: Fleet, clients: AwsClients, spark_session: Any, tmp_path: Path
) -> None:
    fleet = handover
    put(clients, fleet.stream, range(300))
    daemon = fleet.start("daemon-1")
    fleet.wait(lambda: len(fleet.recorded()) >= 300, 60, "phase 1: daemons process 300 records")
    assert daemon.stop(signal.SIGTERM) == 0, daemon.tail()
    phase_1 = [row["data"] for row in fleet.recorded()]

    put(clients, fleet.stream, range(300, 600))
    put_aggregate(clients, fleet.stream, [f"agg-{n}" for n in range(4)])  # sub-sequence exact hand-back
    out, chk = tmp_path / "out", tmp_path / "chk"
    options = spark_options(fleet, maxRecordsPerBatch=200)
    listener = KinesisLeaseSyncListener(options)
    run_query(spark_session, options, out, chk, listeners=(listener,))
    # while it ran, the query checkpointed each batch Spark committed to it (all but the last)
    table = DynamoLeaseTable(clients.dynamodb, fleet.table)
    batches = sorted(int(p.name) for p in (chk / "offsets").iterdir() if p.name.isdigit())
    assert len(batches) >= 2
    committed = positions_after(
        parse_options(options),
        parse_offset(json.loads((chk / "offsets" / str(batches[-2])).read_text().splitlines()[2])),
    )
    for lease in table.list_leases(consistent=True).leases:
        assert lease.checkpoint >= committed.shards[lease.shard_id].checkpoint, lease
    # the last batch, which commit() never reports: the CLI's spark-sync writes it and releases
    option_args = [arg for key, value in options.items() for arg in ("--option", f"{key}={value}")]
    synced = run_cli("spark-sync", "--checkpoint", str(chk), *option_args)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert "lease(s) released" in synced.stdout and "not written" not in synced.stdout
    assert sync_lease_table(chk, options).written == {}  # idempotent: nothing left to move
    phase_2 = texts(rows(out))
    assert sorted(phase_2) == sorted(
        [f"record-{n}" for n in range(300, 600)] + [f"agg-{n}" for n in range(4)]
    )
    leases = table.list_leases(consistent=True).leases
    assert all(lease.lease_owner is None for lease in leases)  # released on stop
    assert any(lease.checkpoint.sub_sequence_number == 3 for lease in leases)  # the aggregate's last

    put(clients, fleet.stream, range(600, 900))
    daemon = fleet.start("daemon-2")
    fleet.wait(lambda: len(fleet.recorded()) >= 300 + 300, 60, "phase 3: daemons process 300 more")
    assert daemon.stop(signal.SIGTERM) == 0, daemon.tail()
    phase_3 = [row["data"] for row in fleet.recorded()][len(phase_1) :]

    # Spark restarted on its old checkpoint would rewind what the daemons did: it refuses, naming shards
    with pytest.raises(Exception, match="is ahead of this query's checkpoint"):
        run_query(spark_session, options, tmp_path / "out-again", chk)

    everything = phase_1 + phase_2 + phase_3
    expected = [f"record-{n}" for n in range(900)] + [f"agg-{n}" for n in range(4)]
    assert sorted(everything) == sorted(expected)  # every record once: no loss, no duplicate


def test_with_a_daemon_running_spark_refuses_to_start_or_waits_as_configured(
    handover: Fleet, clients: AwsClients, spark_session: Any, tmp_path: Path
) -> None:
    fleet = handover
    put(clients, fleet.stream, range(100))
    daemon = fleet.start("daemon-1")
    fleet.wait(lambda: len(fleet.recorded()) >= 100, 60, "the daemon holds and renews its leases")

    with pytest.raises(Exception, match="renewed by running worker") as refused:
        run_query(spark_session, spark_options(fleet), tmp_path / "out-1", tmp_path / "chk-1")
    assert "daemon-1" in str(refused.value)

    put(clients, fleet.stream, range(100, 200))
    fleet.wait(lambda: len(fleet.recorded()) >= 200, 60, "the daemon processes 100 more")
    stopper = threading.Timer(4.0, daemon.stop)  # the query waits until the daemon has gone
    stopper.start()
    try:
        options = spark_options(fleet, leaseWaitTimeoutMs=60_000)
        run_query(spark_session, options, tmp_path / "out-2", tmp_path / "chk-2")
    finally:
        stopper.join()
    assert daemon.exit_status == 0
    put_after = texts(rows(tmp_path / "out-2"))
    daemon_saw = {row["data"] for row in fleet.recorded()}
    assert not set(put_after) & daemon_saw  # Spark started exactly where the daemon stopped
    assert daemon_saw | set(put_after) == {f"record-{n}" for n in range(200)}
