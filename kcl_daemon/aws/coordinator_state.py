"""KCL 3.x coordinator state: the ``Leader`` lock and ``Migration3.0`` items (contract §3.5-3.7).

KCL 3.0-3.4 keep both items in ``<applicationName>-CoordinatorState`` (partition key ``key``); KCL 3.5
applications created without that table keep them in the lease table (partition key ``leaseKey``, with
an ``entityType``). :func:`locate` picks the place the fleet already uses, so a kcl-daemon worker and a
Java worker always read and write the same items: the coordinator table if it exists, else the lease
table if it already holds ``Migration3.0``, else the coordinator table, created (what Java 3.0-3.4 does).

Every write is a single conditional PutItem / UpdateItem / DeleteItem; a failed condition raises
:class:`~kcl_daemon.errors.LeaseConflict`. Values are plain Python (str, int, bool, list, dict, bytes);
numbers read back as ``int`` or ``float``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from kcl_daemon.aws.errors import error_code, map_aws_errors
from kcl_daemon.errors import DependencyUnavailable
from kcl_daemon.retry import LEASE_IO, STARTUP

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

logger = logging.getLogger(__name__)

COORDINATOR_KEY: Final = "key"
LEASE_TABLE_KEY: Final = "leaseKey"
ENTITY_TYPE: Final = "entityType"

_SER = TypeSerializer()
_DESER = TypeDeserializer()


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, set):
        return {_plain(v) for v in value}
    if hasattr(value, "value") and isinstance(getattr(value, "value", None), bytes):
        return value.value  # boto3 Binary
    return value


def _typed(value: Any) -> dict[str, Any]:
    if isinstance(value, float):
        value = Decimal(repr(value))
    elif isinstance(value, list):
        return {"L": [_typed(v) for v in value]}
    elif isinstance(value, dict):
        return {"M": {k: _typed(v) for k, v in value.items()}}
    return dict(_SER.serialize(value))


def decode_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A low-level item as plain values."""
    return {name: _plain(_DESER.deserialize(value)) for name, value in item.items()}


