"""The Kinesis adapter's GetShardIterator/GetRecords: request shapes, response conversion, error mapping."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import boto3  # noqa: TID251 - a stubbed client, no network
import pytest
from botocore.stub import Stubber  # noqa: TID251

from kcl_daemon.aws.kinesis import GetRecordsResult, Kinesis, RawRecord, epoch_millis, iterator_request
from kcl_daemon.core.shards.graph import ChildShard
from kcl_daemon.core.shards.iterator import IteratorPosition, IteratorType
from kcl_daemon.errors import AwsError, IteratorExpired, ShardNotFound, Throttled, TransientNetwork

WHEN = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)


@pytest.fixture
def stubbed() -> Iterator[tuple[Kinesis, Stubber]]:
    client = boto3.session.Session().client(
        "kinesis",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",  # noqa: S106 - dummy
    )
    with Stubber(client) as stubber:
        yield Kinesis(client), stubber
        stubber.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("value", "millis"),
    [
        (None, 0),
        (datetime(1970, 1, 1, tzinfo=UTC), 0),
        (WHEN, 1714564800123),
        (datetime(2024, 5, 1, 12, 0, 0, 123999), 1714564800123),  # noqa: DTZ001 - naive counts as UTC
        (datetime(2024, 5, 1, 14, 0, 0, 123000, tzinfo=timezone(timedelta(hours=2))), 1714564800123),
    ],
)
def test_epoch_millis(value: datetime | None, millis: int) -> None:
    assert epoch_millis(value) == millis


@pytest.mark.parametrize(
    ("position", "request_"),
    [
        (IteratorPosition(IteratorType.TRIM_HORIZON), {"ShardIteratorType": "TRIM_HORIZON"}),
        (
            IteratorPosition(IteratorType.AFTER_SEQUENCE_NUMBER, "12"),
            {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "StartingSequenceNumber": "12"},
        ),
        (
            IteratorPosition(IteratorType.AT_TIMESTAMP, timestamp=WHEN),
            {"ShardIteratorType": "AT_TIMESTAMP", "Timestamp": WHEN},
        ),
    ],
)
def test_iterator_request(position: IteratorPosition, request_: dict[str, object]) -> None:
    assert iterator_request(position) == request_


def test_get_shard_iterator(stubbed: tuple[Kinesis, Stubber]) -> None:
    kinesis, stubber = stubbed
    stubber.add_response(
        "get_shard_iterator",
        {"ShardIterator": "it-1"},
        {
            "StreamName": "s",
            "ShardId": "shardId-0",
            "ShardIteratorType": "AT_SEQUENCE_NUMBER",
            "StartingSequenceNumber": "7",
        },
    )
    assert (
        kinesis.get_shard_iterator("s", "shardId-0", IteratorPosition(IteratorType.AT_SEQUENCE_NUMBER, "7"))
        == "it-1"
    )


def test_get_records_converts_records_children_and_lag(stubbed: tuple[Kinesis, Stubber]) -> None:
    kinesis, stubber = stubbed
    stubber.add_response(
        "get_records",
        {
            "Records": [
                {
                    "SequenceNumber": "5",
                    "Data": b"abc",
                    "PartitionKey": "pk",
                    "ApproximateArrivalTimestamp": WHEN,
                }
            ],
            "MillisBehindLatest": 0,
            "ChildShards": [
                {
                    "ShardId": "shardId-1",
                    "ParentShards": ["shardId-0"],
                    "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "9"},
                }
            ],
        },
        {"ShardIterator": "it", "Limit": 100},
    )
    assert kinesis.get_records("it", 100) == GetRecordsResult(
        records=(RawRecord(b"abc", "pk", "5", 1714564800123),),
        next_iterator=None,
        millis_behind_latest=0,
        child_shards=(ChildShard("shardId-1", ("shardId-0",), 0, 9),),
    )


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [
        ("ExpiredIteratorException", 400, IteratorExpired),
        ("InvalidArgumentException", 400, IteratorExpired),
        ("ResourceNotFoundException", 400, ShardNotFound),
        ("ProvisionedThroughputExceededException", 400, Throttled),
        ("KMSThrottlingException", 400, AwsError),
        ("InternalFailure", 500, TransientNetwork),
    ],
)
def test_get_records_errors(
    stubbed: tuple[Kinesis, Stubber], code: str, status: int, error: type[AwsError]
) -> None:
    kinesis, stubber = stubbed
    stubber.add_client_error("get_records", service_error_code=code, http_status_code=status)
    with pytest.raises(error) as raised:
        kinesis.get_records("it", 10)
    assert type(raised.value) is error


@pytest.mark.parametrize(
    ("code", "error"),
    [("ResourceNotFoundException", ShardNotFound), ("InvalidArgumentException", AwsError)],
)
def test_get_shard_iterator_errors(
    stubbed: tuple[Kinesis, Stubber], code: str, error: type[AwsError]
) -> None:
    kinesis, stubber = stubbed
    stubber.add_client_error("get_shard_iterator", service_error_code=code, http_status_code=400)
    with pytest.raises(error) as raised:
        kinesis.get_shard_iterator("s", "shardId-0", IteratorPosition(IteratorType.LATEST))
    assert type(raised.value) is error
