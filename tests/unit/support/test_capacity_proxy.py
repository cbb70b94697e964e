"""The counting proxy's accounting (bench/dynamodb_cost.py's units): what it adds to dynalite's figures."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.capacity_proxy import CapacityProxy, _sets_or_removes_owner, item_label

APP = "app"


def accounted(
    operation: str, request: dict[str, Any], status: int, response: dict[str, Any]
) -> tuple[int, float, float]:
    proxy = CapacityProxy("http://127.0.0.1:1", gsi_tables=(APP,))
    proxy._account(operation, {"TableName": APP, **request}, status, response)
    usage = proxy.snapshot()
    key = (APP, operation)
    return usage.calls[key], usage.read_units[key], usage.write_units[key]


@pytest.mark.parametrize(
    ("operation", "request_", "status", "response", "expected"),
    [
        ("GetItem", {}, 200, {"ConsumedCapacity": {"CapacityUnits": 0.5}}, (1, 0.5, 0)),
        ("GetItem", {"ConsistentRead": True}, 200, {}, (1, 1.0, 0)),  # nothing found: the minimum
        ("Scan", {}, 200, {"ConsumedCapacity": {"CapacityUnits": 12.5}}, (1, 12.5, 0)),
        ("UpdateItem", {}, 200, {"ConsumedCapacity": {"CapacityUnits": 1.0}}, (1, 0, 1.0)),
        (
            "UpdateItem",
            {},
            400,
            {"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"},
            (1, 0, 1.0),
        ),
        ("UpdateItem", {}, 400, {"__type": "ThrottlingException"}, (1, 0, 0)),
        (
            "UpdateItem",
            {
                "UpdateExpression": "SET #o = :o, leaseCounter = :c",
                "ExpressionAttributeNames": {"#o": "leaseOwner"},
            },
            200,
            {"ConsumedCapacity": {"CapacityUnits": 1.0}},
            (1, 0, 3.0),  # the owner index: old entry out, new one in
        ),
        ("UpdateItem", {"UpdateExpression": "REMOVE leaseOwner"}, 200, {}, (1, 0, 2.0)),
    ],
)
def test_units_per_call(
    operation: str,
    request_: dict[str, Any],
    status: int,
    response: dict[str, Any],
    expected: tuple[int, float, float],
) -> None:
    assert accounted(operation, request_, status, response) == expected


def test_a_renewal_does_not_touch_the_owner() -> None:
    request = {"UpdateExpression": "SET leaseCounter = :c", "ConditionExpression": "leaseOwner = :o"}
    assert _sets_or_removes_owner(request) is None
    assert _sets_or_removes_owner({"AttributeUpdates": {"leaseOwner": {"Action": "DELETE"}}}) == "remove"


def _key(name: str) -> dict[str, Any]:
    return {"Key": {"leaseKey": {"S": name}}}


@pytest.mark.parametrize(
    ("request_", "label"),
    [
        (_key("shardId-000000000007"), ""),  # a read
        (_key("123456789012:stream:1700000000:shardId-000000000007"), ""),  # multi-stream lease
        (_key("Leader"), "Leader"),
        (_key("Migration3.0"), "Migration3.0"),
        ({"Item": {"leaseKey": {"S": "TableMigration3.5"}}}, "TableMigration3.5"),
        (_key("w3"), "worker metrics"),  # a single-table worker's metrics item, keyed by its worker id
        (
            {
                "FilterExpression": "#et = :etVal",
                "ExpressionAttributeNames": {"#et": "entityType"},
                "ExpressionAttributeValues": {":etVal": {"S": "WORKER_METRIC_STATS"}},
            },
            "worker metrics",
        ),
        (
            {"IndexName": "LeaseOwnerToLeaseKeyIndex", "KeyConditionExpression": "x"},
            "LeaseOwnerToLeaseKeyIndex",
        ),
        ({"ConsistentRead": True}, ""),  # the whole table
    ],
)
def test_item_label(request_: dict[str, Any], label: str) -> None:
    assert item_label(request_) == label


def _update(expression: str, **names: str) -> dict[str, Any]:
    return {**_key("shardId-000000000001"), "UpdateExpression": expression, "ExpressionAttributeNames": names}


@pytest.mark.parametrize(
    ("request_", "label"),
    [
        (_update("SET #c = :c", **{"#c": "leaseCounter"}), "renewal"),  # ours
        (_update("SET #c = :c, #t = :t", **{"#c": "leaseCounter", "#t": "throughputKBps"}), "renewal"),
        (
            {**_key("shardId-1"), "AttributeUpdates": {"leaseCounter": {"Value": {"N": "8"}}}},
            "renewal",
        ),  # Java
        (_update("SET #c = :c, #o = :o ADD #s :one", **{"#c": "leaseCounter", "#o": "leaseOwner"}), "owner"),
        (_update("SET checkpoint = :x, leaseCounter = leaseCounter + :one"), "checkpoint"),
        (_update("SET #c = :c REMOVE #p", **{"#c": "leaseCounter", "#p": "checkpointOwner"}), "owner"),
        (_update("SET childShardIds = :k"), "other"),
        ({**_key("shardId-1"), "ConsistentRead": True}, ""),  # GetItem of a lease
    ],
)
def test_lease_updates_by_what_they_write(request_: dict[str, Any], label: str) -> None:
    assert item_label(request_) == label


def test_labels_only_lease_tables_and_only_when_asked() -> None:
    proxy = CapacityProxy("http://127.0.0.1:1", gsi_tables=(APP,), label_items=True)
    proxy._account("UpdateItem", {"TableName": APP, **_key("Leader")}, 200, {})
    proxy._account("UpdateItem", {"TableName": APP, **_key("shardId-0")}, 200, {})
    proxy._account("GetItem", {"TableName": f"{APP}-CoordinatorState", **_key("Leader")}, 200, {})
    assert dict(proxy.snapshot().calls) == {
        (APP, "UpdateItem Leader"): 1,
        (APP, "UpdateItem"): 1,
        (f"{APP}-CoordinatorState", "GetItem"): 1,
    }
    assert (
        accounted("UpdateItem", _key("Leader"), 200, {})[0] == 1
    )  # unlabelled by default: (APP, UpdateItem)
