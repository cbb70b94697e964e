"""botocore events -> the DynamoDB/Kinesis call, error and throttle counters (stubbed client)."""

from __future__ import annotations

import boto3  # noqa: TID251 - a stubbed client, no network
import pytest
from botocore.stub import Stubber  # noqa: TID251

from kcl_daemon.aws.instrument import instrument
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
