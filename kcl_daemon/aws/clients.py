"""boto3 clients, built once at startup (boto3 sessions are not thread-safe; clients are).

Credentials come from the configured provider chain (:mod:`kcl_daemon.aws.credentials`), or boto3's
default chain when none is configured. Region and endpoints left unset (None) are boto3's to choose,
so ``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_KINESIS`` and
``AWS_ENDPOINT_URL_DYNAMODB`` work as they do for any boto3 program.
botocore's own retries are off by default: retrying is the job of the named policies in
:mod:`kcl_daemon.retry`, and a single bounded attempt keeps a hung renewal from outliving its lease.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import boto3
import botocore.session
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import NoRegionError

from kcl_daemon.aws.credentials import is_anonymous, session_for
from kcl_daemon.aws.errors import guard_responses
from kcl_daemon.config.keys import KEYS_BY_FIELD
from kcl_daemon.config.providers import ProviderSpec, parse_providers
from kcl_daemon.errors import ConfigError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_kinesis import KinesisClient

    from kcl_daemon.config.settings import Settings

Chain = tuple[ProviderSpec, ...]


@dataclass(frozen=True, slots=True)
class ClientSettings:
    region: str | None = None  # None: boto3's (AWS_DEFAULT_REGION, ~/.aws/config)
    kinesis_endpoint: str | None = None  # None: boto3's (AWS_ENDPOINT_URL_KINESIS, AWS_ENDPOINT_URL)
    dynamodb_endpoint: str | None = None  # None: boto3's (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL)
    connect_timeout_s: float = 2.0
    read_timeout_s: float = 5.0
    max_pool_connections: int = 32  # at least the total number of threads calling AWS
    max_attempts: int = 1  # botocore's total attempts per call, the first included
    credentials: Chain | None = None  # None: boto3's default chain
    dynamodb_credentials: Chain | None = None  # None: same as credentials
    cloudwatch_credentials: Chain | None = None  # None: same as credentials
    #: a second DynamoDB client for the lease keeper, whose connect and read timeouts are this (one
    #: renewal attempt's budget, kcl_daemon.core.leases.keeping.attempt_timeout_for); None: no such client
    lease_keeper_timeout_s: float | None = None


@dataclass(frozen=True, slots=True)
class AwsClients:
    dynamodb: DynamoDBClient
    kinesis: KinesisClient
    #: the lease keeper's own DynamoDB client (short timeouts), when the settings asked for one
    lease_keeper: DynamoDBClient | None = None


def keeper_settings(settings: ClientSettings) -> ClientSettings:
    """The settings of the lease keeper's client: the same, with one attempt's timeouts."""
    timeout = settings.lease_keeper_timeout_s
    assert timeout is not None
    return replace(settings, connect_timeout_s=timeout, read_timeout_s=timeout)


def botocore_config(settings: ClientSettings, *, anonymous: bool = False) -> Config:
    config = Config(
        region_name=settings.region,
        connect_timeout=settings.connect_timeout_s,
        read_timeout=settings.read_timeout_s,
        max_pool_connections=settings.max_pool_connections,
        retries={"total_max_attempts": settings.max_attempts, "mode": "standard"},
    )
    return config.merge(Config(signature_version=UNSIGNED)) if anonymous else config


def build_clients(settings: ClientSettings) -> AwsClients:
    """One DynamoDB and one Kinesis client; share them across threads.

    Raises :class:`ConfigError` when no region is configured anywhere or a named profile is missing.
    """
    dynamodb_chain = settings.dynamodb_credentials or settings.credentials
    sessions: dict[Chain | None, boto3.session.Session] = {}

    def session(chain: Chain | None) -> boto3.session.Session:
        if chain not in sessions:
            sessions[chain] = session_for(chain, settings.region)
        return sessions[chain]

    try:
        keeper = None
        if settings.lease_keeper_timeout_s is not None:
            keeper = session(dynamodb_chain).client(
                "dynamodb",
                endpoint_url=settings.dynamodb_endpoint,
                config=botocore_config(keeper_settings(settings), anonymous=is_anonymous(dynamodb_chain)),
            )
            guard_responses(keeper)
        clients = AwsClients(
            dynamodb=session(dynamodb_chain).client(
                "dynamodb",
                endpoint_url=settings.dynamodb_endpoint,
                config=botocore_config(settings, anonymous=is_anonymous(dynamodb_chain)),
            ),
            kinesis=session(settings.credentials).client(
                "kinesis",
                endpoint_url=settings.kinesis_endpoint,
                config=botocore_config(settings, anonymous=is_anonymous(settings.credentials)),
            ),
            lease_keeper=keeper,
        )
    except NoRegionError:
        raise ConfigError(
            ["no AWS region: set regionName, or AWS_DEFAULT_REGION, or region in ~/.aws/config"]
        ) from None
    guard_responses(clients.dynamodb)
    guard_responses(clients.kinesis)
    return clients


def _chain(settings: Settings, field: str) -> Chain | None:
    raw = getattr(settings, field)
    if raw is None:
        return None
    key = KEYS_BY_FIELD[field]
    try:
        return parse_providers(raw).chain
    except ValueError as exc:
        where = settings.sources.get(key.name, "")
        raise ConfigError([f"{where}: {key.name} {exc}" if where else f"{key.name} {exc}"]) from None


def client_settings_from(settings: Settings) -> ClientSettings:
    """The AWS client settings of a loaded configuration (endpoints stay None unless configured)."""
    return ClientSettings(
        region=settings.region_name,
        kinesis_endpoint=settings.kinesis_endpoint,
        dynamodb_endpoint=settings.dynamodb_endpoint,
        credentials=_chain(settings, "aws_credentials_provider"),
        dynamodb_credentials=_chain(settings, "aws_credentials_provider_dynamodb"),
        cloudwatch_credentials=_chain(settings, "aws_credentials_provider_cloudwatch"),
    )


def boto3_defaults(environ: Mapping[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """What boto3 uses for an unset regionName / kinesisEndpoint / dynamoDBEndpoint: key -> (value, source).

    Reads the environment and the AWS config file, never the network, never a credential.
    """
    env = os.environ if environ is None else environ
    found: dict[str, tuple[str, str]] = {}
    if env.get("AWS_DEFAULT_REGION"):
        found["regionName"] = (env["AWS_DEFAULT_REGION"], "environment (AWS_DEFAULT_REGION)")
    else:
        try:
            region = botocore.session.Session().get_config_variable("region")
        except Exception:  # noqa: BLE001 - a broken config file only means "unknown" here
            region = None
        if region:
            found["regionName"] = (str(region), "AWS config file")
    if env.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() != "true":
        for key, variable in (("kinesisEndpoint", "KINESIS"), ("dynamoDBEndpoint", "DYNAMODB")):
            for name in (f"AWS_ENDPOINT_URL_{variable}", "AWS_ENDPOINT_URL"):
                if env.get(name):
                    found[key] = (env[name], f"environment ({name})")
                    break
    return found
