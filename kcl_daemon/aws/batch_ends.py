"""Where the Spark source's executors publish how far each shard's part of a micro-batch went.

An executor task decides where its shard's part of batch ``n`` ends and publishes it *before* it hands
Spark a row; the first publication of ``(run, n, shard)`` wins, and every later attempt (a retry, a
speculative copy, the replay after a restart) adopts it. The driver reads a batch's publications when it
plans the next batch. Two stores, one interface (:class:`BatchEnds`):

* :class:`LeaseItemEnds` — with ``leaseTableName``: one attribute ``sparkEnd_<run>_<batch>`` per batch
  on the shard's KCL lease item, written with ``UpdateItem`` conditioned on that attribute alone (and on
  the item existing), so it never races the lease owner's counter-fenced writes; KCL and the daemon
  keep attributes they do not know (contract §3.2).
* :class:`MetadataTableEnds` — without: the source's own table (``metadataTableName``; key ``run`` +
  ``shardId``), created on first use, one attribute ``end_<batch>`` per batch; every write sets
  ``expiresAt`` (DynamoDB TTL, 7 days) so the items of abandoned queries go away by themselves.

Publishing is an unknown-outcome write made safe by its condition: a retried write that finds the
attribute present reads it back and adopts it, whether an earlier attempt of its own or another task
wrote it. Reads are consistent. Payloads never appear here; the ends are positions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, Protocol

from botocore.exceptions import ClientError

from kcl_daemon.aws.errors import error_code, map_aws_errors
from kcl_daemon.core.spark.batches import PublishedEnd
from kcl_daemon.core.spark.leases import end_attribute
from kcl_daemon.errors import DependencyUnavailable, LeaseConflict, Throttled
from kcl_daemon.retry import BATCH_ENDS, STARTUP, RetryPolicy

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import KeysAndAttributesUnionTypeDef

    from kcl_daemon.aws.item_types import AttributeValue, Item

logger = logging.getLogger(__name__)

LEASE_KEY: Final = "leaseKey"
RUN: Final = "run"
SHARD_ID: Final = "shardId"
EXPIRES_AT: Final = "expiresAt"
TTL_S: Final = 7 * 24 * 3600
_BATCH_GET_MAX: Final = 100


class BatchEnds(Protocol):
    """Publications of one query's batches (see the module docstring)."""

    table_name: str

    def publish(self, run: str, batch: int, shard_id: str, end: PublishedEnd) -> PublishedEnd: ...

    def get(self, run: str, batch: int, shard_id: str) -> PublishedEnd | None: ...

    def read_batch(self, run: str, batch: int, shard_ids: Sequence[str]) -> dict[str, PublishedEnd]: ...

    def prune(self, run: str, batches: Iterable[int], shard_ids: Iterable[str]) -> None: ...


