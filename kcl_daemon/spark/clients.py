"""The Spark source's and sink's AWS adapters, from their options (clients are cached per process in
``aws.source_clients``, never pickled)."""

from __future__ import annotations

from kcl_daemon.aws import source_clients
from kcl_daemon.aws.batch_ends import BatchEnds, MetadataTableEnds
from kcl_daemon.aws.fanout import Fanout
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.lease_table import DynamoLeaseTable
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
    return (
        options.dynamodb_region or options.region,
        options.dynamodb_endpoint_url or options.endpoint_url,
        _credentials(options.credentials),
    )


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
