"""Which AWS API calls the code makes, found by reading it: every ``<something>.<operation>(...)`` call in a
module whose method name is an operation of a service kcl-daemon uses, as the IAM action it needs.

The operation names come from botocore's own service models (``xform_name`` of each operation), so a
new call to any DynamoDB, Kinesis, CloudWatch or STS operation is found wherever it is written; a
wrapper method that happens to share an operation's name counts too (harmlessly: it calls it).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import boto3  # noqa: TID251 - the service models list the operation names
from botocore import xform_name  # noqa: TID251

SERVICES = ("dynamodb", "kinesis", "cloudwatch", "sts", "sqs", "s3")


def operation_actions() -> dict[str, set[str]]:
    """snake_case method name -> the IAM actions ``service:Operation`` it can be."""
    names: dict[str, set[str]] = {}
    for service in SERVICES:
        client = boto3.session.Session(region_name="us-east-1").client(service)
        for operation in client.meta.service_model.operation_names:
            names.setdefault(xform_name(operation), set()).add(f"{service}:{operation}")
    return names


def actions_in(
    sources: Mapping[str, str], operations: Mapping[str, set[str]] | None = None
) -> dict[str, set[str]]:
    """IAM action -> the modules (by name) that call it, for module name -> source text."""
    known = operations if operations is not None else operation_actions()
    found: dict[str, set[str]] = {}
    for name, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                for action in known.get(node.func.attr, ()):
                    found.setdefault(action, set()).add(name)
    return found


def sources_of(paths: Iterable[Path]) -> dict[str, str]:
    return {path.name: path.read_text(encoding="utf-8") for path in paths}
