"""Harmless calls for `kcl-daemon doctor`: who the credentials are, what a table or stream looks like, and
whether an IAM action is allowed, found out without changing anything.

A write is tried with a condition that cannot hold on a key no lease has (``attribute_exists`` on
``__kcl-daemon-doctor__``): DynamoDB checks the permission first, so ``ConditionalCheckFailedException``
means "allowed" and nothing was written. Reads are tried with ``Limit=1`` or on that key. Actions that
cannot be tried without an effect (CreateTable, RegisterStreamConsumer, SubscribeToShard,
PutMetricData) are reported as not tried. Results are plain values; no botocore exception leaves here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypedDict

from botocore.exceptions import BotoCoreError, ClientError

from kcl_daemon.aws.clients import ClientSettings, make_client
from kcl_daemon.aws.credentials import is_anonymous, session_for
from kcl_daemon.aws.errors import error_code

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TableDescriptionTypeDef
    from mypy_boto3_kinesis import KinesisClient
    from mypy_boto3_kinesis.type_defs import StreamDescriptionSummaryTypeDef

PROBE_KEY: Final = "__kcl-daemon-doctor__"
DENIED_CODES: Final = frozenset(
    {
        "AccessDeniedException",
        "AccessDenied",
        "UnauthorizedOperation",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "ExpiredTokenException",
        "MissingAuthenticationTokenException",
    }
)
#: answers that prove the call was authorized
ALLOWED_CODES: Final = frozenset(
    {"ConditionalCheckFailedException", "ResourceNotFoundException", "ResourceInUseException"}
)


@dataclass(frozen=True, slots=True)
class Tried:
    """The outcome of one try: ``allowed``, ``denied`` or ``error``, and what the service said."""

    outcome: str
    detail: str = ""


def classify(exc: Exception) -> Tried:
    """What a failed try says about the permission."""
    if not isinstance(exc, ClientError):
        return Tried("error", str(exc))
    code = error_code(exc)
    message = str(exc.response.get("Error", {}).get("Message", ""))
    if code in DENIED_CODES:
        return Tried("denied", f"{code}: {message}".rstrip(": "))
    if code in ALLOWED_CODES:
        return Tried("allowed", f"answered {code}")
    return Tried("error", f"{code}: {message}".rstrip(": "))


def attempt(call: Callable[[], object]) -> Tried:
    try:
        call()
    except (ClientError, BotoCoreError) as exc:
        return classify(exc)
    return Tried("allowed")


@dataclass(frozen=True, slots=True)
class Identity:
    region: str | None
    method: str | None
    anonymous: bool
    arn: str | None = None
    error: str | None = None
    checked: bool = False


def identity(settings: ClientSettings) -> Identity:
    """Region and credentials as the clients resolve them; the caller's ARN through STS unless the
    endpoints are custom (emulators have no STS)."""
    chain = settings.dynamodb_credentials or settings.credentials
    anonymous = is_anonymous(chain)
    session = session_for(chain, settings.region)
    region = session.region_name
    try:
        credentials = None if anonymous else session.get_credentials()
    except BotoCoreError as exc:
        return Identity(region, None, anonymous, error=str(exc))
    method = None if credentials is None else str(getattr(credentials, "method", "unknown"))
    if anonymous or credentials is None or settings.dynamodb_endpoint or settings.kinesis_endpoint:
        return Identity(region, method, anonymous)
    sts = make_client(settings, "sts", session=session, anonymous=False, guard=False)
    try:
        arn = str(sts.get_caller_identity()["Arn"])
    except ClientError as exc:
        return Identity(region, method, anonymous, error=f"{error_code(exc)}: {exc}", checked=True)
    except BotoCoreError as exc:
        return Identity(region, method, anonymous, error=str(exc), checked=True)
    return Identity(region, method, anonymous, arn=arn, checked=True)


def describe_table(client: DynamoDBClient, name: str) -> TableDescriptionTypeDef | Tried | None:
    """The table's description; None when it does not exist; a :class:`Tried` when the call failed."""
    try:
        return client.describe_table(TableName=name)["Table"]
    except ClientError as exc:
        if error_code(exc) == "ResourceNotFoundException":
            return None
        return classify(exc)
    except BotoCoreError as exc:
        return Tried("error", str(exc))


