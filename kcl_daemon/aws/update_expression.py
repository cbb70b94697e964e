"""One DynamoDB UpdateItem's condition and update expressions, built with placeholder names and values,
and the typed attribute values the lease writes put in them (``{"S": ...}``, ``{"N": ...}``).

Used by every module of this package that writes lease items (the lease table, its 3.x variant and the
checkpoint writes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from kcl_daemon.aws.item_types import AttributeValue


def s_value(value: str) -> AttributeValue:
    return {"S": str(value)}


def n_value(value: int) -> AttributeValue:
    return {"N": str(value)}


#: a typed value to write: the core's codec builds them with ``object`` inside (a ``{"S": ...}`` mapping)
Value = Mapping[str, object]


class ExpressionArguments(TypedDict, total=False):
    """One UpdateItem's expressions (the rest of its arguments are the call's own)."""

    UpdateExpression: str
    ConditionExpression: str
    ExpressionAttributeNames: dict[str, str]
    ExpressionAttributeValues: dict[str, Value]


class Expression:
    """Builds one UpdateItem's condition and update expressions with placeholder names and values."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Value] = {}
        self.conditions: list[str] = []
        self.sets: list[str] = []
        self.removes: list[str] = []
        self.adds: list[str] = []

    def name(self, attribute: str) -> str:
        placeholder = f"#{attribute}"  # every lease attribute name is alphanumeric
        self.names[placeholder] = attribute
        return placeholder

    def value(self, value: Value) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = value
        return placeholder

    def require_equal(self, attribute: str, value: Value) -> None:
        self.conditions.append(f"{self.name(attribute)} = {self.value(value)}")

    def require_exists(self, attribute: str) -> None:
        self.conditions.append(f"attribute_exists({self.name(attribute)})")

    def require_absent(self, attribute: str) -> None:
        self.conditions.append(f"attribute_not_exists({self.name(attribute)})")

    def set(self, attribute: str, value: Value) -> None:
        self.sets.append(f"{self.name(attribute)} = {self.value(value)}")

    def remove(self, attribute: str) -> None:
        self.removes.append(self.name(attribute))

    def add(self, attribute: str, value: Value) -> None:
        self.adds.append(f"{self.name(attribute)} {self.value(value)}")

    def arguments(self) -> ExpressionArguments:
        clauses = [
            f"{verb} {', '.join(parts)}"
            for verb, parts in (("SET", self.sets), ("REMOVE", self.removes), ("ADD", self.adds))
            if parts
        ]
        args: ExpressionArguments = {
            "UpdateExpression": " ".join(clauses),
            "ConditionExpression": " AND ".join(self.conditions),
            "ExpressionAttributeNames": self.names,
        }
        if self.values:
            args["ExpressionAttributeValues"] = self.values
        return args
