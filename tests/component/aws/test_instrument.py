"""botocore events -> the DynamoDB/Kinesis call, error and throttle counters, and one table's contact (the
readiness check's): stubbed clients."""

from __future__ import annotations

import boto3  # noqa: TID251 - a stubbed client, no network
import pytest
from botocore.stub import Stubber  # noqa: TID251

from kcl_daemon.aws.instrument import TableContact, instrument, watch_table
from kcl_daemon.metrics.registry import DaemonMetrics


def test_calls_errors_and_throttles_are_counted_by_operation() -> None:
    metrics = DaemonMetrics(process_metrics=False)
    session = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="y")  # noqa: S106
    client = session.client("kinesis", region_name="us-east-1")
    instrument(client, "kinesis", metrics)
    with Stubber(client) as stub:
        stub.add_response("list_streams", {"StreamNames": [], "HasMoreStreams": False})
        stub.add_client_error("list_streams", "ProvisionedThroughputExceededException")
        stub.add_client_error("list_streams", "InternalFailure", http_status_code=500)
        client.list_streams()
        for _ in range(2):
            with pytest.raises(client.exceptions.ClientError):
                client.list_streams()
    counted = {(s.family, s.value) for s in metrics.snapshot() if s.family.startswith("kcl_aws")}
    assert counted == {("kcl_aws_calls", 3), ("kcl_aws_errors", 2), ("kcl_aws_throttles", 1)}


def test_table_contact_follows_the_answers_of_one_table() -> None:
    now = [100.0]
    contact = TableContact("leases", monotonic=lambda: now[0])
    session = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="y")  # noqa: S106
    client = session.client("dynamodb", region_name="us-east-1")
    watch_table(client, contact)
    key = {"leaseKey": {"S": "k"}}
    with Stubber(client) as stub:
        stub.add_client_error("get_item", "InternalServerError", http_status_code=500)
        stub.add_client_error("get_item", "ResourceNotFoundException")
        stub.add_response("get_item", {})  # another table: not this contact's business
        stub.add_client_error("update_item", "ConditionalCheckFailedException")  # an answer
        with pytest.raises(client.exceptions.ClientError):
            client.get_item(TableName="leases", Key=key)
        assert contact.failing_for(now[0]) == 0.0 and "InternalServerError" in (contact.last_error or "")
        now[0] = 103.0
        with pytest.raises(client.exceptions.ClientError):
            client.get_item(TableName="leases", Key=key)
        assert contact.failing_for(now[0]) == 3.0 and "does not exist" in (contact.last_error or "")
        client.get_item(TableName="other", Key=key)
        assert contact.failing_for(now[0]) == 3.0
        with pytest.raises(client.exceptions.ClientError):
            client.update_item(
                TableName="leases",
                Key=key,
                UpdateExpression="SET a = :a",
                ExpressionAttributeValues={":a": {"S": "b"}},
            )
    assert contact.failing_for(now[0]) is None and contact.last_error is None
