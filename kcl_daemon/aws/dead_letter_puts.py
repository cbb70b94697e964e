"""The AWS calls that store a dead letter: an SQS message, an S3 object, a Kinesis record.

Each put is one call, its botocore errors mapped into the project's tree (``map_aws_errors``); the caller
(``kcl_daemon.dead_letters.sinks``) retries in place. Clients use boto3's endpoint resolution
(``AWS_ENDPOINT_URL_SQS``, ``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``) except Kinesis, which uses the
daemon's ``kinesisEndpoint``, and the daemon's region and credentials.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Literal, overload

from kcl_daemon.aws.clients import ClientSettings, make_client
from kcl_daemon.aws.errors import map_aws_errors

if TYPE_CHECKING:
    from mypy_boto3_kinesis import KinesisClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

#: SQS's message size limit (the whole body).
SQS_MAX_BODY_BYTES = 256 * 1024


@overload
def dead_letter_client(
    settings: ClientSettings, service: Literal["sqs"], endpoint: str | None = None
) -> SQSClient: ...


@overload
def dead_letter_client(
    settings: ClientSettings, service: Literal["s3"], endpoint: str | None = None
) -> S3Client: ...


@overload
def dead_letter_client(
    settings: ClientSettings, service: Literal["kinesis"], endpoint: str | None = None
) -> KinesisClient: ...


def dead_letter_client(
    settings: ClientSettings, service: Literal["sqs", "s3", "kinesis"], endpoint: str | None = None
) -> SQSClient | S3Client | KinesisClient:
    """A client for ``sqs``, ``s3`` or ``kinesis`` with the daemon's region, credentials and timeouts
    (``endpoint``: instead of boto3's, or for Kinesis the daemon's)."""
    return make_client(settings, service, endpoint=endpoint, guard=False)


class SqsPuts:
    """Messages to one queue, named by URL or by name (its URL is looked up once)."""

    def __init__(self, client: SQSClient, queue: str) -> None:
        self._client = client
        self._queue = queue
        self._url: str | None = queue if queue.startswith(("http://", "https://")) else None
        self._lock = threading.Lock()

    def _queue_url(self) -> str:
        with self._lock:
            if self._url is None:
                with map_aws_errors(f"GetQueueUrl {self._queue}"):
                    self._url = str(self._client.get_queue_url(QueueName=self._queue)["QueueUrl"])
            return self._url

    def send(self, body: str, attributes: dict[str, str]) -> None:
        url = self._queue_url()
        with map_aws_errors(f"SendMessage {self._queue}"):
            self._client.send_message(
                QueueUrl=url,
                MessageBody=body,
                MessageAttributes={
                    k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()
                },
            )

    def receive(self, max_messages: int = 10, wait_s: int = 0) -> list[MessageTypeDef]:
        url = self._queue_url()
        with map_aws_errors(f"ReceiveMessage {self._queue}"):
            reply = self._client.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=max_messages,
                WaitTimeSeconds=wait_s,
                VisibilityTimeout=0,
                MessageAttributeNames=["All"],
            )
        return list(reply.get("Messages", []))


class S3Puts:
    def __init__(self, client: S3Client, bucket: str) -> None:
        self._client = client
        self.bucket = bucket

    def put(self, key: str, body: bytes) -> None:
        with map_aws_errors(f"PutObject s3://{self.bucket}/{key}"):
            self._client.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType="application/json")

    def keys(self, prefix: str) -> list[str]:
        found: list[str] = []
        with map_aws_errors(f"ListObjectsV2 s3://{self.bucket}/{prefix}"):
            for page in self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix
            ):
                found.extend(str(item["Key"]) for item in page.get("Contents", []))
        return found

    def get(self, key: str) -> bytes:
        with map_aws_errors(f"GetObject s3://{self.bucket}/{key}"):
            return bytes(self._client.get_object(Bucket=self.bucket, Key=key)["Body"].read())


class KinesisPuts:
    def __init__(self, client: KinesisClient, stream: str) -> None:
        self._client = client
        self.stream = stream

    def put(self, data: bytes, partition_key: str) -> None:
        with map_aws_errors(f"PutRecord {self.stream}"):
            self._client.put_record(StreamName=self.stream, Data=data, PartitionKey=partition_key)
