"""A scripted KCL 3.5 worker and leader that write exactly what Java 3.5.1 writes to a single-table lease
table (contract §9.1, §3.6, §4.2): the ``Migration3.0`` create, the lock client's ``Leader`` item and its
heartbeats, the worker-metrics upsert, the filtered worker-metrics scan, and the leader's *assign* with
the legacy ``Expected`` conditions. Raw DynamoDB calls on purpose: no kcl-daemon code is involved, so a
test shows kcl-daemon reading and writing beside the item shapes themselves, in a second and on both
emulators.

kcl-daemon beside a Java 3.5 leader and workers is tested with the real Java KCL 3.5.1 daemon
(``tests/e2e/java/test_java35_*.py``). The script stays where the real daemon cannot serve in CI time or
on moto: item-level tests, and a leader that stops while its 120 s lock stands
(``tests/e2e/test_dead_leader.py``, beside the real daemon's ``test_java35_dead_leader.py``).
"""

from __future__ import annotations

import math
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

    def heartbeat(self) -> None:
        new = str(uuid.uuid4())
        self.client.update_item(
            TableName=self.table,
            Key={"leaseKey": {"S": "Leader"}},
            UpdateExpression="SET #ld = :ld, #rvn = :newRvn",
            ConditionExpression="attribute_exists(#pk) AND #rvn = :rvn AND #on = :owner",
            ExpressionAttributeNames={
                "#pk": "leaseKey",
                "#ld": "leaseDuration",
                "#rvn": "recordVersionNumber",
                "#on": "ownerName",
            },
            ExpressionAttributeValues={
                ":ld": {"S": str(self.lease_duration_ms)},
                ":newRvn": {"S": new},
                ":rvn": {"S": self.rvn},
                ":owner": {"S": self.worker_id},
            },
        )
        self.rvn = new

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

    # -- leases -----------------------------------------------------------------------------------

    def scan_leases(self) -> list[dict[str, Any]]:
        """Every item that is a lease: no entityType, or entityType LEASE (no filter, as Java)."""
        items: list[dict[str, Any]] = []
        args: dict[str, Any] = {"TableName": self.table, "ConsistentRead": True}
        while True:
            page = self.client.scan(**args)
            items += [i for i in page.get("Items", []) if i.get("entityType", {"S": "LEASE"})["S"] == "LEASE"]
            if not page.get("LastEvaluatedKey"):
                return items
            args["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def assign(self, lease: dict[str, Any], new_owner: str) -> None:
        """The leader's *assign*: the legacy ``Expected`` conditions on owner, checkpoint owner and key."""
        owner = lease.get("leaseOwner")
        expected: dict[str, Any] = {
            "leaseOwner": {"Value": owner} if owner else {"Exists": False},
            "checkpointOwner": {"Exists": False},
            "leaseKey": {"Value": lease["leaseKey"]},
        }
        updates: dict[str, Any] = {
            "leaseOwner": {"Action": "PUT", "Value": {"S": new_owner}},
            "checkpointOwner": {"Action": "DELETE"},
            "leaseCounter": {"Action": "ADD", "Value": {"N": "1"}},
        }
        if owner and owner["S"] != new_owner:
            updates["ownerSwitchesSinceCheckpoint"] = {"Action": "ADD", "Value": {"N": "1"}}
        self.client.update_item(
            TableName=self.table,
            Key={"leaseKey": lease["leaseKey"]},
            Expected=expected,
            AttributeUpdates=updates,
            ReturnValues="ALL_NEW",
        )

    def renew(self, lease: dict[str, Any]) -> dict[str, Any]:
        """The 2.x/3.x renew: ``leaseCounter`` fenced with ``Expected``, counter + 1."""
        counter = int(lease["leaseCounter"]["N"])
        response = self.client.update_item(
            TableName=self.table,
            Key={"leaseKey": lease["leaseKey"]},
            Expected={"leaseCounter": {"Value": {"N": str(counter)}}},
            AttributeUpdates={"leaseCounter": {"Action": "PUT", "Value": {"N": str(counter + 1)}}},
            ReturnValues="ALL_NEW",
        )
        return dict(response["Attributes"])

    def assign_evenly(self, workers: list[str]) -> int:
        """Count-based: give unowned leases to the workers with the fewest, as a 3.5 leader would."""
        leases = self.scan_leases()
        held = {w: sum(1 for lease in leases if lease.get("leaseOwner", {}).get("S") == w) for w in workers}
        target = math.ceil(len(leases) / max(len(workers), 1))
        moved = 0
        for lease in leases:
            if lease.get("leaseOwner") is not None:
                continue
            worker = min(workers, key=lambda w: (held[w], w))
            if held[worker] >= target:
                break
            self.assign(lease, worker)
            held[worker] += 1
            moved += 1
        return moved
