"""The checkpoint tool on the emulators, in-process (kcl_daemon.checkpoint_tool.command and .resolve):
AT_TIMESTAMP resolved through the stream to the record before the instant, a dead owner's lease written
and released, --dry-run writing nothing, a finished shard refused. The CLI and a running fleet:
tests/e2e/test_checkpoint.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from kcl_daemon.aws.checkpoint_writes import AUDIT_ATTRIBUTE
from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.checkpoint_tool.command import CheckpointTool, Selection, SetOptions, Target
from kcl_daemon.checkpoint_tool.plan import Action
from kcl_daemon.checkpoint_tool.resolve import resolve_at_timestamp
from kcl_daemon.config.settings import Settings
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import SHARD_END, TRIM_HORIZON, ExtendedSequenceNumber
from tests.support.emulators import REGION, Backend

pytestmark = pytest.mark.integration


def put_one(clients: AwsClients, stream: str, text: str) -> tuple[str, datetime]:
    """Put one record into the stream's first shard; its sequence number and arrival time."""
    response = clients.kinesis.put_record(StreamName=stream, Data=text.encode(), PartitionKey="k")
    records = clients.kinesis.get_records(
        ShardIterator=clients.kinesis.get_shard_iterator(
            StreamName=stream,
            ShardId=response["ShardId"],
            ShardIteratorType="AT_SEQUENCE_NUMBER",
            StartingSequenceNumber=response["SequenceNumber"],
        )["ShardIterator"],
        Limit=1,
    )["Records"]
    arrival = records[0]["ApproximateArrivalTimestamp"]
    return response["SequenceNumber"], arrival.astimezone(UTC)


def test_at_timestamp_resolves_to_the_record_before_the_instant(
    aws_clients: AwsClients, backend: Backend, make_stream: Callable[[int], str]
) -> None:
    stream = make_stream(1)
    shard = aws_clients.kinesis.list_shards(StreamName=stream)["Shards"][0]["ShardId"]
    kinesis = Kinesis(aws_clients.kinesis)
    # kinesalite never answers GetShardIterator AT_TIMESTAMP when no record is at or after the instant
    # (actions/getShardIterator.js: the callback is in .head(), which an empty stream never calls), so
    # the "nothing after it" cases run on moto only.
    beyond_the_last = backend.name == "moto"
    if beyond_the_last:
        empty = resolve_at_timestamp(kinesis, stream, shard, datetime.now(UTC), retention_s=30.0)
        assert empty.checkpoint == TRIM_HORIZON and empty.first_sequence_number is None
    first, _ = put_one(aws_clients, stream, "a")
    second, _ = put_one(aws_clients, stream, "b")
    time.sleep(1.1)  # arrival times have millisecond (moto: second-ish) resolution: a clear gap
    third, third_at = put_one(aws_clients, stream, "c")
    fourth, _ = put_one(aws_clients, stream, "d")
    resolved = resolve_at_timestamp(kinesis, stream, shard, third_at, retention_s=3600.0)
    assert resolved.first_sequence_number == third
    assert resolved.checkpoint == ExtendedSequenceNumber(second)
    if beyond_the_last:
        time.sleep(0.05)
        after = resolve_at_timestamp(kinesis, stream, shard, datetime.now(UTC), retention_s=3600.0)
        assert after.checkpoint == ExtendedSequenceNumber(fourth) and after.first_sequence_number is None
    oldest = resolve_at_timestamp(kinesis, stream, shard, datetime(2000, 1, 1, tzinfo=UTC), retention_s=30.0)
    assert oldest.checkpoint == TRIM_HORIZON and oldest.first_sequence_number == first


def settings_for(backend: Backend, table: str, **changes: object) -> Settings:
    base = Settings(
        application_name=table,
        region_name=REGION,
        kinesis_endpoint=backend.kinesis_endpoint,
        dynamodb_endpoint=backend.dynamodb_endpoint,
        failover_s=0.5,
        client_version_config="CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_dead_owner_dry_run_finished_and_at_timestamp(
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
) -> None:
    stream = make_stream(1)
    shard = aws_clients.kinesis.list_shards(StreamName=stream)["Shards"][0]["ShardId"]
    lease_table.create_lease(Lease(shard, TRIM_HORIZON))
    lease = lease_table.take(lease_table.get_lease(shard, consistent=True), "dead-worker")  # type: ignore[arg-type]
    lease_table.create_lease(Lease("shardId-finished", SHARD_END))
    first, _ = put_one(aws_clients, stream, "a")
    time.sleep(1.1)
    second, second_at = put_one(aws_clients, stream, "b")
    tool = CheckpointTool(settings_for(backend, lease_table.table_name, stream_name=stream), aws_clients)
    target = Target("AT_TIMESTAMP", second_at)
    selection = Selection((shard, "shardId-finished"))

    dry = asyncio.run(tool.set(selection, target, SetOptions(dry_run=True, by="tester")))
    assert [o.step.action for o in dry.outcomes] == [Action.WRITE_RELEASE, Action.REFUSE]
    assert dry.outcomes[0].step.target == ExtendedSequenceNumber(first)
    assert "SHARD_END" in dry.outcomes[1].step.reason
    assert lease_table.get_lease(shard, consistent=True) == lease  # nothing written

    done = asyncio.run(tool.set(Selection((shard,)), target, SetOptions(by="tester", reason="replay b")))
    assert done.ok and done.outcomes[0].done
    after = lease_table.get_lease(shard, consistent=True)
    assert after is not None and after.checkpoint == ExtendedSequenceNumber(first)
    assert after.lease_owner is None and after.lease_counter == lease.lease_counter + 1  # released
    assert after.extra[AUDIT_ATTRIBUTE]["M"]["how"] == {"S": "write and release"}  # type: ignore[index]
    assert second  # the next record the fleet processes


def test_a_2x_take_over_overtaken_by_a_renewal_reads_again_and_takes(
    backend: Backend, aws_clients: AwsClients, lease_table: DynamoLeaseTable
) -> None:
    """The owner renews between the tool's read and its take (a busy fleet): the counter fence refuses
    the take, and the tool reads the lease again and takes it from the renewed counter."""
    lease_table.create_lease(Lease("shardId-000000000000", TRIM_HORIZON))
    created = lease_table.get_lease("shardId-000000000000", consistent=True)
    assert created is not None
    read = lease_table.take(created, "worker-b")
    renewed = lease_table.renew(read)  # after the tool read ``read``
    tool = CheckpointTool(settings_for(backend, lease_table.table_name, failover_s=0.3), aws_clients)
    held = asyncio.run(tool._take_2x(read, "the-tool"))
    assert held.lease_owner == "the-tool" and held.lease_counter > renewed.lease_counter