class _Store:
    """What both stores share; a subclass says how a (run, shard) maps to an item and an attribute."""

    condition_item_exists = False
    key_attributes: tuple[str, ...] = ()

    def __init__(self, client: DynamoDBClient, table_name: str, *, retry: RetryPolicy = BATCH_ENDS) -> None:
        self._client = client
        self.table_name = table_name
        self._retry = retry

    def key(self, run: str, shard_id: str) -> Item:
        raise NotImplementedError

    def attribute(self, run: str, batch: int) -> str:
        raise NotImplementedError

    def shard_of(self, item: Mapping[str, AttributeValue]) -> str:
        raise NotImplementedError

    def extra_set(self) -> tuple[str, dict[str, str], Item]:
        """More ``SET`` clauses for a publication: (expression, names, values)."""
        return "", {}, {}

    # -- publications -------------------------------------------------------------------------------

    def publish(self, run: str, batch: int, shard_id: str, end: PublishedEnd) -> PublishedEnd:
        """Publish ``end`` unless an attempt did first; the end that stands."""
        return self._retry.call(self._publish_once, run, batch, shard_id, end)

    def _publish_once(self, run: str, batch: int, shard_id: str, end: PublishedEnd) -> PublishedEnd:
        extra, names, values = self.extra_set()
        condition = "attribute_not_exists(#a)"
        if self.condition_item_exists:
            condition += f" AND attribute_exists({LEASE_KEY})"
        try:
            with map_aws_errors(f"publish the end of batch {batch} of shard {shard_id} to {self.table_name}"):
                self._client.update_item(
                    TableName=self.table_name,
                    Key=self.key(run, shard_id),
                    UpdateExpression="SET #a = :v" + extra,
                    ConditionExpression=condition,
                    ExpressionAttributeNames={"#a": self.attribute(run, batch), **names},
                    ExpressionAttributeValues={":v": {"S": end.to_json()}, **values},
                )
        except LeaseConflict:
            standing = self._get_once(run, batch, shard_id)
            if standing is None:
                raise DependencyUnavailable(
                    f"{self.table_name} has no item for shard {shard_id}: cannot publish the end of "
                    f"batch {batch} (the query's lease bridge creates the lease of every shard it reads)"
                ) from None
            return standing
        return end

    def get(self, run: str, batch: int, shard_id: str) -> PublishedEnd | None:
        """The publication of ``(run, batch, shard)``, read consistently; None if there is none."""
        return self._retry.call(self._get_once, run, batch, shard_id)

    def _get_once(self, run: str, batch: int, shard_id: str) -> PublishedEnd | None:
        name = self.attribute(run, batch)
        with map_aws_errors(f"read the end of batch {batch} of shard {shard_id} from {self.table_name}"):
            item = self._client.get_item(
                TableName=self.table_name,
                Key=self.key(run, shard_id),
                ConsistentRead=True,
                ProjectionExpression="#a",
                ExpressionAttributeNames={"#a": name},
            ).get("Item")
        if not item or name not in item:
            return None
        return PublishedEnd.from_json(item[name]["S"])

    def read_batch(self, run: str, batch: int, shard_ids: Sequence[str]) -> dict[str, PublishedEnd]:
        """The publications of ``(run, batch)`` for these shards (absent ones are left out), read with
        consistent BatchGetItem calls of up to 100 keys."""
        out: dict[str, PublishedEnd] = {}
        for first in range(0, len(shard_ids), _BATCH_GET_MAX):
            chunk = shard_ids[first : first + _BATCH_GET_MAX]
            out.update(self._retry.call(self._read_chunk, run, batch, chunk))
        return out

    def _read_chunk(self, run: str, batch: int, shard_ids: Sequence[str]) -> dict[str, PublishedEnd]:
        name = self.attribute(run, batch)
        projection = ", ".join([*(f"#{k}" for k in self.key_attributes), "#a"])
        request: Mapping[str, KeysAndAttributesUnionTypeDef] = {
            self.table_name: {
                "Keys": [self.key(run, shard) for shard in shard_ids],
                "ConsistentRead": True,
                "ProjectionExpression": projection,
                "ExpressionAttributeNames": {"#a": name, **{f"#{k}": k for k in self.key_attributes}},
            }
        }
        out: dict[str, PublishedEnd] = {}
        for _ in range(50):
            with map_aws_errors(f"read the ends of batch {batch} from {self.table_name}"):
                response = self._client.batch_get_item(RequestItems=request)
            for item in response.get("Responses", {}).get(self.table_name, []):
                if name in item:
                    out[self.shard_of(item)] = PublishedEnd.from_json(item[name]["S"])
            request = response.get("UnprocessedKeys") or {}
            if not request:
                return out
            time.sleep(0.05)
        raise Throttled(f"{self.table_name}: BatchGetItem kept leaving keys unprocessed")

    def prune(self, run: str, batches: Iterable[int], shard_ids: Iterable[str]) -> None:
        """Remove the publications of these batches (what is not there is not an error)."""
        names = {f"#b{i}": self.attribute(run, batch) for i, batch in enumerate(batches)}
        if not names:
            return
        for shard_id in shard_ids:
            self._retry.call(self._prune_one, run, shard_id, names)

    def remove_attributes(self, run: str, shard_id: str, attributes: Sequence[str]) -> None:
        """Remove these attributes from the shard's item (old publications found on it)."""
        if attributes:
            names = {f"#b{i}": name for i, name in enumerate(attributes)}
            self._retry.call(self._prune_one, run, shard_id, names)

    def _prune_one(self, run: str, shard_id: str, names: dict[str, str]) -> None:
        key_name = self.key_attributes[0]
        try:
            with map_aws_errors(f"remove old ends of shard {shard_id} from {self.table_name}"):
                self._client.update_item(
                    TableName=self.table_name,
                    Key=self.key(run, shard_id),
                    UpdateExpression="REMOVE " + ", ".join(names),
                    ConditionExpression="attribute_exists(#k)",
                    ExpressionAttributeNames={**names, "#k": key_name},
                )
        except LeaseConflict:
            pass  # no item: nothing to remove


