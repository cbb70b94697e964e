"""Several streams per application (``streamNames``) with two daemon processes, on kinesalite + dynalite.

Two streams in one application and one lease table, in both lease modes (the 2.x-compatible taker and
the KCL 3.x leader): every record of each stream is processed, never twice by one worker (a steal by
the 2.x taker redelivers the batch in flight, as in Java), and tagged with its stream (``initialize``
carries it), a split in one stream keeps parents before children, a listed stream created
later is picked up, and a deleted stream's leases are removed. Lease items match Java's multi-stream
schema (key ``account:stream:epoch:shardId``, attributes ``streamName`` and ``shardId``).
moto is skipped: it never ends a closed shard that was open when first read (see the README).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.core.stream_identity import split_lease_key
from tests.support.daemon import run_cli
from tests.support.emulators import Backend
from tests.support.fanout_server import FanoutServer
from tests.support.fleet import Fleet
from tests.support.streams import wait_for_stream

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

MODES = {
    "2x": "CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1",
    "3x": "CLIENT_VERSION_CONFIG_3X",
}


class MultiStreamFleet(Fleet):
    def __init__(
        self, tmp_path: Path, backend: Backend, table: str, streams: list[str], mode: str, extra: str = ""
    ) -> None:
        super().__init__(tmp_path, backend, table, streams[0], extra=extra)
        self.streams = streams
        self.mode = mode

    def properties(self, worker: str, executable: str) -> Path:
        path = self.tmp_path / f"{worker}.properties"
        path.write_text(
            f"executableName = {executable}\n"
            f"applicationName = {self.table}\n"
            f"streamNames = {', '.join(self.streams)}\n"
            "formerStreamsLeasesDeletionWaitMillis = 0\n"
            "regionName = us-east-1\n"
            f"kinesisEndpoint = {self.backend.kinesis_endpoint}\n"
            f"dynamoDBEndpoint = {self.backend.dynamodb_endpoint}\n"
            f"workerId = {worker}\n"
            "initialPositionInStream = TRIM_HORIZON\n"
            "idleTimeBetweenReadsInMillis = 200\n"
            "failoverTimeMillis = 2000\n"
            "parentShardPollIntervalMillis = 500\n"
            "shardSyncIntervalMillis = 2000\n"
            "shutdownGraceMillis = 15000\n"
            "childStopTimeoutMillis = 2000\n"
            f"clientVersionConfig = {self.mode}\n"
            "leaseAssignmentStrategy = LEASE_COUNT_BASED\n"
            "workerMetricsReporterFreqInMillis = 1000\n" + self.extra
        )
        return path


def payloads(clients: AwsClients, stream: str, numbers: range) -> None:
    entries = [{"Data": f"{stream}/{n}".encode(), "PartitionKey": f"key-{n}"} for n in numbers]
    for offset in range(0, len(entries), 250):
        response = clients.kinesis.put_records(StreamName=stream, Records=entries[offset : offset + 250])  # type: ignore[arg-type]
        assert response.get("FailedRecordCount", 0) == 0


@pytest.fixture
def streams(aws_clients: AwsClients) -> Iterator[list[str]]:
    """Three stream names; the first two exist (2 shards each), the third is created by the test."""
    names = [f"ms-{uuid.uuid4().hex[:8]}-{i}" for i in range(3)]
    for name in names[:2]:
        aws_clients.kinesis.create_stream(StreamName=name, ShardCount=2)
    for name in names[:2]:
        wait_for_stream(aws_clients, name)
    yield names
    for name in names:
        with contextlib.suppress(Exception):
            aws_clients.kinesis.delete_stream(StreamName=name)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_two_streams_two_daemons_a_split_a_new_and_a_deleted_stream(
    mode: str,
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    streams: list[str],
) -> None:
    if backend.name == "moto":
        pytest.skip("moto never ends a closed shard that was open when it was first read (see README)")
    first, second, later = streams
    fleet = MultiStreamFleet(tmp_path, backend, lease_table.table_name, streams, MODES[mode])
    kinesis = aws_clients.kinesis

    def processed() -> Counter[tuple[str | None, str]]:
        return Counter((row.get("stream"), row["data"]) for row in fleet.recorded())

    def expected(stream: str, numbers: range) -> set[tuple[str | None, str]]:
        return {(stream, f"{stream}/{n}") for n in numbers}

    try:
        payloads(aws_clients, first, range(100))
        payloads(aws_clients, second, range(100))
        fleet.start("daemon-a")
        fleet.start("daemon-b")
        want = expected(first, range(100)) | expected(second, range(100))
        fleet.wait(lambda: want <= set(processed()), 60, "both streams' first 100 records")

        # Java's multi-stream lease schema, one table for both streams
        leases = lease_table.list_leases(consistent=True).leases
        assert {lease.stream_shard_id for lease in leases} >= {"shardId-000000000000", "shardId-000000000001"}
        for lease in leases:
            identity, shard_id = split_lease_key(lease.lease_key)
            assert identity is not None and identity.stream_name in (first, second), lease.lease_key
            assert lease.stream_identifier == identity.serialize() and lease.stream_shard_id == shard_id
        assert len(leases) == 4

        # a split in the first stream only; then the third (listed) stream appears
        shard = kinesis.list_shards(StreamName=first)["Shards"][0]
        low, high = int(shard["HashKeyRange"]["StartingHashKey"]), int(shard["HashKeyRange"]["EndingHashKey"])
        kinesis.split_shard(
            StreamName=first, ShardToSplit=shard["ShardId"], NewStartingHashKey=str((low + high) // 2)
        )
        wait_for_stream(aws_clients, first)
        kinesis.create_stream(StreamName=later, ShardCount=1)
        wait_for_stream(aws_clients, later)
        payloads(aws_clients, first, range(100, 300))
        payloads(aws_clients, second, range(100, 200))
        payloads(aws_clients, later, range(50))
        want |= (
            expected(first, range(100, 300)) | expected(second, range(100, 200)) | expected(later, range(50))
        )
        fleet.wait(lambda: want <= set(processed()), 90, "every record after the split and the new stream")

        counts = processed()
        assert set(counts) == want, set(counts) ^ want
        rows = fleet.recorded()
        # Once per stream: a record is seen again only by another worker, after its lease moved (the 2.x
        # taker steals as Java's does; a batch in flight at the steal is delivered again, at-least-once)
        workers: dict[tuple[str | None, str], list[str]] = {}
        for row in rows:
            workers.setdefault((row["stream"], row["data"]), []).append(row["worker"])
        twice_by_one = {key: who for key, who in workers.items() if len(set(who)) < len(who)}
        assert not twice_by_one, twice_by_one
        order: dict[tuple[str, str], list[int]] = {}
        for index, row in enumerate(rows):
            order.setdefault((row["stream"], row["shard"]), []).append(index)
        children = [
            s["ShardId"] for s in kinesis.list_shards(StreamName=first)["Shards"] if s.get("ParentShardId")
        ]
        assert len(children) == 2
        fleet.wait(
            lambda: (
                {lease.lease_owner for lease in lease_table.list_leases(consistent=True).leases}
                >= {"daemon-a", "daemon-b"}
            ),
            30,
            "both daemons hold leases of the one table",
        )
        for child in children:
            assert (first, child) in order, f"child {child} never processed"
            assert max(order[(first, shard["ShardId"])]) < min(order[(first, child)]), "child before parent"

        # `kcl-daemon leases` compares every configured stream's shards with the lease keys
        report = run_cli("leases", "--json", properties=fleet.properties("cli", "x"))
        assert report.returncode == 0, report.stderr
        missing = json.loads(report.stdout)["shardsWithoutLease"]
        # (the split parent's lease may already be cleaned up: it is the only one allowed to be missing)
        assert all(f":{first}:" in key and key.endswith(f":{shard['ShardId']}") for key in missing), missing

        # the second stream is deleted: its leases go at the next sync (wait 0)
        kinesis.delete_stream(StreamName=second)
        fleet.wait(
            lambda: (
                not any(
                    (lease.stream or "").split(":")[1] == second
                    for lease in lease_table.list_leases(consistent=True).leases
                )
            ),
            60,
            "the deleted stream's leases removed",
        )
        for daemon in fleet.daemons.values():
            assert daemon.stop() == 0, daemon.tail()
    finally:
        fleet.close()


def test_enhanced_fan_out_registers_a_consumer_per_stream(
    tmp_path: Path,
    kinesalite_endpoint: str,
    dynalite_endpoint: str,
    aws_clients: AwsClients,
    backend: Backend,
    lease_table: DynamoLeaseTable,
    streams: list[str],
) -> None:
    """retrievalMode FANOUT with two streams, against the SubscribeToShard test server over kinesalite."""
    if backend.name == "moto":
        pytest.skip("the SubscribeToShard test server runs over kinesalite")
    first, second, _ = streams
    payloads(aws_clients, first, range(60))
    payloads(aws_clients, second, range(60))
    with FanoutServer(kinesalite_endpoint, subscription_s=1.0) as server:
        fleet = MultiStreamFleet(
            tmp_path,
            Backend("fanout", server.endpoint, dynalite_endpoint),
            lease_table.table_name,
            [first, second],
            MODES["3x"],
            extra="retrievalMode = FANOUT\n",
        )
        try:
            fleet.start("daemon-a")
            want = {(s, f"{s}/{n}") for s in (first, second) for n in range(60)}
            fleet.wait(
                lambda: want <= {(r["stream"], r["data"]) for r in fleet.recorded()}, 60, "every record"
            )
            counts = Counter((r["stream"], r["data"]) for r in fleet.recorded())
            assert set(counts) == want and max(counts.values()) == 1
            stream_of = {consumer["StreamARN"].rsplit("/", 1)[1] for consumer in server.consumers.values()}
            assert stream_of == {first, second}
            assert fleet.daemons["daemon-a"].stop() == 0
        finally:
            fleet.close()
