"""The lease table's KCL 3.x operations (contract §3.1, §4.2, §5.1, §5.3) on top of :class:`DynamoLeaseTable`.

* :meth:`LeaseTable3x.lease_keys_owned_by`: query the ``LeaseOwnerToLeaseKeyIndex`` GSI (lease
  discovery: a worker never scans the table in 3.x mode);
* :meth:`LeaseTable3x.assign`: the leader's move (and an owner completing a hand-off): conditional on
  the owner, the ``checkpointOwner`` (or their absence) and, for the leader, the counter it read;
  ``SET leaseOwner``, ``REMOVE checkpointOwner``, ``ADD leaseCounter 1``;
* :meth:`LeaseTable3x.initiate_handoff`: ``leaseOwner`` := new, ``checkpointOwner`` := current owner,
  counter unchanged (so the current owner keeps renewing while its processor checkpoints);
* renewals also write ``throughputKBps`` when a throughput source knows it;
* :meth:`release` (graceful shutdown) also clears a pending ``checkpointOwner``, so a worker stopping
  mid-hand-off never leaves a lease stuck (KCL#1718).

In 2.x mode the class behaves exactly as :class:`DynamoLeaseTable` (no throughput source is set).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kcl_daemon.aws.errors import map_aws_errors
from kcl_daemon.aws.lean.dynamodb import wire_safe
from kcl_daemon.aws.lease_table import (
    CHECKPOINT_OWNER,
    LEASE_OWNER_INDEX,
    DynamoLeaseTable,
    page_from_wire,
)
from kcl_daemon.aws.update_expression import Expression, n_value, s_value
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import (
    LEASE_COUNTER,
    LEASE_KEY,
    LEASE_OWNER,
    OWNER_SWITCHES,
    THROUGHPUT_KBPS,
)
from kcl_daemon.retry import SINGLE_ATTEMPT

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import QueryInputTypeDef

#: lease key -> the throughput to write with its renewal (None: nothing known yet)
ThroughputSource = Callable[[str], float | None]


def format_kbps(value: float) -> str:
    """6 decimal places, as Java rounds it."""
    return f"{round(value, 6):.6f}".rstrip("0").rstrip(".") or "0"


class LeaseTable3x(DynamoLeaseTable):
    throughput_source: ThroughputSource | None = None
    #: a twin on another client (the lease keeper's) takes its renewals' throughput from this table
    _throughput_of: LeaseTable3x | None = None

    def twin(self, client: DynamoDBClient) -> LeaseTable3x:
        """This table on ``client``, for the lease keeper: single attempts (no retry, no re-read of its
        own), renewals with the throughput this table's source knows."""
        twin = LeaseTable3x(
            client,
            self.table_name,
            item_retry=SINGLE_ATTEMPT,
            reconcile_renewals=False,
            heartbeat_table=self.heartbeats.table_name,
        )
        twin._throughput_of = self
        return twin

    def lease_keys_owned_by(self, worker_id: str) -> list[str]:
        """Keys the GSI lists for ``worker_id`` (eventually consistent: read each item before adopting)."""
        return self._item_retry.call(self._query_owner, worker_id)

    def _query_owner(self, worker_id: str) -> list[str]:
        keys: list[str] = []
        args: QueryInputTypeDef = {
            "TableName": self.table_name,
            "IndexName": LEASE_OWNER_INDEX,
            "KeyConditionExpression": "#o = :o",
            "ExpressionAttributeNames": {"#o": LEASE_OWNER},
            "ExpressionAttributeValues": {":o": s_value(worker_id)},
        }
        lean = self._lean
        while True:
            with map_aws_errors(f"query {LEASE_OWNER_INDEX} for {worker_id}"):
                if lean is not None and lean.usable() and wire_safe(args):
                    page = page_from_wire(lean.call_params("Query", dict(args)))
                else:
                    page = self._client.query(**args)
            keys.extend(item[LEASE_KEY]["S"] for item in page.get("Items", []))
            if not page.get("LastEvaluatedKey"):
                return keys
            args["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def gsi_active(self) -> bool:
        """Whether the ``LeaseOwnerToLeaseKeyIndex`` exists and is ACTIVE (the 2.x -> 3.x readiness check)."""
        table = self._item_retry.call(self._describe_table)
        return any(
            index.get("IndexName") == LEASE_OWNER_INDEX and index.get("IndexStatus", "ACTIVE") == "ACTIVE"
            for index in table.get("GlobalSecondaryIndexes", [])
        )

    def has_owner_index(self) -> bool:
        """Whether the ``LeaseOwnerToLeaseKeyIndex`` exists (in any state)."""
        table = self._item_retry.call(self._describe_table)
        return any(
            index.get("IndexName") == LEASE_OWNER_INDEX for index in table.get("GlobalSecondaryIndexes", [])
        )

    def delete_owner_index(self) -> None:
        """UpdateTable: delete the ``LeaseOwnerToLeaseKeyIndex`` (a rollback to 2.x, as Java's tool)."""
        with map_aws_errors(f"delete {LEASE_OWNER_INDEX} of {self.table_name}"):
            self._client.update_table(
                TableName=self.table_name,
                GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": LEASE_OWNER_INDEX}}],
            )

    def assign(self, lease: Lease, new_owner: str, *, fence_counter: bool = True) -> Lease:
        """Move ``lease`` (as read) to ``new_owner``; see the module docstring. Raises LeaseConflict."""
        expr = Expression()
        expr.require_exists(LEASE_KEY)
        if lease.lease_owner is None:
            expr.require_absent(LEASE_OWNER)
        else:
            expr.require_equal(LEASE_OWNER, s_value(lease.lease_owner))
        if lease.checkpoint_owner is None:
            expr.require_absent(CHECKPOINT_OWNER)
        else:
            expr.require_equal(CHECKPOINT_OWNER, s_value(lease.checkpoint_owner))
        if fence_counter:
            expr.require_equal(LEASE_COUNTER, n_value(lease.lease_counter))
        expr.set(LEASE_OWNER, s_value(new_owner))
        expr.remove(CHECKPOINT_OWNER)
        expr.add(LEASE_COUNTER, n_value(1))
        actual = lease.checkpoint_owner or lease.lease_owner
        if actual is not None and actual != new_owner:
            expr.add(OWNER_SWITCHES, n_value(1))
        return self._update(lease.lease_key, expr, f"assign to {new_owner}")

    def initiate_handoff(self, lease: Lease, new_owner: str) -> Lease:
        """Leader: start a graceful hand-off of an owned lease to ``new_owner`` (contract §5.3 step 1)."""
        if lease.lease_owner is None:
            raise ValueError(f"lease {lease.lease_key} has no owner to hand off from")
        expr = Expression()
        expr.require_equal(LEASE_OWNER, s_value(lease.lease_owner))
        expr.require_absent(CHECKPOINT_OWNER)
        expr.require_exists(LEASE_KEY)
        expr.set(LEASE_OWNER, s_value(new_owner))
        expr.set(CHECKPOINT_OWNER, s_value(lease.lease_owner))
        return self._update(lease.lease_key, expr, f"hand-off to {new_owner}")

    def release(self, lease: Lease) -> Lease:
        expr = self._fenced(lease)
        expr.set(LEASE_COUNTER, n_value(lease.lease_counter + 1))
        expr.remove(LEASE_OWNER)
        # Always: our copy may predate the leader's hand-off mark (the counter does not change for it).
        expr.remove(CHECKPOINT_OWNER)
        return self._update(lease.lease_key, expr, "release")

    def _extend_renew(self, lease: Lease, expr: Expression) -> None:
        source = (self._throughput_of or self).throughput_source
        if source is None:
            return
        kbps = source(lease.lease_key)
        if kbps is not None:
            expr.set(THROUGHPUT_KBPS, {"N": format_kbps(kbps)})