class LeaseItemEnds(_Store):
    """Publications as attributes of the KCL lease items of ``table_name`` (single-stream keys)."""

    condition_item_exists = True
    key_attributes = (LEASE_KEY,)

    def key(self, run: str, shard_id: str) -> Item:
        return {LEASE_KEY: {"S": shard_id}}

    def attribute(self, run: str, batch: int) -> str:
        return end_attribute(run, batch)

    def shard_of(self, item: Mapping[str, AttributeValue]) -> str:
        return str(item[LEASE_KEY]["S"])


class MetadataTableEnds(_Store):
    """Publications in the source's own table: one item per (run, shard), TTL on ``expiresAt``."""

    key_attributes = (RUN, SHARD_ID)

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        retry: RetryPolicy = BATCH_ENDS,
        now: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(client, table_name, retry=retry)
        self._now = now

    def key(self, run: str, shard_id: str) -> Item:
        return {RUN: {"S": run}, SHARD_ID: {"S": shard_id}}

    def attribute(self, run: str, batch: int) -> str:
        return f"end_{batch}"

    def shard_of(self, item: Mapping[str, AttributeValue]) -> str:
        return str(item[SHARD_ID]["S"])

    def extra_set(self) -> tuple[str, dict[str, str], Item]:
        return (
            ", #ttl = :ttl",
            {"#ttl": EXPIRES_AT},
            {":ttl": {"N": str(int(self._now()) + TTL_S)}},
        )

    def create_if_missing(self, wait_s: float = 120.0, *, poll_s: float = 0.5) -> bool:
        """Create the table unless it exists (on-demand billing, TTL on ``expiresAt``); wait until it is
        ACTIVE. True if this call created it."""
        created = False
        if self._describe() is None:
            created = STARTUP.call(self._create)
        deadline = time.monotonic() + wait_s
        while True:
            table = self._describe()
            if table is not None and table.get("TableStatus") == "ACTIVE":
                break
            if time.monotonic() >= deadline:
                raise DependencyUnavailable(f"metadata table {self.table_name} not ACTIVE after {wait_s}s")
            time.sleep(poll_s)
        if created:
            self._enable_ttl()
        return created

    def _describe(self) -> Mapping[str, object] | None:
        try:
            with map_aws_errors(f"describe metadata table {self.table_name}"):
                return dict(self._client.describe_table(TableName=self.table_name)["Table"])
        except DependencyUnavailable:
            return None

    def _create(self) -> bool:
        with map_aws_errors(f"create metadata table {self.table_name}"):
            try:
                self._client.create_table(
                    TableName=self.table_name,
                    KeySchema=[
                        {"AttributeName": RUN, "KeyType": "HASH"},
                        {"AttributeName": SHARD_ID, "KeyType": "RANGE"},
                    ],
                    AttributeDefinitions=[
                        {"AttributeName": RUN, "AttributeType": "S"},
                        {"AttributeName": SHARD_ID, "AttributeType": "S"},
                    ],
                    BillingMode="PAY_PER_REQUEST",
                )
            except ClientError as exc:
                if error_code(exc) != "ResourceInUseException":
                    raise
                return False  # another query created it first
        return True

    def _enable_ttl(self) -> None:
        """Items of abandoned queries expire; an endpoint without TTL (some emulators) keeps them."""
        try:
            with map_aws_errors(f"enable TTL on metadata table {self.table_name}"):
                self._client.update_time_to_live(
                    TableName=self.table_name,
                    TimeToLiveSpecification={"Enabled": True, "AttributeName": EXPIRES_AT},
                )
        except Exception as exc:  # noqa: BLE001 - TTL is housekeeping, never a reason not to run
            logger.warning(
                "metadata table %s: TTL could not be enabled (%s); old items stay until deleted",
                self.table_name,
                exc,
            )
