"""boto3 clients: the project's one client factory, :func:`make_client` (boto3 sessions are not
thread-safe; clients are, so each is built once and shared).

Credentials come from the configured provider chain (:mod:`kcl_daemon.aws.credentials`), or boto3's
default chain when none is configured. Region and endpoints left unset (None) are boto3's to choose,
so ``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_KINESIS`` and
``AWS_ENDPOINT_URL_DYNAMODB`` work as they do for any boto3 program.
botocore's own retries are off by default: retrying is the job of the named policies in
:mod:`kcl_daemon.retry`, and a single bounded attempt keeps a hung renewal from outliving its lease.

Every client of the daemon is made by :func:`make_client` from :class:`ClientSettings`: the worker's
(:func:`build_clients`), the operator commands', the local backend's (with its own static credentials),
CloudWatch's, the dead-letter destinations', STS for doctor, and the Spark source's (per-process cache
in :mod:`kcl_daemon.spark.source_clients`). The one exception is the STS client inside the
``ASSUME_ROLE`` credential provider (:mod:`kcl_daemon.aws.credentials`), which keeps botocore's own
retries as part of resolving credentials.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Literal, overload

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
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_kinesis import KinesisClient

    from kcl_daemon.config.settings import Settings

Chain = tuple[ProviderSpec, ...]


@dataclass(frozen=True, slots=True)
class ClientSettings:
    region: str | None = None  # None: boto3's (AWS_DEFAULT_REGION, ~/.aws/config)
    kinesis_endpoint: str | None = None  # None: boto3's (AWS_ENDPOINT_URL_KINESIS, AWS_ENDPOINT_URL)
    dynamodb_endpoint: str | None = None  # None: boto3's (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL)
    cloudwatch_endpoint: str | None = None  # None: boto3's (AWS_ENDPOINT_URL_CLOUDWATCH, AWS_ENDPOINT_URL)
    connect_timeout_s: float = 2.0
    #: None: each service's own (:func:`read_timeout_for`); a number: that, for every service
    read_timeout_s: float | None = None
    max_pool_connections: int = 32  # at least the total number of threads calling AWS
    max_attempts: int = 1  # botocore's total attempts per call, the first included
    credentials: Chain | None = None  # None: boto3's default chain
    dynamodb_credentials: Chain | None = None  # None: same as credentials
    cloudwatch_credentials: Chain | None = None  # None: same as credentials
    #: a second DynamoDB client for the lease keeper, whose connect and read timeouts are this (one
    #: renewal attempt's budget, kcl_daemon.core.leases.timings.attempt_timeout_for); None: no such client
    lease_keeper_timeout_s: float | None = None


@dataclass(frozen=True, slots=True)
class AwsClients:
    dynamodb: DynamoDBClient
    kinesis: KinesisClient
    #: the enhanced fan-out reader's Kinesis client (:func:`subscription_settings`), when it reads
    subscriptions: KinesisClient | None = None
    #: the lease keeper's own DynamoDB client (short timeouts), when the settings asked for one
    lease_keeper: DynamoDBClient | None = None


def keeper_settings(settings: ClientSettings) -> ClientSettings:
    """The settings of the lease keeper's client: the same, with one attempt's timeouts."""
    timeout = settings.lease_keeper_timeout_s
    assert timeout is not None
    return replace(settings, connect_timeout_s=timeout, read_timeout_s=timeout)


#: The read timeout of the Kinesis client when none is set: the Java KCL's request timeout for polling
#: (30 s, docs/contract/polling.md §7.1). A loaded endpoint that answers a GetRecords call late still
#: answers it; a read abandoned after a few seconds is asked again on a new connection, so the endpoint
#: does the work twice and falls further behind (a 256-shard emulator past 5 s did exactly that).
KINESIS_READ_TIMEOUT_S: Final = 30.0
#: Every other service's (DynamoDB, CloudWatch, STS): within the ``lease_io`` policy's 4 s budget and
#: ``startup_item``'s, so that one attempt never outlives the policy that retries it. The lease keeper's
#: client has its own, one attempt's budget (:func:`keeper_settings`).
READ_TIMEOUT_S: Final = 5.0


def subscription_settings(settings: ClientSettings) -> ClientSettings:
    """The settings of the client that holds SubscribeToShard streams open: the Kinesis client's, but
    with the other services' read timeout unless one is set. A subscription silent that long (an idle
    shard) ends and is renewed, and a fan-out reader that stops waits for its stream's blocked read to
    end: closing the stream from another thread does not wake that read before its timeout."""
    if settings.read_timeout_s is not None:
        return settings
    return replace(settings, read_timeout_s=READ_TIMEOUT_S)


def read_timeout_for(settings: ClientSettings, service: str) -> float:
    """The read timeout of ``service``'s client: the settings' when set, else the service's default."""
    if settings.read_timeout_s is not None:
        return settings.read_timeout_s
    return KINESIS_READ_TIMEOUT_S if service == "kinesis" else READ_TIMEOUT_S


