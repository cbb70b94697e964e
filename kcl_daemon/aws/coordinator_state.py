"""KCL 3.x coordinator state: the ``Leader`` lock, ``Migration3.0`` and ``TableMigration3.5`` items
(contract §3.5-3.8, §9).

KCL 3.0-3.4 keep them in ``<applicationName>-CoordinatorState`` (partition key ``key``); KCL 3.5 keeps
them in the lease table (partition key ``leaseKey``, each with its ``entityType``). One
:class:`CoordinatorStore` is one of those places; which one a worker uses when is decided by the table
migration (:mod:`kcl_daemon.core.leader.table_migration`, followed by :mod:`kcl_daemon.leader.tables`).

Every write is a single conditional PutItem / UpdateItem / DeleteItem, or one TransactWriteItems
(:meth:`CoordinatorStore.transact`); a failed condition raises :class:`~kcl_daemon.errors.LeaseConflict`.
In the lease table, writes and deletes of a kind (``entity_type``) are also conditional on the item
being of that kind (or absent), so a non-lease write can never land on a lease. Values are plain Python
(str, int, bool, list, dict, bytes); numbers read back as ``int`` or ``float``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Final

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from kcl_daemon.aws.errors import error_code, map_aws_errors
from kcl_daemon.errors import DependencyUnavailable, LeaseConflict
from kcl_daemon.retry import LEASE_IO, STARTUP, RetryPolicy

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import (
        ConditionCheckTypeDef,
        DeleteItemInputTypeDef,
        DeleteTypeDef,
        PutItemInputTypeDef,
        PutTypeDef,
        ScanInputTypeDef,
        TransactWriteItemTypeDef,
        UpdateItemInputTypeDef,
    )

    from kcl_daemon.aws.item_types import AttributeValue, Item

logger = logging.getLogger(__name__)

COORDINATOR_KEY: Final = "key"
LEASE_TABLE_KEY: Final = "leaseKey"
ENTITY_TYPE: Final = "entityType"

_SER = TypeSerializer()
_DESER = TypeDeserializer()


def _plain(value: object) -> object:
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


def _typed(value: object) -> AttributeValue:
    if isinstance(value, float):
        value = Decimal(repr(value))
    elif isinstance(value, list):
        return {"L": [_typed(v) for v in value]}
    elif isinstance(value, dict):
        return {"M": {k: _typed(v) for k, v in value.items()}}
    return _SER.serialize(value)


def decode_item(item: Mapping[str, AttributeValue]) -> dict[str, object]:
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
                if STARTUP.call(self._status) == "ACTIVE":  # a throttle while polling is waited out
                    return created
            except DependencyUnavailable:
                pass
            if time.monotonic() >= deadline:
                raise DependencyUnavailable(f"table {self.table_name} not ACTIVE after {wait_s}s")
            time.sleep(poll_s)

    def _status(self) -> str:
        with map_aws_errors(f"describe table {self.table_name}"):
            return str(self._client.describe_table(TableName=self.table_name)["Table"]["TableStatus"])

    def delete_table(self) -> None:
        """DeleteTable (``kcl-daemon migrate remove-legacy-tables``); absent is fine."""
        with map_aws_errors(f"delete table {self.table_name}"):
            try:
                self._client.delete_table(TableName=self.table_name)
            except ClientError as exc:
                if error_code(exc) != "ResourceNotFoundException":
                    raise

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

    def get(self, key: str, *, policy: RetryPolicy | None = None) -> dict[str, object] | None:
        """The item (strongly consistent read, as Java), plain values; None if absent.

        Retried under ``policy`` (``LEASE_IO`` by default; ``STARTUP_ITEM`` at start-up)."""
        return (policy or LEASE_IO).call(self._get, key)

    def _get(self, key: str) -> dict[str, object] | None:
        with map_aws_errors(f"get {key} from {self.table_name}"):
            response = self._client.get_item(
                TableName=self.table_name, Key={self.key_name: {"S": key}}, ConsistentRead=True
            )
        item = response.get("Item")
        return None if item is None else decode_item(item)

    def item(self, key: str, attributes: Mapping[str, object], entity_type: str | None = None) -> Item:
        """The typed item for a put (``entityType`` added in the lease table)."""
        item: Item = {self.key_name: {"S": key}, **{n: _typed(v) for n, v in attributes.items()}}
        if entity_type is not None and self.in_lease_table:
            item[ENTITY_TYPE] = {"S": entity_type}
        return item

    def adopt(
        self, key: str, raw: Mapping[str, AttributeValue], source_key_name: str, entity_type: str
    ) -> Item:
        """A typed item for this store from another store's typed item (``raw``, keyed by
        ``source_key_name``): same attributes, this store's key, and ``entityType`` in the lease table."""
        item: Item = {self.key_name: {"S": key}, **{n: v for n, v in raw.items() if n != source_key_name}}
        if self.in_lease_table:
            item[ENTITY_TYPE] = {"S": entity_type}
        return item

    def put(
        self,
        key: str,
        attributes: Mapping[str, object],
        *,
        require_absent: bool = False,
        require_equal: Mapping[str, object] | None = None,
        require_missing: tuple[str, ...] = (),
        entity_type: str | None = None,
    ) -> None:
        """PutItem the whole item, conditionally: absent, or existing with these attribute values (and
        without the ``require_missing`` attributes)."""
        item = self.item(key, attributes, entity_type)
        names, values, condition = self._condition(require_absent, require_equal or {}, require_missing)
        args: PutItemInputTypeDef = {
            "TableName": self.table_name,
            "Item": item,
            "ConditionExpression": condition,
        }
        args["ExpressionAttributeNames"] = names
        if values:
            args["ExpressionAttributeValues"] = values
        with map_aws_errors(f"put {key} in {self.table_name}"):
            self._client.put_item(**args)

    def transact(self, entries: list[TransactWriteItemTypeDef], what: str) -> None:
        """One TransactWriteItems (all or nothing); a failed condition raises LeaseConflict.

        An endpoint without transactions (dynalite answers ``UnknownOperationException``; DynamoDB never
        does) gets the same entries as single conditional writes in order, each ConditionCheck a
        consistent read checked just before the writes that follow it."""
        with map_aws_errors(what):
            try:
                self._client.transact_write_items(TransactItems=entries)
            except ClientError as exc:
                if error_code(exc) == "TransactionCanceledException":
                    reasons = exc.response.get("CancellationReasons", [])
                    codes = [r.get("Code") for r in reasons if isinstance(r, dict)]
                    if "ConditionalCheckFailed" in codes or not codes:
                        raise LeaseConflict(
                            f"{what}: a condition failed ({', '.join(map(str, codes))})"
                        ) from None
                if error_code(exc) != "UnknownOperationException":
                    raise
            else:
                return
        _warn_no_transactions(self._client)
        for entry in entries:
            self._write_in_order(entry, what)

    def _write_in_order(self, entry: TransactWriteItemTypeDef, what: str) -> None:
        if "ConditionCheck" in entry:
            check = entry["ConditionCheck"]
            with map_aws_errors(what):
                item = self._client.get_item(
                    TableName=check["TableName"], Key=check["Key"], ConsistentRead=True
                ).get("Item")
            names, values = check["ExpressionAttributeNames"], check.get("ExpressionAttributeValues", {})
            equal = [(names[f"#c{i}"], values[f":c{i}"]) for i in range(len(values))]
            if item is None or any(item.get(name) != value for name, value in equal):
                raise LeaseConflict(f"{what}: a condition failed (ConditionalCheckFailed)")
        elif "Put" in entry:
            with map_aws_errors(what):
                self._client.put_item(**entry["Put"])
        elif "Delete" in entry:
            with map_aws_errors(what):
                self._client.delete_item(**entry["Delete"])

    def condition_check(self, key: str, require_equal: Mapping[str, object]) -> TransactWriteItemTypeDef:
        """A TransactWriteItems ConditionCheck entry on this store's item ``key``."""
        names, values, condition = self._condition(False, require_equal)
        check: ConditionCheckTypeDef = {
            "TableName": self.table_name,
            "Key": {self.key_name: {"S": key}},
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
        }
        if values:
            check["ExpressionAttributeValues"] = values
        return {"ConditionCheck": check}

    def put_entry(
        self,
        item: Item,
        *,
        require_absent: bool = False,
        require_equal: Mapping[str, object] | None = None,
    ) -> TransactWriteItemTypeDef:
        """A TransactWriteItems Put entry of a typed item (see :meth:`item`)."""
        names, values, condition = self._condition(require_absent, require_equal or {})
        put: PutTypeDef = {
            "TableName": self.table_name,
            "Item": item,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
        }
        if values:
            put["ExpressionAttributeValues"] = values
        return {"Put": put}

    def delete_entry(
        self, key: str, *, require_equal: Mapping[str, object] | None = None
    ) -> TransactWriteItemTypeDef:
        """A TransactWriteItems Delete entry: unconditional, or if the item exists with these values."""
        delete: DeleteTypeDef = {"TableName": self.table_name, "Key": {self.key_name: {"S": key}}}
        if require_equal is not None:
            names, values, condition = self._condition(False, require_equal)
            delete["ConditionExpression"] = condition
            delete["ExpressionAttributeNames"] = names
            if values:
                delete["ExpressionAttributeValues"] = values
        return {"Delete": delete}

    def raw_item(self, key: str) -> Item | None:
        """The typed item as stored (consistent read), for moving it unchanged; None if absent."""
        with map_aws_errors(f"get {key} from {self.table_name}"):
            response = self._client.get_item(
                TableName=self.table_name, Key={self.key_name: {"S": key}}, ConsistentRead=True
            )
        item = response.get("Item")
        return None if item is None else dict(item)

    def scan(self, entity_type: str | None = None) -> list[dict[str, object]]:
        """Every item of the table (paginated Scan), plain values; only those of ``entity_type`` when
        given (a FilterExpression on ``entityType``, as Java scans a kind in the lease table)."""
        return LEASE_IO.call(self._scan, entity_type)

    def _scan(self, entity_type: str | None = None) -> list[dict[str, object]]:
        items: list[dict[str, object]] = []
        args: ScanInputTypeDef = {"TableName": self.table_name}
        if entity_type is not None:
            args["FilterExpression"] = "#et = :etVal"
            args["ExpressionAttributeNames"] = {"#et": ENTITY_TYPE}
            args["ExpressionAttributeValues"] = {":etVal": {"S": entity_type}}
        while True:
            with map_aws_errors(f"scan {self.table_name}"):
                page = self._client.scan(**args)
            items.extend(decode_item(item) for item in page.get("Items", []))
            if not page.get("LastEvaluatedKey"):
                return items
            args["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def update(
        self,
        key: str,
        sets: Mapping[str, object],
        *,
        require_equal: Mapping[str, object] | None = None,
        entity_type: str | None = None,
    ) -> None:
        """UpdateItem SET ``sets``: if the item exists with these attribute values, or (None) always.

        With ``entity_type`` in the lease table (an upsert of a non-lease item): also SET ``entityType``,
        on condition that the item is absent or already of that kind."""
        names, values, condition = self._condition(False, require_equal or {})
        if require_equal is None:
            names, values, condition = {}, {}, ""
        if entity_type is not None and self.in_lease_table:
            sets = {**sets, ENTITY_TYPE: entity_type}
            names["#pk"] = self.key_name
            names["#kind"] = ENTITY_TYPE
            values[":kind"] = {"S": entity_type}
            kind = "(attribute_not_exists(#pk) OR #kind = :kind)"
            condition = f"{condition} AND {kind}" if condition else kind
        parts = []
        for i, (name, value) in enumerate(sets.items()):
            names[f"#s{i}"] = name
            values[f":s{i}"] = _typed(value)
            parts.append(f"#s{i} = :s{i}")
        args: UpdateItemInputTypeDef = {
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

    def delete(
        self,
        key: str,
        *,
        require_equal: Mapping[str, object] | None = None,
        entity_type: str | None = None,
        require_missing: tuple[str, ...] = (),
    ) -> None:
        """DeleteItem if the item exists with these attribute values (and without the attributes
        ``require_missing``), or (neither) unconditionally. With ``entity_type`` in the lease table, only
        an item of that kind is deleted."""
        args: DeleteItemInputTypeDef = {"TableName": self.table_name, "Key": {self.key_name: {"S": key}}}
        if entity_type is not None and self.in_lease_table:
            require_equal = {**(require_equal or {}), ENTITY_TYPE: entity_type}
        if require_equal is not None or require_missing:
            names, values, condition = self._condition(False, require_equal or {}, require_missing)
            args["ConditionExpression"] = condition
            args["ExpressionAttributeNames"] = names
            if values:
                args["ExpressionAttributeValues"] = values
        with map_aws_errors(f"delete {key} from {self.table_name}"):
            self._client.delete_item(**args)

    def strip(self, key: str, remove: tuple[str, ...], sets: Mapping[str, object], *, require: str) -> None:
        """UpdateItem REMOVE ``remove`` and SET ``sets`` on an item that has the attribute ``require``."""
        names = {"#req": require}
        values: Item = {}
        parts = []
        for i, (name, value) in enumerate(sets.items()):
            names[f"#s{i}"] = name
            values[f":s{i}"] = _typed(value)
            parts.append(f"#s{i} = :s{i}")
        for i, name in enumerate(remove):
            names[f"#r{i}"] = name
        update = "SET " + ", ".join(parts)
        if remove:
            update += " REMOVE " + ", ".join(f"#r{i}" for i in range(len(remove)))
        args: UpdateItemInputTypeDef = {
            "TableName": self.table_name,
            "Key": {self.key_name: {"S": key}},
            "UpdateExpression": update,
            "ConditionExpression": "attribute_exists(#req)",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        with map_aws_errors(f"update {key} in {self.table_name}"):
            self._client.update_item(**args)

    def _condition(
        self, require_absent: bool, require_equal: Mapping[str, object], require_missing: tuple[str, ...] = ()
    ) -> tuple[dict[str, str], Item, str]:
        names = {"#pk": self.key_name}
        values: Item = {}
        if require_absent:
            return names, values, "attribute_not_exists(#pk)"
        clauses = ["attribute_exists(#pk)"]
        for i, (name, value) in enumerate(require_equal.items()):
            names[f"#c{i}"] = name
            values[f":c{i}"] = _typed(value)
            clauses.append(f"#c{i} = :c{i}")
        for i, name in enumerate(require_missing):
            names[f"#m{i}"] = name
            clauses.append(f"attribute_not_exists(#m{i})")
        return names, values, " AND ".join(clauses)


_WARNED: set[int] = set()


def _warn_no_transactions(client: object) -> None:
    if id(client) not in _WARNED:
        _WARNED.add(id(client))
        logger.warning(
            "this DynamoDB endpoint has no TransactWriteItems (an emulator): table-migration writes are made "
            "one by one, in order"
        )
