"""The DynamoDB lease table, with the Java KCL's conditional writes (contract §3.1, §3.2, §4.2).

Every write is a single-item ``UpdateItem`` that SETs, REMOVEs or ADDs only the attributes the
operation changes, so attributes written by other (newer) KCL versions survive untouched. Every
owner-side write is fenced on ``leaseCounter = :counter`` and bumps the counter; a failed condition
raises :class:`LeaseConflict` and changes nothing. Writes return the item as DynamoDB stored it
(``ReturnValues=ALL_NEW``), decoded, so callers always hold the authoritative lease.

Reads, creates, deletes and the meta updates are idempotent and retried here under the named policies
of :mod:`kcl_daemon.retry` (``STARTUP`` for the table itself, ``LEASE_IO`` for items); the counter-fenced
writes are tried once, because only the caller can judge an unknown outcome (see
:mod:`kcl_daemon.core.leases.reconcile`). A create whose outcome is unknown is reconciled here, by reading.

Full scans use DynamoDB's parallel scan when ``leaseTableScanTotalSegments`` (or Java's automatic sizing,
:mod:`kcl_daemon.core.leases.scan_segments`) asks for more than one segment; the segments run on a bounded
``lease-scan`` pool. The lease writes and the scans take the lean request path
(:mod:`kcl_daemon.aws.lean`) when the client allows it: the leader's and the taker's scans of a large
table were the idle daemon's largest cost after the reads, most of it botocore parsing the items.

Synchronous by design: the lease coordinator calls it on its own bounded thread pool.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from kcl_daemon.aws.errors import error_code, map_aws_errors
from kcl_daemon.aws.heartbeat_table import HeartbeatPlace
from kcl_daemon.aws.lean.client import lean_client_for
from kcl_daemon.aws.lean.dynamodb import item_from_wire, wire_safe
from kcl_daemon.aws.lease_memo import LeaseMemo
from kcl_daemon.aws.update_expression import Expression, n_value, s_value
from kcl_daemon.core.leader.table_names import legacy_table_names
from kcl_daemon.core.leases.heartbeat import RenewalMode, WorkerItem, is_worker_item
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import (
    CHECKPOINT,
    CHECKPOINT_SUB,
    CHILD_SHARD_IDS,
    ENDING_HASH_KEY,
    LEASE_COUNTER,
    LEASE_KEY,
    LEASE_OWNER,
    OWNER_SWITCHES,
    PENDING_CHECKPOINT,
    PENDING_CHECKPOINT_STATE,
    PENDING_CHECKPOINT_SUB,
    SHARD_ID,
    STARTING_HASH_KEY,
    STREAM_NAME,
    CorruptLeaseItem,
    is_lease_item,
    lease_from_item,
    new_lease_item,
)
from kcl_daemon.core.leases.reconcile import LeaseWrite, Verdict, WriteKind, reconcile
from kcl_daemon.core.leases.restart_grace import RESTART_ATTRIBUTE, RestartMark, mark_attribute
from kcl_daemon.core.leases.scan_segments import CACHE_S, scan_segments
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.errors import (
    DependencyUnavailable,
    InconsistentResponse,
    KclError,
    LeaseConflict,
    TransientNetwork,
)
from kcl_daemon.retry import LEASE_IO, STARTUP, RetryPolicy

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import (
        KeysAndAttributesUnionTypeDef,
        ScanInputTypeDef,
        TableDescriptionTypeDef,
    )

    from kcl_daemon.aws.item_types import Item

logger = logging.getLogger(__name__)

LEASE_OWNER_INDEX: Final = "LeaseOwnerToLeaseKeyIndex"
CHECKPOINT_OWNER: Final = "checkpointOwner"
#: BatchGetItem takes at most 100 keys; what it leaves unprocessed is asked for again, this many rounds.
BATCH_GET_KEYS: Final = 100
BATCH_GET_ROUNDS: Final = 5
#: threads scanning segments at once (per table object)
SCAN_THREADS: Final = 8


@dataclass(frozen=True, slots=True)
class ScanResult:
    """The leases of one full scan, and one message per item skipped as corrupt; ``workers``: the
    workers' own items (``WORKER_METRIC_STATS``) the same scan read, as stored (per-worker renewal)."""

    leases: tuple[Lease, ...]
    skipped: tuple[str, ...]
    workers: tuple[Mapping[str, Any], ...] = ()