def botocore_config(settings: ClientSettings, service: str = "", *, anonymous: bool = False) -> Config:
    config = Config(
        region_name=settings.region,
        connect_timeout=settings.connect_timeout_s,
        read_timeout=read_timeout_for(settings, service),
        max_pool_connections=settings.max_pool_connections,
        retries={"total_max_attempts": settings.max_attempts, "mode": "standard"},
    )
    return config.merge(Config(signature_version=UNSIGNED)) if anonymous else config


#: what a missing region's error tells the user to set (the daemon's keys)
REGION_HINT: Final = "set regionName, or AWS_DEFAULT_REGION, or region in ~/.aws/config"


def endpoint_for(settings: ClientSettings, service: str) -> str | None:
    """The configured endpoint of ``service`` (None: boto3's)."""
    endpoints = {
        "kinesis": settings.kinesis_endpoint,
        "dynamodb": settings.dynamodb_endpoint,
        "cloudwatch": settings.cloudwatch_endpoint,
    }
    return endpoints.get(service)


def chain_for(settings: ClientSettings, service: str) -> Chain | None:
    """The credential provider chain of ``service`` (None: boto3's default chain)."""
    if service == "dynamodb":
        return settings.dynamodb_credentials or settings.credentials
    if service == "cloudwatch":
        return settings.cloudwatch_credentials or settings.credentials
    return settings.credentials


