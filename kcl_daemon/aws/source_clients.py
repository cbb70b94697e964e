"""boto3 clients for the Spark source, cached per process and looked up by plain settings.

The Spark source runs in several processes (the driver's source runner, planners, executor workers),
and its reader objects are pickled between them: clients are never attributes, they are looked up
here by their settings. Static keys, a named profile or the daemon's provider-chain syntax
(``awsCredentialsProvider``) select the credentials; nothing set means boto3's default chain.
botocore's own retries stay off, as everywhere in the project: the named policies retry.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import boto3
from botocore.exceptions import NoRegionError, ProfileNotFound

from kcl_daemon.aws.batch_ends import LeaseItemEnds, MetadataTableEnds
from kcl_daemon.aws.clients import ClientSettings, botocore_config
from kcl_daemon.aws.credentials import is_anonymous, session_for
from kcl_daemon.aws.errors import guard_responses
from kcl_daemon.aws.fanout import Fanout
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.config.providers import parse_providers
from kcl_daemon.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Credentials:
    """Where a client's credentials come from; nothing set means boto3's default chain."""

    access_key_id: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    profile: str | None = None
    provider_chain: str | None = field(default=None, repr=False)  # the AWSCredentialsProvider syntax


@dataclass(frozen=True, slots=True)
class _Key:
    service: str
    region: str | None
    endpoint: str | None
    credentials: Credentials


_lock = threading.Lock()
_clients: dict[_Key, object] = {}
#: One session per credentials and region: the Kinesis and DynamoDB clients of a process share its
#: loaded endpoint and partition data (the second client then costs about 10 ms instead of 60).
_sessions: dict[tuple[Credentials, str | None], tuple[boto3.session.Session, bool]] = {}


def _session(credentials: Credentials, region: str | None) -> tuple[boto3.session.Session, bool]:
    if credentials.access_key_id is not None:
        session = boto3.session.Session(
            aws_access_key_id=credentials.access_key_id,
            aws_secret_access_key=credentials.secret_key,
            aws_session_token=credentials.session_token,
            region_name=region,
        )
        return session, False
    if credentials.profile is not None:
        return boto3.session.Session(profile_name=credentials.profile, region_name=region), False
    if credentials.provider_chain is not None:
        try:
            chain = parse_providers(credentials.provider_chain).chain
        except ValueError as exc:
            raise ConfigError([f"kinesis source: option awsCredentialsProvider {exc}"]) from None
        return session_for(chain, region), is_anonymous(chain)
    return session_for(None, region), False


def _raw_timestamps(session: boto3.session.Session) -> boto3.session.Session:
    """Leave timestamps as the epoch seconds the service sent: botocore's default parser builds a
    ``tzlocal`` datetime per record, which costs more than the rest of a GetRecords page together.
    :func:`kcl_daemon.aws.kinesis.epoch_millis` takes either form."""
    core = session._session
    factory = core.get_component("response_parser_factory")
    factory.set_parser_defaults(timestamp_parser=lambda value: value)
    return session


def _client(key: _Key) -> object:
    with _lock:
        if key not in _clients:
            settings = ClientSettings(region=key.region, read_timeout_s=10.0, max_pool_connections=64)
            try:
                made = _sessions.get((key.credentials, key.region))
                if made is None:
                    made = _sessions[(key.credentials, key.region)] = _session(key.credentials, key.region)
                session, anonymous = made
                client = _raw_timestamps(session).client(
                    key.service,  # type: ignore[call-overload]
                    endpoint_url=key.endpoint,
                    config=botocore_config(settings, anonymous=anonymous),
                )
                guard_responses(client)
                _clients[key] = client
            except NoRegionError:
                raise ConfigError(
                    ["kinesis source: no AWS region: set option region, or AWS_DEFAULT_REGION"]
                ) from None
            except ProfileNotFound as exc:
                raise ConfigError([f"kinesis source: option profile: {exc}"]) from None
        return _clients[key]


def kinesis_for(region: str | None, endpoint: str | None, credentials: Credentials) -> Kinesis:
    """The project's Kinesis adapter over this process's client for these settings."""
    return Kinesis(_client(_Key("kinesis", region, endpoint, credentials)))  # type: ignore[arg-type]


def lease_table_for(
    table_name: str, region: str | None, endpoint: str | None, credentials: Credentials
) -> DynamoLeaseTable:
    """The project's lease-table adapter for ``table_name``."""
    key = _Key("dynamodb", region, endpoint, credentials)
    return DynamoLeaseTable(_client(key), table_name)  # type: ignore[arg-type]


def fanout_for(region: str | None, endpoint: str | None, credentials: Credentials) -> Fanout:
    """The project's enhanced fan-out adapter over this process's Kinesis client."""
    return Fanout(_client(_Key("kinesis", region, endpoint, credentials)))  # type: ignore[arg-type]


def lease_item_ends_for(
    table_name: str, region: str | None, endpoint: str | None, credentials: Credentials
) -> LeaseItemEnds:
    """Batch ends published on the lease items of ``table_name``."""
    return LeaseItemEnds(_client(_Key("dynamodb", region, endpoint, credentials)), table_name)  # type: ignore[arg-type]


def metadata_ends_for(
    table_name: str, region: str | None, endpoint: str | None, credentials: Credentials
) -> MetadataTableEnds:
    """Batch ends published in the source's own metadata table ``table_name``."""
    return MetadataTableEnds(_client(_Key("dynamodb", region, endpoint, credentials)), table_name)  # type: ignore[arg-type]
