"""AWS clients for the Spark source, cached per process and looked up by plain settings.

The Spark source runs in several processes (the driver's source runner, planners, executor workers),
and its reader objects are pickled between them: clients are never attributes, they are looked up
here by their settings. Static keys, a named profile or the daemon's provider-chain syntax
(``awsCredentialsProvider``) select the credentials; nothing set means boto3's default chain.
Each client is made by the project's factory (:func:`kcl_daemon.aws.clients.make_client`): botocore's
own retries stay off, as everywhere in the project (the named policies retry), and timestamps are left
as the epoch seconds the service sent.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace

from kcl_daemon.aws.batch_ends import LeaseItemEnds, MetadataTableEnds
from kcl_daemon.aws.clients import ClientSettings, make_client
from kcl_daemon.aws.credentials import Session, is_anonymous, profile_session, session_for, static_session
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
_sessions: dict[tuple[Credentials, str | None], tuple[Session, bool]] = {}
#: the source's clients: a longer read timeout than the worker's, more connections (executor threads)
_SETTINGS = ClientSettings(read_timeout_s=10.0, max_pool_connections=64)
_REGION_HINT = "set option region, or AWS_DEFAULT_REGION"


def _session(credentials: Credentials, region: str | None) -> tuple[Session, bool]:
    if credentials.access_key_id is not None:
        assert credentials.secret_key is not None
        session = static_session(
            credentials.access_key_id, credentials.secret_key, credentials.session_token, region
        )
        return session, False
    if credentials.profile is not None:
        try:
            return profile_session(credentials.profile, region), False
        except ConfigError as exc:
            raise ConfigError([f"kinesis source: option {problem}" for problem in exc.problems]) from None
    if credentials.provider_chain is not None:
        try:
            chain = parse_providers(credentials.provider_chain).chain
        except ValueError as exc:
            raise ConfigError([f"kinesis source: option awsCredentialsProvider {exc}"]) from None
        return session_for(chain, region), is_anonymous(chain)
    return session_for(None, region), False


def _client(key: _Key) -> object:
    with _lock:
        if key not in _clients:
            made = _sessions.get((key.credentials, key.region))
            if made is None:
                made = _sessions[(key.credentials, key.region)] = _session(key.credentials, key.region)
            session, anonymous = made
            try:
                _clients[key] = make_client(
                    replace(_SETTINGS, region=key.region),
                    key.service,
                    endpoint=key.endpoint,
                    session=session,
                    anonymous=anonymous,
                    raw_timestamps=True,
                    region_hint=_REGION_HINT,
                )
            except ConfigError as exc:
                raise ConfigError([f"kinesis source: {problem}" for problem in exc.problems]) from None
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
