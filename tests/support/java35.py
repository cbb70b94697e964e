"""The items Java KCL 3.5.1 writes to a single-table lease table, written exactly so (contract §9.1, §3.6):
the ``Migration3.0`` create, the lock client's ``Leader`` item, the worker-metrics upsert and the filtered
worker-metrics scan. Raw DynamoDB calls on purpose: no kcl-daemon code is involved, so a test shows
kcl-daemon reading and writing beside the item shapes themselves, in a second and on both emulators.

Kept for those item-level tests only: kcl-daemon beside a Java 3.5 *leader and workers* is tested with
the real Java KCL 3.5.1 daemon (``tests/e2e/java/test_java35_*.py``), which replaced the scripted leader.
"""

from __future__ import annotations

import time
import uuid
from typing import Any


def _n(value: float) -> dict[str, str]:
    return {"N": str(int(value)) if float(value).is_integer() else repr(value)}


class ScriptedJava35:
    def __init__(self, client: Any, table: str, worker_id: str, *, lease_duration_ms: int = 120000) -> None:
        self.client = client
        self.table = table
        self.worker_id = worker_id
        self.lease_duration_ms = lease_duration_ms
        self.rvn: str | None = None

    # -- Migration3.0 ----------------------------------------------------------------------------

    def create_client_version(self, cv: str = "CLIENT_VERSION_3X") -> None:
        """The first write of ``Migration3.0``: expected ``leaseKey`` not to exist."""
        self.client.put_item(
            TableName=self.table,
            Item={
                "leaseKey": {"S": "Migration3.0"},
                "cv": {"S": cv},
                "mb": {"S": self.worker_id},
                "mts": _n(int(time.time() * 1000)),
                "h": {"L": []},
                "entityType": {"S": "CLIENT_VERSION_MIGRATION"},
            },
            Expected={"leaseKey": {"Exists": False}},
        )

    # -- the lock client --------------------------------------------------------------------------

    def acquire_lock(self) -> None:
        self.rvn = str(uuid.uuid4())
        self.client.put_item(
            TableName=self.table,
            Item={
                "leaseKey": {"S": "Leader"},
                "ownerName": {"S": self.worker_id},
                "leaseDuration": {"S": str(self.lease_duration_ms)},
                "recordVersionNumber": {"S": self.rvn},
                "entityType": {"S": "LEADER"},  # KCL's additional attribute
            },
            ConditionExpression="attribute_not_exists(#pk)",
            ExpressionAttributeNames={"#pk": "leaseKey"},
        )

    # -- worker metrics ---------------------------------------------------------------------------

    def publish_metrics(self, cpu: float | None = None) -> None:
        """The enhanced client's ignore-nulls UpdateItem: SET every attribute, no condition. Outside
        EC2/ECS/EKS Java writes empty ``sts`` and ``opr``."""
        now = int(time.time())
        sts: dict[str, Any] = {} if cpu is None else {"C": {"L": [_n(cpu)]}}
        opr: dict[str, Any] = {} if cpu is None else {"C": {"L": [_n(100)]}}
        self.client.update_item(
            TableName=self.table,
            Key={"leaseKey": {"S": self.worker_id}},
            UpdateExpression="SET #lut = :lut, #sts = :sts, #opr = :opr, #sup = :sup, #slu = :slu, #et = :et",
            ExpressionAttributeNames={
                "#lut": "lut",
                "#sts": "sts",
                "#opr": "opr",
                "#sup": "sup",
                "#slu": "slu",
                "#et": "entityType",
            },
            ExpressionAttributeValues={
                ":lut": _n(now),
                ":sts": {"M": sts},
                ":opr": {"M": opr},
                ":sup": _n(1),
                ":slu": _n(now),
                ":et": {"S": "WORKER_METRIC_STATS"},
            },
        )

    def scan_worker_metrics(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        args: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": "#et = :etVal",
            "ExpressionAttributeNames": {"#et": "entityType"},
            "ExpressionAttributeValues": {":etVal": {"S": "WORKER_METRIC_STATS"}},
        }
        while True:
            page = self.client.scan(**args)
            items += page.get("Items", [])
            if not page.get("LastEvaluatedKey"):
                return items
            args["ExclusiveStartKey"] = page["LastEvaluatedKey"]