def describe_stream(client: KinesisClient, name: str) -> StreamDescriptionSummaryTypeDef | Tried | None:
    """DescribeStreamSummary's answer; None when the stream does not exist; :class:`Tried` on failure."""
    try:
        return client.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
    except ClientError as exc:
        if error_code(exc) == "ResourceNotFoundException":
            return None
        return classify(exc)
    except BotoCoreError as exc:
        return Tried("error", str(exc))


class _Never(TypedDict):
    ConditionExpression: str
    ExpressionAttributeNames: dict[str, str]


def _never(key_name: str) -> _Never:
    """A condition no item has: the probe key exists."""
    return {"ConditionExpression": "attribute_exists(#k)", "ExpressionAttributeNames": {"#k": key_name}}


def try_dynamodb(
    client: DynamoDBClient, action: str, table: str, key_name: str, index: str | None = None
) -> Tried | None:
    """Try ``dynamodb:<action>`` on ``table`` harmlessly; None when it cannot be tried so."""
    key = {key_name: {"S": PROBE_KEY}}
    calls: dict[str, Callable[[], object]] = {
        "DescribeTable": lambda: client.describe_table(TableName=table),
        "Scan": lambda: client.scan(TableName=table, Limit=1),
        "GetItem": lambda: client.get_item(TableName=table, Key=key),
        "PutItem": lambda: client.put_item(TableName=table, Item=key, **_never(key_name)),
        "UpdateItem": lambda: client.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET #p = :p",
            ExpressionAttributeValues={":p": {"S": "doctor"}},
            ConditionExpression="attribute_exists(#k)",
            ExpressionAttributeNames={"#k": key_name, "#p": "doctorProbe"},
        ),
        "DeleteItem": lambda: client.delete_item(TableName=table, Key=key, **_never(key_name)),
        "Query": lambda: client.query(
            TableName=table,
            IndexName=index or "",
            KeyConditionExpression="#o = :o",
            ExpressionAttributeNames={"#o": "leaseOwner"},
            ExpressionAttributeValues={":o": {"S": PROBE_KEY}},
            Limit=1,
        ),
    }
    call = calls.get(action)
    return None if call is None else attempt(call)


def try_kinesis(
    client: KinesisClient, action: str, stream: str, consumer_name: str | None = None
) -> Tried | None:
    """Try ``kinesis:<action>`` on ``stream`` harmlessly (reads only); None when it cannot be tried so."""
    if action == "ListShards":
        return attempt(lambda: client.list_shards(StreamName=stream))
    if action == "DescribeStreamSummary":
        return attempt(lambda: client.describe_stream_summary(StreamName=stream))
    if action in ("GetShardIterator", "GetRecords"):
        try:
            shards = client.list_shards(StreamName=stream).get("Shards", [])
        except (ClientError, BotoCoreError) as exc:
            return classify(exc)
        if not shards:
            return Tried("error", "the stream has no shard to try it on")
        shard_id = shards[0]["ShardId"]
        iterator: list[str] = []

        def get_iterator() -> None:
            response = client.get_shard_iterator(
                StreamName=stream, ShardId=shard_id, ShardIteratorType="LATEST"
            )
            iterator.append(response["ShardIterator"])

        tried = attempt(get_iterator)
        if action == "GetShardIterator" or tried.outcome != "allowed":
            return (
                tried
                if action == "GetShardIterator"
                else Tried("error", f"no iterator to try it with: {tried.detail}")
            )
        return attempt(lambda: client.get_records(ShardIterator=iterator[0], Limit=1))
    if action == "DescribeStreamConsumer" and consumer_name:
        try:
            arn = client.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamARN"]
        except (ClientError, BotoCoreError) as exc:
            return classify(exc)
        return attempt(lambda: client.describe_stream_consumer(StreamARN=arn, ConsumerName=consumer_name))
    return None
