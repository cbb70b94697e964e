"""Doctor's harmless IAM tries (kcl_daemon.aws.probes) against botocore's Stubber: a denied call is
'denied', a conditional write that fails its condition is 'allowed' (nothing written), a missing table is
'allowed', and anything else is an 'error' with the service's words."""

from __future__ import annotations

import boto3  # noqa: TID251 - a stubbed client, no network
import pytest
from botocore.stub import Stubber  # noqa: TID251

from kcl_daemon.aws import probes


@pytest.fixture
def dynamodb() -> object:
    return boto3.session.Session(
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="y",  # noqa: S106 - a stub
    ).client("dynamodb")


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        ("AccessDeniedException", "denied"),
        ("ConditionalCheckFailedException", "allowed"),
        ("ResourceNotFoundException", "allowed"),
        ("ValidationException", "error"),
    ],
)
def test_a_conditional_write_tells_the_permission(dynamodb: object, code: str, outcome: str) -> None:
    with Stubber(dynamodb) as stub:
        stub.add_client_error(
            "put_item",
            service_error_code=code,
            service_message="said the service",
            expected_params={
                "TableName": "app",
                "Item": {"leaseKey": {"S": probes.PROBE_KEY}},
                "ConditionExpression": "attribute_exists(#k)",
                "ExpressionAttributeNames": {"#k": "leaseKey"},
            },
        )
        tried = probes.try_dynamodb(dynamodb, "PutItem", "app", "leaseKey")  # type: ignore[arg-type]
    assert tried is not None and tried.outcome == outcome
    assert code in tried.detail


def test_a_read_that_succeeds_is_allowed_and_untriable_actions_are_none(dynamodb: object) -> None:
    with Stubber(dynamodb) as stub:
        stub.add_response("scan", {"Items": []}, {"TableName": "app", "Limit": 1})
        assert probes.try_dynamodb(dynamodb, "Scan", "app", "leaseKey") == probes.Tried("allowed")  # type: ignore[arg-type]
    assert probes.try_dynamodb(dynamodb, "CreateTable", "app", "leaseKey") is None  # type: ignore[arg-type]