def page_from_wire(reply: Mapping[str, Any]) -> Mapping[str, Any]:
    """A Scan or Query reply of the lean path as botocore's parser returns it (items and the page's
    last key)."""
    items = reply.get("Items")
    page: dict[str, Any] = {
        "Items": [item_from_wire(item) for item in items if isinstance(item, dict)]
        if isinstance(items, list)
        else []
    }
    last_key = reply.get("LastEvaluatedKey")
    if isinstance(last_key, dict) and last_key:
        page["LastEvaluatedKey"] = item_from_wire(last_key)
    return page


class DynamoLeaseTable:
    """Lease-table operations of contract §4.2 on one table. Thread-safe (the boto3 client is)."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        item_retry: RetryPolicy = LEASE_IO,
        setup_retry: RetryPolicy = STARTUP,
        reconcile_renewals: bool = True,
        scan_segments: int = 0,
        heartbeat_table: str | None = None,
    ) -> None:
        """``heartbeat_table``: where per-worker renewal's heartbeats are (the worker-metrics table of
        the 3.0-3.4 layout; None: its default name for this table)."""
        self._client = client
        self.heartbeats = HeartbeatPlace(
            client, heartbeat_table or legacy_table_names(None, table_name).worker_metrics
        )
        #: the lean request path for lease writes (None: botocore serves them; see kcl_daemon.aws.lean)
        self._lean = lean_client_for(client)
        self.table_name = table_name
        self._item_retry = item_retry
        self._setup_retry = setup_retry
        #: False for the lease keeper's table: its renewals are single attempts it reconciles itself
        self._reconcile_renewals = reconcile_renewals
        self.configured_segments = scan_segments
        self._segments: tuple[int, float] | None = None  # (segments, when resolved: monotonic)
        self._segments_lock = threading.Lock()
        self._scan_pool: ThreadPoolExecutor | None = None
        self._memo = LeaseMemo()

    # -- table -----------------------------------------------------------------------------------

    def create_table_if_missing(self, wait_s: float = 600.0, *, poll_s: float = 1.0) -> bool:
        """Create the table (with its GSI) unless it exists; wait until ACTIVE. True if we created it.

        The GSI is created with the table: dynalite cannot add one through UpdateTable. An existing table
        is used as it is, GSI or not.
        """
        created = False
        try:
            self._setup_retry.call(self._describe_table)
        except DependencyUnavailable:
            created = self._setup_retry.call(self._create_table)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                if self._is_active(self._setup_retry.call(self._describe_table)):
                    return created
            except DependencyUnavailable:
                pass  # just created: some backends answer ResourceNotFound for a moment
            if time.monotonic() >= deadline:
                raise DependencyUnavailable(f"lease table {self.table_name} not ACTIVE after {wait_s}s")
            time.sleep(poll_s)

    def _describe_table(self) -> TableDescriptionTypeDef:
        with map_aws_errors(f"describe lease table {self.table_name}"):
            return self._client.describe_table(TableName=self.table_name)["Table"]

    @staticmethod
    def _is_active(table: TableDescriptionTypeDef) -> bool:
        indexes = table.get("GlobalSecondaryIndexes", [])
        return table.get("TableStatus") == "ACTIVE" and all(
            index.get("IndexStatus", "ACTIVE") == "ACTIVE" for index in indexes
        )

    def _create_table(self) -> bool:
        with map_aws_errors(f"create lease table {self.table_name}"):
            try:
                self._client.create_table(
                    TableName=self.table_name,
                    KeySchema=[{"AttributeName": LEASE_KEY, "KeyType": "HASH"}],
                    AttributeDefinitions=[
                        {"AttributeName": LEASE_KEY, "AttributeType": "S"},
                        {"AttributeName": LEASE_OWNER, "AttributeType": "S"},
                    ],
                    BillingMode="PAY_PER_REQUEST",
                    GlobalSecondaryIndexes=[
                        {
                            "IndexName": LEASE_OWNER_INDEX,
                            "KeySchema": [
                                {"AttributeName": LEASE_OWNER, "KeyType": "HASH"},
                                {"AttributeName": LEASE_KEY, "KeyType": "RANGE"},
                            ],
                            "Projection": {"ProjectionType": "KEYS_ONLY"},
                        }
                    ],
                )
            except ClientError as exc:
                if error_code(exc) != "ResourceInUseException":
                    raise
                return False  # another worker created it first
        return True

    # -- reads -----------------------------------------------------------------------------------

    def list_leases(self, *, consistent: bool = False, page_size: int | None = None) -> ScanResult:
        """Every lease in the table (paginated Scan). Non-lease items are skipped silently (contract §3.4);
        corrupt lease items are skipped and their :class:`CorruptLeaseItem` messages returned."""
        return self._item_retry.call(self._list_leases, consistent, page_size)

    def scan_segments(self) -> int:
        """Segments of a full scan now (the automatic size is cached for two hours, as Java)."""
        if self.configured_segments > 0:
            return scan_segments(self.configured_segments, None)
        with self._segments_lock:
            now = time.monotonic()
            if self._segments is not None and now - self._segments[1] < CACHE_S:
                return self._segments[0]
            try:
                size = int(self._describe_table().get("TableSizeBytes", 0))
            except KclError as exc:
                logger.debug("sizing the lease-table scan: %s", exc)
                size = None
            segments = scan_segments(0, size)
            self._segments = (segments, now)
            return segments

    def _list_leases(self, consistent: bool, page_size: int | None) -> ScanResult:
        segments = self.scan_segments()
        if segments <= 1:
            whole = self._scan_segment(consistent, page_size, None, 1)
            self._memo.keep(lease.lease_key for lease in whole.leases)
            return whole
        if self._scan_pool is None:
            self._scan_pool = ThreadPoolExecutor(min(segments, SCAN_THREADS), thread_name_prefix="lease-scan")
        parts = list(
            self._scan_pool.map(
                lambda segment: self._scan_segment(consistent, page_size, segment, segments), range(segments)
            )
        )
        leases = tuple(lease for part in parts for lease in part.leases)
        self._memo.keep(lease.lease_key for lease in leases)
        return ScanResult(
            leases,
            tuple(problem for part in parts for problem in part.skipped),
            tuple(item for part in parts for item in part.workers),
        )

    def _scan_segment(
        self, consistent: bool, page_size: int | None, segment: int | None, total: int
    ) -> ScanResult:
        leases: list[Lease] = []
        skipped: list[str] = []
        workers: list[Mapping[str, Any]] = []
        args: ScanInputTypeDef = {"TableName": self.table_name, "ConsistentRead": consistent}
        if page_size is not None:
            args["Limit"] = page_size
        if segment is not None:
            args["Segment"] = segment
            args["TotalSegments"] = total
        lean = self._lean
        while True:
            with map_aws_errors(f"scan lease table {self.table_name}"):
                if lean is not None and lean.usable() and wire_safe(args):
                    page = page_from_wire(lean.call_params("Scan", dict(args)))
                else:
                    page = self._client.scan(**args)
            for item in page.get("Items", []):
                if not is_lease_item(item):
                    if is_worker_item(item):
                        workers.append(item)
                    continue
                try:
                    leases.append(self._memo.lease(item))
                except CorruptLeaseItem as exc:
                    skipped.append(str(exc))
            last_key = page.get("LastEvaluatedKey")
            if not last_key:
                return ScanResult(tuple(leases), tuple(skipped), tuple(workers))
            args["ExclusiveStartKey"] = last_key

    def get_lease(self, lease_key: str, *, consistent: bool = False) -> Lease | None:
        """The lease, or None if there is no item (or the item is not a lease).

        Raises :class:`CorruptLeaseItem` if the item is a lease that cannot be read.
        """
        return self._item_retry.call(self._get_lease, lease_key, consistent)

    def _get_lease(self, lease_key: str, consistent: bool) -> Lease | None:
        with map_aws_errors(f"get lease {lease_key}"):
            response = self._client.get_item(
                TableName=self.table_name, Key={LEASE_KEY: s_value(lease_key)}, ConsistentRead=consistent
            )
        item = response.get("Item")
        if item is None or not is_lease_item(item):
            return None
        return lease_from_item(item)

    def get_leases(
        self, lease_keys: Iterable[str], *, consistent: bool = False
    ) -> dict[str, Lease | CorruptLeaseItem | None]:
        """Several leases in BatchGetItem calls of up to 100 keys (one call instead of one GetItem per
        lease; the same read units). Each key maps to its lease, None (no item, or not a lease), or the
        :class:`CorruptLeaseItem` its item raised."""
        keys = list(dict.fromkeys(lease_keys))
        found: dict[str, Lease | CorruptLeaseItem | None] = dict.fromkeys(keys)
        for start in range(0, len(keys), BATCH_GET_KEYS):
            chunk = keys[start : start + BATCH_GET_KEYS]
            for item in self._item_retry.call(self._batch_get, chunk, consistent):
                key = item.get(LEASE_KEY, {}).get("S")
                if key not in found or not is_lease_item(item):
                    continue
                try:
                    found[key] = lease_from_item(item)
                except CorruptLeaseItem as exc:
                    found[key] = exc
        return found

    def _batch_get(self, lease_keys: list[str], consistent: bool) -> list[Item]:
        """The items of ``lease_keys`` (at most 100), asking again for what DynamoDB left unprocessed."""
        request: Mapping[str, KeysAndAttributesUnionTypeDef] = {
            self.table_name: {
                "Keys": [{LEASE_KEY: s_value(key)} for key in lease_keys],
                "ConsistentRead": consistent,
            }
        }
        items: list[Item] = []
        for attempt in range(BATCH_GET_ROUNDS):
            with map_aws_errors(f"batch get {len(lease_keys)} lease(s)"):
                response = self._client.batch_get_item(RequestItems=request)
            items.extend(response.get("Responses", {}).get(self.table_name, []))
            request = response.get("UnprocessedKeys") or {}
            if not request:
                return items
            time.sleep(min(0.05 * 2**attempt, 1.0))
        raise TransientNetwork(f"batch get of {len(lease_keys)} lease(s): keys still unprocessed")

    # -- writes ----------------------------------------------------------------------------------

    def create_lease(self, lease: Lease) -> bool:
        """PutItem the new lease unless its key exists. False if it already existed (not an error).

        A create whose outcome is unknown (a 5xx, a dropped connection) is reconciled by a consistent
        read: if the lease is there now, it is reported created (by this call or another worker's, which
        is the same lease: the key says which shard it is for); if not, the put is sent again.
        """
        for attempt in self._item_retry.retrying():
            with attempt:
                try:
                    return self._create_lease_once(lease)
                except KclError as exc:
                    if not exc.retriable:
                        raise
                    seen = self._get_lease(lease.lease_key, True)
                    verdict = reconcile(LeaseWrite(WriteKind.CREATE, lease, ""), seen)
                    logger.warning("create lease %s: %s; %s", lease.lease_key, exc, verdict.reason)
                    if verdict.verdict is Verdict.APPLIED:
                        return True
                    raise
        raise AssertionError("unreachable: the retry policy re-raises the last error")  # pragma: no cover

    def _create_lease_once(self, lease: Lease) -> bool:
        try:
            with map_aws_errors(f"create lease {lease.lease_key}"):
                self._client.put_item(
                    TableName=self.table_name,
                    Item=new_lease_item(lease),
                    ConditionExpression="attribute_not_exists(#leaseKey)",
                    ExpressionAttributeNames={"#leaseKey": LEASE_KEY},
                )
        except LeaseConflict:
            return False
        return True

    def renew(self, lease: Lease) -> Lease:
        """2.x renew: ``leaseCounter = :counter`` -> counter + 1, nothing else.

        On a condition failure the item is re-read (consistently); if it shows this owner and exactly
        counter + 1, an earlier attempt of this very renewal succeeded and that lease is returned
        (Java's protection against a retried request). Otherwise :class:`LeaseConflict`: the lease is lost.
        """
        expr = self._fenced(lease)
        expr.set(LEASE_COUNTER, n_value(lease.lease_counter + 1))
        self._extend_renew(lease, expr)
        try:
            return self._update(lease.lease_key, expr, "renew")
        except LeaseConflict:
            if not self._reconcile_renewals:
                raise
            current = self.get_lease(lease.lease_key, consistent=True)
            if lease.lease_owner is None:
                raise
            verdict = reconcile(LeaseWrite(WriteKind.RENEW, lease, lease.lease_owner), current)
            if verdict.verdict is Verdict.APPLIED and current is not None:
                return current
            raise

    def heartbeat(self, worker_id: str, mode: RenewalMode) -> WorkerItem:
        """One attempt at this worker's heartbeat (per-worker renewal), in the heartbeat place (not this
        table): the item as stored after it."""
        return self.heartbeats.heartbeat(worker_id, mode)

    def withdraw_heartbeat(self, worker_id: str) -> bool:
        """Take this worker's heartbeat away after a fall-back or on stopping; False: there was none."""
        return self.heartbeats.withdraw(worker_id)

    def list_leases_and_heartbeats(self, *, consistent: bool = False) -> ScanResult:
        """:meth:`list_leases`, its ``workers`` joined by the heartbeat place's items (inspection)."""
        scan = self.list_leases(consistent=consistent)
        return ScanResult(scan.leases, scan.skipped, (*scan.workers, *self.heartbeat_items()))

    def heartbeat_items(self) -> tuple[Mapping[str, Any], ...]:
        """Every item of the heartbeat place (the workers' heartbeats and metrics reports), as stored;
        retried under ``LEASE_IO`` even on the keeper's single-attempt twin (the taker reads it there)."""
        return LEASE_IO.call(self.heartbeats.items)

    def take(self, lease: Lease, owner: str) -> Lease:
        """Take an unowned or expired lease, or steal one: fenced on the counter only (2.x taker).

        ``ownerSwitchesSinceCheckpoint`` is incremented when ownership really moves (previous owner set
        and different), by the same rule as :meth:`Lease.taken_by`; a pending ``checkpointOwner`` is
        removed, as the 3.x take does (2.x tables never have one).
        """
        expr = self._fenced(lease)
        expr.set(LEASE_COUNTER, n_value(lease.lease_counter + 1))
        expr.set(LEASE_OWNER, s_value(owner))
        if lease.taken_by(owner).owner_switches_since_checkpoint > lease.owner_switches_since_checkpoint:
            expr.add(OWNER_SWITCHES, n_value(1))
        if lease.checkpoint_owner is not None:
            expr.remove(CHECKPOINT_OWNER)
        return self._update(lease.lease_key, expr, f"take by {owner}")

    def checkpoint(
        self,
        lease: Lease,
        checkpoint: ExtendedSequenceNumber,
        *,
        pending: ExtendedSequenceNumber | None = None,
        child_shard_ids: Iterable[str] | None = None,
    ) -> Lease:
        """Write a checkpoint (also the SHARD_END one), fenced on the counter; owner switches reset to 0.

        ``pending`` sets the prepared checkpoint; without it the pending fields are removed. Non-empty
        ``child_shard_ids`` are written too (shard end).
        """
        expr = self._fenced(lease)
        expr.set(LEASE_COUNTER, n_value(lease.lease_counter + 1))
        expr.set(CHECKPOINT, s_value(checkpoint.sequence_number))
        expr.set(CHECKPOINT_SUB, n_value(checkpoint.sub_sequence_number))
        expr.set(OWNER_SWITCHES, n_value(0))
        if pending is None:
            expr.remove(PENDING_CHECKPOINT)
            expr.remove(PENDING_CHECKPOINT_SUB)
        else:
            expr.set(PENDING_CHECKPOINT, s_value(pending.sequence_number))
            expr.set(PENDING_CHECKPOINT_SUB, n_value(pending.sub_sequence_number))
        expr.remove(PENDING_CHECKPOINT_STATE)  # the multilang daemon never prepares application state
        children = sorted(set(child_shard_ids or ()))
        if children:
            expr.set(CHILD_SHARD_IDS, {"SS": children})
        stream = lease.stream
        if stream is not None:  # as Java's multi-stream serializer, for leases an older writer created
            expr.set(STREAM_NAME, s_value(stream))
            expr.set(SHARD_ID, s_value(lease.shard_id))
        return self._update(lease.lease_key, expr, f"checkpoint {checkpoint}")

    def update_child_shard_ids(self, lease_key: str, child_shard_ids: Iterable[str]) -> bool:
        """Meta update (no counter change) if the lease exists; False if it does not."""
        children = sorted(set(child_shard_ids))
        if not children:
            raise ValueError(f"lease {lease_key}: no child shard ids to write")
        expr = Expression()
        expr.require_exists(LEASE_KEY)
        expr.set(CHILD_SHARD_IDS, {"SS": children})
        return self._item_retry.call(self._meta_update, lease_key, expr, "set child shard ids")

    def update_hash_range(self, lease_key: str, starting_hash_key: int, ending_hash_key: int) -> bool:
        """Meta update (no counter change) if the lease exists; False if it does not."""
        expr = Expression()
        expr.require_exists(LEASE_KEY)
        expr.set(STARTING_HASH_KEY, s_value(str(starting_hash_key)))
        expr.set(ENDING_HASH_KEY, s_value(str(ending_hash_key)))
        return self._item_retry.call(self._meta_update, lease_key, expr, "set hash range")

    def evict(self, lease: Lease) -> Lease:
        """2.x evict (tools): conditioned on the owner we saw; removes the owner and bumps the counter.

        The counter is bumped with ``ADD 1`` rather than Java's ``SET :counter+1``: the condition is on
        the owner only, so a stale local counter must not move the fencing counter backwards.
        """
        expr = Expression()
        if lease.lease_owner is None:
            expr.require_absent(LEASE_OWNER)
            expr.require_exists(LEASE_KEY)
        else:
            expr.require_equal(LEASE_OWNER, s_value(lease.lease_owner))
        expr.remove(LEASE_OWNER)
        expr.add(LEASE_COUNTER, n_value(1))
        return self._update(lease.lease_key, expr, "evict")

    def release(self, lease: Lease) -> Lease:
        """Our graceful release: fenced on the counter, removes the owner and bumps the counter."""
        expr = self._fenced(lease)
        expr.set(LEASE_COUNTER, n_value(lease.lease_counter + 1))
        expr.remove(LEASE_OWNER)
        return self._update(lease.lease_key, expr, "release")

    def mark_restart(self, lease: Lease, until_s: float) -> Lease:
        """Our last write of a lease kept for this worker's restart: fenced on the counter, bumps it and
        writes the grace (until ``until_s``, epoch seconds) in :data:`RESTART_ATTRIBUTE`
        (:mod:`kcl_daemon.core.leases.restart_grace`); any later write of the lease voids it."""
        if lease.lease_owner is None:
            raise ValueError(f"lease {lease.lease_key}: only an owned lease can wait for its owner")
        expr = self._fenced(lease)
        expr.set(LEASE_COUNTER, n_value(lease.lease_counter + 1))
        mark = RestartMark(lease.lease_owner, lease.lease_counter + 1, until_s)
        expr.set(RESTART_ATTRIBUTE, mark_attribute(mark))
        return self._update(lease.lease_key, expr, "restart mark")

    def delete(self, lease_key: str) -> None:
        """Delete the item unconditionally (cleanup of finished parents, tests)."""
        self._item_retry.call(self._delete, lease_key)

    def _delete(self, lease_key: str) -> None:
        with map_aws_errors(f"delete lease {lease_key}"):
            self._client.delete_item(TableName=self.table_name, Key={LEASE_KEY: s_value(lease_key)})

    # -- plumbing --------------------------------------------------------------------------------

    def _extend_renew(self, lease: Lease, expr: Expression) -> None:
        """More attributes for a renewal (the 3.x table adds ``throughputKBps``); none here."""

    @staticmethod
    def _fenced(lease: Lease) -> Expression:
        expr = Expression()
        expr.require_equal(LEASE_COUNTER, n_value(lease.lease_counter))
        return expr

    def _update(self, lease_key: str, expr: Expression, what: str) -> Lease:
        """One fenced UpdateItem of a lease (renewals, takes, checkpoints, hand-offs): on the lean
        request path when the client allows it and the parameters need no conversion, else botocore."""
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": {LEASE_KEY: s_value(lease_key)},
            "ReturnValues": "ALL_NEW",
            **expr.arguments(),
        }
        lean = self._lean
        with map_aws_errors(f"{what} lease {lease_key}"):
            if lean is not None and lean.usable() and wire_safe(params):
                response: Mapping[str, Any] = lean.call_params("UpdateItem", params)
                if isinstance(response.get("Attributes"), dict):
                    response = {"Attributes": item_from_wire(response["Attributes"])}
            else:
                response = self._client.update_item(**params)
        attributes = response.get("Attributes")
        if not isinstance(attributes, Mapping):  # the write's outcome is unknown: reconciled by a read
            raise InconsistentResponse(f"{what} lease {lease_key}: the reply carries no item")
        return lease_from_item(attributes)

    def _meta_update(self, lease_key: str, expr: Expression, what: str) -> bool:
        try:
            with map_aws_errors(f"{what} of lease {lease_key}"):
                self._client.update_item(
                    TableName=self.table_name, Key={LEASE_KEY: s_value(lease_key)}, **expr.arguments()
                )
        except LeaseConflict:
            return False
        return True
