"""Reading several leases at once (BatchGetItem), against moto_server and against kinesalite + dynalite."""

from __future__ import annotations

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import CorruptLeaseItem
from kcl_daemon.core.sequence import TRIM_HORIZON

pytestmark = pytest.mark.integration


def test_get_leases_reads_more_than_one_batch_and_reports_each_key(
    lease_table: DynamoLeaseTable, aws_clients: AwsClients
) -> None:
    keys = [f"shardId-{index:012d}" for index in range(130)]  # two BatchGetItem calls
    for key in keys:
        assert lease_table.create_lease(Lease(key, TRIM_HORIZON))
    table = lease_table.table_name
    aws_clients.dynamodb.put_item(
        TableName=table, Item={"leaseKey": {"S": "shardId-corrupt"}, "leaseCounter": {"S": "x"}}
    )
    aws_clients.dynamodb.put_item(
        TableName=table, Item={"leaseKey": {"S": "Leader"}, "entityType": {"S": "LEADER"}}
    )

    found = lease_table.get_leases(
        [*keys, "shardId-missing", "shardId-corrupt", "Leader", keys[0]], consistent=True
    )

    assert [found[key].lease_key for key in keys] == keys  # type: ignore[union-attr]
    assert found["shardId-missing"] is None and found["Leader"] is None
    assert isinstance(found["shardId-corrupt"], CorruptLeaseItem)
    assert len(found) == len(keys) + 3
