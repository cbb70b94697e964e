"""The DynamoDB low-level shapes, named once for the type checker: a typed attribute value and an item.

The names come from the ``mypy-boto3-dynamodb`` stubs (the dev extra) and exist for the type checker only:
import them under ``if TYPE_CHECKING:``; nothing here exists at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import TypeAlias

    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

    #: one typed attribute value: ``{"S": "shardId-0"}``, ``{"N": "3"}``, ``{"M": {...}}``
    AttributeValue: TypeAlias = AttributeValueTypeDef
    #: a low-level item (or key) as DynamoDB takes and returns it: attribute name -> typed value
    Item: TypeAlias = dict[str, AttributeValueTypeDef]
