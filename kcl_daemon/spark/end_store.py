"""Where executors publish how far each shard's part of a micro-batch went (spike of docs/spark-design.md).

An executor task decides where its shard's part of batch ``n`` ends (its row budget, the shard's tip,
the shard's end, or the AvailableNow cut-off) and publishes that end *before* it hands Spark a row.
The first publication of ``(run, n, shard)`` wins: a retried or speculative attempt, or the replay of
the batch after a restart, finds it and reads exactly to it, so every attempt yields the same rows.
The driver reads a batch's publications once, when it plans the next batch: they become the next
batch's exact start positions (and the lease checkpoints once Spark commits the batch).

The store is the KCL lease table: one attribute per (run, batch) on the shard's lease item, written
with ``UpdateItem`` (never ``PutItem``) and a condition on that attribute alone, so it never races the
lease owner's counter-fenced writes, and KCL and the daemon (which ignore unknown attributes) are not
disturbed. ``upsert=True`` lets the spike use a table of its own whose items it creates.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

PREFIX: Final = "sparkEnd_"


@dataclass(frozen=True, slots=True)
class PublishedEnd:
    """Where a shard's part of one batch ended, and why (``budget``, ``tip``, ``cutoff``, ``end``)."""

    seq: str
    sub: int
    reason: str
    rows: int
    ts: int | None = None  # the start's AT_TIMESTAMP when the read found nothing after it

    def to_json(self) -> str:
        return json.dumps(
            {"reason": self.reason, "rows": self.rows, "seq": self.seq, "sub": self.sub, "ts": self.ts}
        )

    @classmethod
    def from_json(cls, text: str) -> PublishedEnd:
        data = json.loads(text)
        return cls(str(data["seq"]), int(data["sub"]), str(data["reason"]), int(data["rows"]), data.get("ts"))


def attribute(run: str, batch: int) -> str:
    return f"{PREFIX}{run}_{batch}"


class LeaseTableEndStore:
    """Publications as attributes of the lease items of ``table`` (a boto3 DynamoDB client's table)."""

    def __init__(self, dynamodb: Any, table: str, *, upsert: bool = False) -> None:
        self.dynamodb = dynamodb
        self.table = table
        self.upsert = upsert

    def publish(self, run: str, batch: int, shard_id: str, end: PublishedEnd) -> PublishedEnd:
        """Publish ``end`` unless an attempt did first; the end that stands."""
        condition = "attribute_not_exists(#a)" + ("" if self.upsert else " AND attribute_exists(leaseKey)")
        try:
            self.dynamodb.update_item(
                TableName=self.table,
                Key={"leaseKey": {"S": shard_id}},
                UpdateExpression="SET #a = :v",
                ConditionExpression=condition,
                ExpressionAttributeNames={"#a": attribute(run, batch)},
                ExpressionAttributeValues={":v": {"S": end.to_json()}},
            )
        except self.dynamodb.exceptions.ConditionalCheckFailedException:
            pass  # another attempt published first: its end stands
        else:
            return end
        standing = self.get(run, batch, shard_id)
        if standing is None:
            raise RuntimeError(f"lease item of {shard_id} is missing in {self.table}: cannot publish")
        return standing

    def get(self, run: str, batch: int, shard_id: str) -> PublishedEnd | None:
        name = attribute(run, batch)
        item = self.dynamodb.get_item(
            TableName=self.table,
            Key={"leaseKey": {"S": shard_id}},
            ConsistentRead=True,
            ProjectionExpression="#a",
            ExpressionAttributeNames={"#a": name},
        ).get("Item")
        if not item or name not in item:
            return None
        return PublishedEnd.from_json(item[name]["S"])

    def read_batch(self, run: str, batch: int) -> dict[str, PublishedEnd]:
        """Every shard's publication of ``(run, batch)``: one consistent scan of the table."""
        name = attribute(run, batch)
        out: dict[str, PublishedEnd] = {}
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "ConsistentRead": True,
            "ProjectionExpression": "leaseKey, #a",
            "ExpressionAttributeNames": {"#a": name},
        }
        while True:
            page = self.dynamodb.scan(**kwargs)
            for item in page.get("Items", []):
                if name in item:
                    out[item["leaseKey"]["S"]] = PublishedEnd.from_json(item[name]["S"])
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def prune(self, run: str, keep_from: int, shard_ids: Mapping[str, object]) -> None:
        """Drop the publications of batches before ``keep_from`` (the two last ones stay: the batch
        Spark may replay and the one the lease checkpoints come from)."""
        for shard_id in shard_ids:
            for batch in (keep_from - 1, keep_from - 2):
                if batch < 0:
                    continue
                self.dynamodb.update_item(
                    TableName=self.table,
                    Key={"leaseKey": {"S": shard_id}},
                    UpdateExpression="REMOVE #a",
                    ExpressionAttributeNames={"#a": attribute(run, batch)},
                )
