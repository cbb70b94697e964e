"""Fixtures of the leader-mode integration tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.single_table import legacy_table_names


@pytest.fixture
def legacy_names(aws_clients: AwsClients, lease_table: DynamoLeaseTable) -> Iterator[tuple[str, str]]:
    """The lease table's coordinator-state and worker-metrics table names, deleted afterwards."""
    names = legacy_table_names(lease_table.table_name)
    yield names
    for name in names:
        with contextlib.suppress(ClientError):
            aws_clients.dynamodb.delete_table(TableName=name)