class CoordinatorStore:
    """Conditional single-item access to one coordinator-state location (table + partition key name)."""

    def __init__(self, client: DynamoDBClient, table_name: str, key_name: str = COORDINATOR_KEY) -> None:
        self._client = client
        self.table_name = table_name
        self.key_name = key_name

    @property
    def in_lease_table(self) -> bool:
        return self.key_name == LEASE_TABLE_KEY

    # -- table -----------------------------------------------------------------------------------

    def exists(self) -> bool:
        try:
            with map_aws_errors(f"describe table {self.table_name}"):
                self._client.describe_table(TableName=self.table_name)
        except DependencyUnavailable:
            return False
        return True

    def create_table_if_missing(self, wait_s: float = 600.0, poll_s: float = 0.5) -> bool:
        """Create ``<app>-CoordinatorState`` (``key`` S HASH, on-demand) unless it exists; wait for ACTIVE."""
        created = False
        if not STARTUP.call(self.exists):
            created = STARTUP.call(self._create)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                with map_aws_errors(f"describe table {self.table_name}"):
                    status = self._client.describe_table(TableName=self.table_name)["Table"]["TableStatus"]
                if status == "ACTIVE":
                    return created
            except DependencyUnavailable:
                pass
            if time.monotonic() >= deadline:
                raise DependencyUnavailable(f"table {self.table_name} not ACTIVE after {wait_s}s")
            time.sleep(poll_s)

    def _create(self) -> bool:
        with map_aws_errors(f"create table {self.table_name}"):
            try:
                self._client.create_table(
                    TableName=self.table_name,
                    KeySchema=[{"AttributeName": self.key_name, "KeyType": "HASH"}],
                    AttributeDefinitions=[{"AttributeName": self.key_name, "AttributeType": "S"}],
                    BillingMode="PAY_PER_REQUEST",
                )
            except ClientError as exc:
                if error_code(exc) != "ResourceInUseException":
                    raise
                return False
        return True

    # -- items -----------------------------------------------------------------------------------

    def get(self, key: str) -> dict[str, Any] | None:
        """The item (strongly consistent read, as Java), plain values; None if absent."""
        return LEASE_IO.call(self._get, key)

    def _get(self, key: str) -> dict[str, Any] | None:
        with map_aws_errors(f"get {key} from {self.table_name}"):
            response = self._client.get_item(
                TableName=self.table_name, Key={self.key_name: {"S": key}}, ConsistentRead=True
            )
        item = response.get("Item")
        return None if item is None else decode_item(item)

    def put(
        self,
        key: str,
        attributes: Mapping[str, Any],
        *,
        require_absent: bool = False,
        require_equal: Mapping[str, Any] | None = None,
        entity_type: str | None = None,
    ) -> None:
        """PutItem the whole item, conditionally: absent, or existing with these attribute values."""
        item = {self.key_name: {"S": key}, **{n: _typed(v) for n, v in attributes.items()}}
        if entity_type is not None and self.in_lease_table:
            item[ENTITY_TYPE] = {"S": entity_type}
        names, values, condition = self._condition(require_absent, require_equal or {})
        args: dict[str, Any] = {"TableName": self.table_name, "Item": item, "ConditionExpression": condition}
        args["ExpressionAttributeNames"] = names
        if values:
            args["ExpressionAttributeValues"] = values
        with map_aws_errors(f"put {key} in {self.table_name}"):
            self._client.put_item(**args)

    def scan(self) -> list[dict[str, Any]]:
        """Every item of the table (paginated Scan), plain values."""
        return LEASE_IO.call(self._scan)

    def _scan(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        args: dict[str, Any] = {"TableName": self.table_name}
        while True:
            with map_aws_errors(f"scan {self.table_name}"):
                page = self._client.scan(**args)
            items.extend(decode_item(item) for item in page.get("Items", []))
            if not page.get("LastEvaluatedKey"):
                return items
            args["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def update(
        self, key: str, sets: Mapping[str, Any], *, require_equal: Mapping[str, Any] | None = None
    ) -> None:
        """UpdateItem SET ``sets``: if the item exists with these attribute values, or (None) always."""
        names, values, condition = self._condition(False, require_equal or {})
        if require_equal is None:
            names, values, condition = {}, {}, ""
        parts = []
        for i, (name, value) in enumerate(sets.items()):
            names[f"#s{i}"] = name
            values[f":s{i}"] = _typed(value)
            parts.append(f"#s{i} = :s{i}")
        args: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": {self.key_name: {"S": key}},
            "UpdateExpression": "SET " + ", ".join(parts),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        if condition:
            args["ConditionExpression"] = condition
        with map_aws_errors(f"update {key} in {self.table_name}"):
            self._client.update_item(**args)

    def delete(self, key: str, *, require_equal: Mapping[str, Any] | None = None) -> None:
        """DeleteItem if the item exists with these attribute values, or (None) unconditionally."""
        args: dict[str, Any] = {"TableName": self.table_name, "Key": {self.key_name: {"S": key}}}
        if require_equal is not None:
            names, values, condition = self._condition(False, require_equal)
            args["ConditionExpression"] = condition
            args["ExpressionAttributeNames"] = names
            if values:
                args["ExpressionAttributeValues"] = values
        with map_aws_errors(f"delete {key} from {self.table_name}"):
            self._client.delete_item(**args)

    def _condition(
        self, require_absent: bool, require_equal: Mapping[str, Any]
    ) -> tuple[dict[str, str], dict[str, Any], str]:
        names = {"#pk": self.key_name}
        values: dict[str, Any] = {}
        if require_absent:
            return names, values, "attribute_not_exists(#pk)"
        clauses = ["attribute_exists(#pk)"]
        for i, (name, value) in enumerate(require_equal.items()):
            names[f"#c{i}"] = name
            values[f":c{i}"] = _typed(value)
            clauses.append(f"#c{i} = :c{i}")
        return names, values, " AND ".join(clauses)


def locate(client: DynamoDBClient, coordinator_table: str, lease_table: str) -> CoordinatorStore:
    """Where this fleet keeps its coordinator state (see the module docstring); creates nothing."""
    legacy = CoordinatorStore(client, coordinator_table)
    if STARTUP.call(legacy.exists):
        return legacy
    single = CoordinatorStore(client, lease_table, LEASE_TABLE_KEY)
    try:
        if single.get("Migration3.0") is not None:
            logger.info("coordinator state lives in the lease table %s (KCL 3.5 layout)", lease_table)
            return single
    except DependencyUnavailable:
        pass
    return legacy
