"""The Spark source's AWS adapters, from its options (clients are cached per process in ``aws``)."""

from __future__ import annotations

from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.aws.source_clients import Credentials as ClientCredentials
from kcl_daemon.aws.source_clients import kinesis_for as _kinesis_for
from kcl_daemon.aws.source_clients import lease_table_for as _lease_table_for
from kcl_daemon.spark.options import SourceOptions


def _credentials(options: SourceOptions) -> ClientCredentials:
    c = options.credentials
    return ClientCredentials(c.access_key_id, c.secret_key, c.session_token, c.profile, c.provider_chain)


def kinesis_for(options: SourceOptions) -> Kinesis:
    """The project's Kinesis adapter over this process's client for ``options``."""
    return _kinesis_for(options.region, options.endpoint_url, _credentials(options))


def lease_table_for(options: SourceOptions) -> DynamoLeaseTable:
    """The project's lease-table adapter for ``leaseTableName`` (its own region/endpoint if set)."""
    if options.lease_table_name is None:
        raise ValueError("no leaseTableName")
    return _lease_table_for(
        options.lease_table_name,
        options.lease_table_region or options.region,
        options.lease_table_endpoint_url or options.endpoint_url,
        _credentials(options),
    )
