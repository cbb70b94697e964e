"""Provisioning for local runs: create a stream and wait for it, write records, build clients with
static credentials.

Used by :mod:`kcl_daemon.local` against the embedded moto server; nothing here is specific to moto, so
it works on kinesalite or a real account too. Like the rest of :mod:`kcl_daemon.aws`, every call is
synchronous and botocore errors leave only as :mod:`kcl_daemon.errors` types.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from botocore.exceptions import ClientError

from kcl_daemon.aws.clients import AwsClients, ClientSettings, build_clients
from kcl_daemon.aws.credentials import static_session
from kcl_daemon.aws.errors import error_code, map_aws_errors
from kcl_daemon.errors import DependencyUnavailable

if TYPE_CHECKING:
    from mypy_boto3_kinesis import KinesisClient
    from mypy_boto3_kinesis.type_defs import PutRecordsRequestEntryTypeDef, StreamDescriptionSummaryTypeDef

logger = logging.getLogger(__name__)

# A stream being resharded (UPDATING) still takes reads and writes; CREATING and DELETING do not.
_USABLE_STATUSES: Final = frozenset({"ACTIVE", "UPDATING"})
MAX_PUT_RECORDS_ENTRIES: Final = 500  # the PutRecords limit per request


@dataclass(frozen=True, slots=True)
class StaticCredentials:
    """An access key pair given to the clients explicitly, never through the environment."""

    access_key_id: str
    secret_access_key: str

    def __repr__(self) -> str:
        return f"StaticCredentials(access_key_id={self.access_key_id!r}, secret_access_key='***')"


def build_clients_with_credentials(settings: ClientSettings, credentials: StaticCredentials) -> AwsClients:
    """Like :func:`kcl_daemon.aws.clients.build_clients`, but with ``credentials`` instead of boto3's
    default chain: no environment variables, shared files or instance metadata are consulted."""
    session = static_session(credentials.access_key_id, credentials.secret_access_key, None, settings.region)
    return build_clients(settings, session=session)


def close_clients(clients: AwsClients) -> None:
    """Close the clients' connection pools (botocore >= 1.33 has ``close()``)."""
    clients.kinesis.close()
    clients.dynamodb.close()
    if clients.lease_keeper is not None:
        clients.lease_keeper.close()


def _describe_stream_summary(client: KinesisClient, stream_name: str) -> StreamDescriptionSummaryTypeDef:
    with map_aws_errors(f"describe stream {stream_name}"):
        return client.describe_stream_summary(StreamName=stream_name)["StreamDescriptionSummary"]


def _create_stream(client: KinesisClient, stream_name: str, shard_count: int) -> bool:
    with map_aws_errors(f"create stream {stream_name}"):
        try:
            client.create_stream(StreamName=stream_name, ShardCount=shard_count)
        except ClientError as exc:
            if error_code(exc) != "ResourceInUseException":
                raise
            return False  # someone else created it between our describe and our create
    return True


def ensure_stream(
    client: KinesisClient,
    stream_name: str,
    shard_count: int = 4,
    wait_s: float = 30.0,
    *,
    poll_s: float = 0.05,
) -> bool:
    """Create ``stream_name`` with ``shard_count`` shards unless it exists; wait until it is usable
    (ACTIVE, or UPDATING while resharding). True if this call created it.

    Idempotent: an existing stream is used as it is, whatever its shard count (a mismatch is logged).
    Raises :class:`DependencyUnavailable` if the stream is not usable after ``wait_s`` seconds.
    """
    if shard_count < 1:
        raise ValueError(f"shard_count must be at least 1, got {shard_count}")
    created = False
    try:
        summary: StreamDescriptionSummaryTypeDef | None = _describe_stream_summary(client, stream_name)
    except DependencyUnavailable:
        summary = None
        created = _create_stream(client, stream_name, shard_count)
    deadline = time.monotonic() + wait_s
    while True:
        if summary is not None and summary.get("StreamStatus") in _USABLE_STATUSES:
            open_shards = summary.get("OpenShardCount")
            if not created and open_shards is not None and open_shards != shard_count:
                logger.warning(
                    "stream %s already exists with %s open shards (asked for %d); using it as it is",
                    stream_name,
                    open_shards,
                    shard_count,
                )
            return created
        if time.monotonic() >= deadline:
            status = None if summary is None else summary.get("StreamStatus")
            raise DependencyUnavailable(f"stream {stream_name} not ACTIVE after {wait_s}s (status {status})")
        time.sleep(poll_s)
        try:
            summary = _describe_stream_summary(client, stream_name)
        except DependencyUnavailable:
            summary = None  # just created: some backends answer ResourceNotFound for a moment


@dataclass(frozen=True, slots=True)
class PutEntry:
    """One Kinesis record to write."""

    partition_key: str
    data: bytes


class StreamWriter:
    """PutRecords into one stream (thread-safe: the boto3 client is)."""

    def __init__(self, client: KinesisClient, stream_name: str) -> None:
        self._client = client
        self.stream_name = stream_name

    def put_records(self, entries: Sequence[PutEntry]) -> list[int]:
        """Write up to 500 entries in one PutRecords call; return the indices of the entries that failed
        (throttled or an internal failure), which the caller may send again. Whole-call failures raise
        the mapped :class:`kcl_daemon.errors.AwsError`."""
        if not entries:
            return []
        if len(entries) > MAX_PUT_RECORDS_ENTRIES:
            raise ValueError(f"at most {MAX_PUT_RECORDS_ENTRIES} entries per PutRecords, got {len(entries)}")
        request: list[PutRecordsRequestEntryTypeDef] = [
            {"PartitionKey": entry.partition_key, "Data": entry.data} for entry in entries
        ]
        with map_aws_errors(f"put records into stream {self.stream_name}"):
            response = self._client.put_records(StreamName=self.stream_name, Records=request)
        if not response.get("FailedRecordCount"):
            return []
        return [index for index, result in enumerate(response["Records"]) if result.get("ErrorCode")]
