"""The lean path's DynamoDB items: a reply's attribute values read exactly as botocore's parser reads
them (binary values as bytes, at any depth), and only parameters that need no conversion go lean."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import boto3  # noqa: TID251 - the reference parse
import pytest
from botocore.parsers import create_parser  # noqa: TID251

from kcl_daemon.aws.lean.dynamodb import item_from_wire, wire_safe

_MODEL = (
    boto3.session.Session(region_name="us-east-1").client("dynamodb").meta.service_model
).operation_model("UpdateItem")

B64 = base64.b64encode(b"\x00state\xff").decode()
ITEM = {
    "leaseKey": {"S": "shardId-000000000001"},
    "leaseCounter": {"N": "42"},
    "pendingCheckpointState": {"B": B64},
    "childShardIds": {"SS": ["shardId-2", "shardId-3"]},
    "sizes": {"NS": ["1", "2.5"]},
    "blobs": {"BS": [B64, base64.b64encode(b"").decode()]},
    "nested": {"M": {"b": {"B": B64}, "l": {"L": [{"B": B64}, {"S": "x"}, {"M": {"z": {"NULL": True}}}]}}},
    "flag": {"BOOL": False},
    "nothing": {"NULL": True},
}


def test_a_reply_item_reads_as_botocore_reads_it() -> None:
    body = json.dumps({"Attributes": ITEM}).encode()
    parsed = create_parser("json").parse(
        {"status_code": 200, "headers": {}, "body": body}, _MODEL.output_shape
    )
    assert item_from_wire(json.loads(body)["Attributes"]) == parsed["Attributes"]


@pytest.mark.parametrize(
    ("params", "safe"),
    [
        ({"TableName": "t", "Key": {"k": {"S": "v"}}, "ExpressionAttributeValues": {":n": {"N": "1"}}}, True),
        ({"ExpressionAttributeValues": {":s": {"SS": ["a", "b"]}}, "ReturnValues": "ALL_NEW"}, True),
        ({"ExpressionAttributeValues": {":b": {"B": b"bytes"}}}, False),
        ({"ExpressionAttributeValues": {":b": {"BOOL": True}, ":l": {"L": [{"N": "1"}]}}}, True),
        ({"Limit": 1.5}, False),
        ({"When": datetime(2026, 1, 1, tzinfo=UTC)}, False),
        ({"ExpressionAttributeValues": {":ss": {"SS": {"a"}}}}, False),
    ],
)
def test_only_parameters_in_their_wire_form_go_lean(params: dict[str, object], safe: bool) -> None:
    assert wire_safe(params) is safe