@overload
def make_client(
    settings: ClientSettings,
    service: Literal["dynamodb"],
    *,
    endpoint: str | None = ...,
    session: boto3.session.Session | None = ...,
    anonymous: bool | None = ...,
    guard: bool = ...,
    raw_timestamps: bool = ...,
    region_hint: str = ...,
) -> DynamoDBClient: ...
@overload
def make_client(
    settings: ClientSettings,
    service: Literal["kinesis"],
    *,
    endpoint: str | None = ...,
    session: boto3.session.Session | None = ...,
    anonymous: bool | None = ...,
    guard: bool = ...,
    raw_timestamps: bool = ...,
    region_hint: str = ...,
) -> KinesisClient: ...
@overload
def make_client(
    settings: ClientSettings,
    service: Literal["cloudwatch"],
    *,
    endpoint: str | None = ...,
    session: boto3.session.Session | None = ...,
    anonymous: bool | None = ...,
    guard: bool = ...,
    raw_timestamps: bool = ...,
    region_hint: str = ...,
) -> CloudWatchClient: ...
@overload
def make_client(
    settings: ClientSettings,
    service: str,
    *,
    endpoint: str | None = ...,
    session: boto3.session.Session | None = ...,
    anonymous: bool | None = ...,
    guard: bool = ...,
    raw_timestamps: bool = ...,
    region_hint: str = ...,
) -> Any: ...
def make_client(
    settings: ClientSettings,
    service: str,
    *,
    endpoint: str | None = None,
    session: boto3.session.Session | None = None,
    anonymous: bool | None = None,
    guard: bool = True,
    raw_timestamps: bool = False,
    region_hint: str = REGION_HINT,
) -> Any:
    """A boto3 client of ``service`` with the settings' region, timeouts, pool size and attempts (one:
    botocore's retries off), at ``endpoint`` (None: the settings' endpoint of that service, else boto3's).

    ``session`` (None: one for the service's credential chain) and ``anonymous`` (None: whether that
    chain is ANONYMOUS) let a caller share a session or bring its own credentials. ``guard`` makes the
    client refuse a truncated or corrupt 2xx reply (:func:`~kcl_daemon.aws.errors.guard_responses`);
    ``raw_timestamps`` leaves timestamps as the epoch seconds the service sent (the session's parser
    is changed: give such clients a session of their own).

    Raises :class:`ConfigError` when no region is configured anywhere (saying ``region_hint``).
    """
    try:
        if session is None:
            chain = chain_for(settings, service)
            session = session_for(chain, settings.region)
            if anonymous is None:
                anonymous = is_anonymous(chain)
        if raw_timestamps:
            _raw_timestamps(session)
        config = botocore_config(settings, service, anonymous=bool(anonymous))
        client = session.client(
            service,  # type: ignore[call-overload]
            endpoint_url=endpoint if endpoint is not None else endpoint_for(settings, service),
            config=config,
        )
    except NoRegionError:
        raise ConfigError([f"no AWS region: {region_hint}"]) from None
    if guard:
        guard_responses(client)
    return client


def _raw_timestamps(session: boto3.session.Session) -> None:
    """Leave timestamps as the epoch seconds the service sent: botocore's default parser builds a
    ``tzlocal`` datetime per record, which costs more than the rest of a GetRecords page together.
    :func:`kcl_daemon.aws.kinesis.epoch_millis` takes either form."""
    factory = session._session.get_component("response_parser_factory")
    factory.set_parser_defaults(timestamp_parser=lambda value: value)


def build_clients(
    settings: ClientSettings, *, session: boto3.session.Session | None = None, subscriptions: bool = False
) -> AwsClients:
    """One DynamoDB and one Kinesis client (and the lease keeper's, when asked for; and with
    ``subscriptions`` the fan-out reader's, :func:`subscription_settings`); share them across threads.
    ``session``: credentials of the caller's (the local backend's static keys) instead of the settings'
    chains.

    Raises :class:`ConfigError` when no region is configured anywhere or a named profile is missing.
    """
    sessions: dict[Chain | None, boto3.session.Session] = {}

    def made(service: str) -> tuple[boto3.session.Session, bool]:
        if session is not None:
            return session, False
        chain = chain_for(settings, service)
        if chain not in sessions:
            sessions[chain] = session_for(chain, settings.region)
        return sessions[chain], is_anonymous(chain)

    dynamodb_session, dynamodb_anonymous = made("dynamodb")
    kinesis_session, kinesis_anonymous = made("kinesis")
    keeper = None
    if settings.lease_keeper_timeout_s is not None:
        keeper = make_client(
            keeper_settings(settings), "dynamodb", session=dynamodb_session, anonymous=dynamodb_anonymous
        )
    fanout = None
    if subscriptions:
        fanout = make_client(
            subscription_settings(settings), "kinesis", session=kinesis_session, anonymous=kinesis_anonymous
        )
    return AwsClients(
        dynamodb=make_client(settings, "dynamodb", session=dynamodb_session, anonymous=dynamodb_anonymous),
        kinesis=make_client(settings, "kinesis", session=kinesis_session, anonymous=kinesis_anonymous),
        subscriptions=fanout,
        lease_keeper=keeper,
    )


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
        cloudwatch_endpoint=settings.cloudwatch_endpoint,
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
