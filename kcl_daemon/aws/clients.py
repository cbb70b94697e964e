"""boto3 clients, built once at startup (boto3 sessions are not thread-safe; clients are).

Credentials come from boto3's default chain (environment, shared files, container/instance roles).
botocore's own retries are off by default: retrying is the job of the named policies in
:mod:`kcl_daemon.retry`, and a single bounded attempt keeps a hung renewal from outliving its lease.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_kinesis import KinesisClient


@dataclass(frozen=True, slots=True)
class ClientSettings:
    region: str
    kinesis_endpoint: str | None = None
    dynamodb_endpoint: str | None = None
    connect_timeout_s: float = 2.0
    read_timeout_s: float = 5.0
    max_pool_connections: int = 32  # at least the total number of threads calling AWS
    max_attempts: int = 1  # botocore's total attempts per call, the first included


@dataclass(frozen=True, slots=True)
class AwsClients:
    dynamodb: DynamoDBClient
    kinesis: KinesisClient


def botocore_config(settings: ClientSettings) -> Config:
    return Config(
        region_name=settings.region,
        connect_timeout=settings.connect_timeout_s,
        read_timeout=settings.read_timeout_s,
        max_pool_connections=settings.max_pool_connections,
        retries={"total_max_attempts": settings.max_attempts, "mode": "standard"},
    )


def build_clients(settings: ClientSettings) -> AwsClients:
    """One session, one DynamoDB and one Kinesis client; share them across threads."""
    session = boto3.session.Session(region_name=settings.region)
    config = botocore_config(settings)
    return AwsClients(
        dynamodb=session.client("dynamodb", endpoint_url=settings.dynamodb_endpoint, config=config),
        kinesis=session.client("kinesis", endpoint_url=settings.kinesis_endpoint, config=config),
    )
