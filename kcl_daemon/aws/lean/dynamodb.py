"""DynamoDB items between the wire and botocore's shapes, for the lean path's UpdateItem.

The low-level DynamoDB client takes and returns attribute values in the wire's own JSON form
(``{"S": "x"}``, ``{"N": "5"}``, ``{"M": {...}}``) with one exception: binary values (``B``, ``BS``) are
``bytes`` in Python and base64 text on the wire. :func:`wire_safe` says whether request parameters can be
sent as they are (no bytes, nothing botocore would have to convert; otherwise the call stays on
botocore), and :func:`item_from_wire` turns a reply's attribute values into exactly what botocore's
parser returns, so a lease read on either path is the same (``tests/unit/aws/test_lean_dynamodb.py``).
"""

from __future__ import annotations

import binascii
from typing import Any


def wire_safe(value: object) -> bool:
    """Whether ``value`` (request parameters) serialises to the wire as botocore would, as plain JSON."""
    if isinstance(value, str | bool | int):
        return True
    if isinstance(value, dict):
        return all(isinstance(k, str) and wire_safe(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(wire_safe(v) for v in value)
    return False  # bytes, floats, datetimes, sets: botocore's serialiser decides


def _value(value: Any) -> Any:
    if not isinstance(value, dict) or len(value) != 1:
        return value
    ((kind, inner),) = value.items()
    if kind == "B":
        return {"B": binascii.a2b_base64(inner)}
    if kind == "BS":
        return {"BS": [binascii.a2b_base64(v) for v in inner]}
    if kind == "M":
        return {"M": item_from_wire(inner)}
    if kind == "L":
        return {"L": [_value(v) for v in inner]}
    return value


def item_from_wire(item: dict[str, Any]) -> dict[str, Any]:
    """A reply's item (attribute name -> wire value) as botocore's parser returns it."""
    return {name: _value(value) for name, value in item.items()}
