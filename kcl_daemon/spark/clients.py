"""The Spark source's and sink's AWS adapters, from their options (clients are cached per process in
``spark.source_clients``, never pickled)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kcl_daemon.aws.batch_ends import BatchEnds, MetadataTableEnds
from kcl_daemon.aws.fanout import Fanout
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.errors import AwsError, ConfigError, LeaseConflict, Throttled
from kcl_daemon.spark import source_clients
from kcl_daemon.spark.options import Credentials, SinkOptions, SourceOptions


def _credentials(c: Credentials) -> source_clients.Credentials:
    return source_clients.Credentials(
        c.access_key_id, c.secret_key, c.session_token, c.profile, c.provider_chain
    )


def kinesis_for(options: SourceOptions | SinkOptions) -> Kinesis:
    """The project's Kinesis adapter over this process's client for ``options``."""
    return source_clients.kinesis_for(options.region, options.endpoint_url, _credentials(options.credentials))


def fanout_for(options: SourceOptions) -> Fanout:
    """The enhanced fan-out adapter over the same Kinesis client."""
    return source_clients.fanout_for(options.region, options.endpoint_url, _credentials(options.credentials))


def _dynamodb(options: SourceOptions) -> tuple[str | None, str | None, source_clients.Credentials]:
    """The DynamoDB client's settings: ``endpointUrl`` is Kinesis' alone (a Kinesis VPC endpoint or an
    emulator serving only Kinesis must never receive table calls), so no ``dynamoDbEndpointUrl`` means
    DynamoDB's own endpoint in ``dynamoDbRegion`` (default ``region``)."""
    return (
        options.dynamodb_region or options.region,
        options.dynamodb_endpoint_url,
        _credentials(options.credentials),
    )


def _where_dynamodb(options: SourceOptions) -> str:
    if options.dynamodb_endpoint_url is not None:
        return f"{options.dynamodb_endpoint_url} (dynamoDbEndpointUrl)"
    region = options.dynamodb_region or options.region
    return f"DynamoDB's own endpoint in {region or 'the default region'} (no dynamoDbEndpointUrl set)"


@contextmanager
def reaching_table(options: SourceOptions, table: str) -> Iterator[None]:
    """Name the options that say where ``table`` is when the block cannot reach it: a non-retriable
    failure becomes a :class:`ConfigError`, a retriable one keeps its class with the same advice. Lease
    conflicts and throttling pass unchanged: they prove the table is there."""
    try:
        yield
    except (LeaseConflict, Throttled):
        raise
    except AwsError as exc:
        advice = (
            f"kinesis source: table {table} could not be reached at {_where_dynamodb(options)}: {exc}. "
            "Set option dynamoDbEndpointUrl (and dynamoDbRegion if it is not region) to the DynamoDB "
            "endpoint that holds it; endpointUrl is for Kinesis only"
        )
        if exc.retriable:
            raise type(exc)(advice) from exc
        raise ConfigError([advice]) from exc


def lease_table_for(options: SourceOptions) -> DynamoLeaseTable:
    """The project's lease-table adapter for ``leaseTableName``."""
    if options.lease_table_name is None:
        raise ValueError("no leaseTableName")
    return source_clients.lease_table_for(options.lease_table_name, *_dynamodb(options))


def batch_ends_for(options: SourceOptions) -> BatchEnds:
    """Where executors publish their ends: the lease items with ``leaseTableName``, else the metadata
    table."""
    if options.lease_table_name is not None:
        return source_clients.lease_item_ends_for(options.lease_table_name, *_dynamodb(options))
    return metadata_table_for(options)


def metadata_table_for(options: SourceOptions) -> MetadataTableEnds:
    return source_clients.metadata_ends_for(options.metadata_table_name, *_dynamodb(options))
