"""Where per-worker renewal keeps its heartbeats: the worker-metrics table of the KCL 3.0-3.4 layout
(``<app>-WorkerMetricStats``, key ``wid``; docs/leases.md "Renewing per worker", contract §3.9).

The item shapes and conditions are :mod:`kcl_daemon.core.leases.heartbeat`'s; this is their I/O: one
UpdateItem per heartbeat, with the worker's steal notices (the table is created, as Java 3.0-3.4
create it, when the first heartbeat finds it missing), the withdrawal after a fall-back (a delete
when the item holds nothing but the heartbeat, else a REMOVE of the heartbeat's attributes), and the
scan each taker pass reads (a missing table is an empty one). Blocking (boto3); single attempts,
the caller retries.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kcl_daemon.aws.coordinator_state import CoordinatorStore
from kcl_daemon.aws.errors import map_aws_errors
from kcl_daemon.core.leases.heartbeat import (
    WORKER_KEY,
    HeartbeatWrite,
    RenewalMode,
    WorkerItem,
    heartbeat_removal,
    heartbeat_withdrawal,
    heartbeat_write,
    worker_item_from,
)
from kcl_daemon.core.leases.lease_reads import StealNotice, notice_write
from kcl_daemon.errors import DependencyUnavailable, InconsistentResponse, LeaseConflict

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import ScanInputTypeDef, UpdateItemInputTypeDef

logger = logging.getLogger(__name__)


class HeartbeatPlace:
    """The heartbeat items of one application, in its worker-metrics table ``table_name``."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._client = client
        self.table_name = table_name
        self._store = CoordinatorStore(client, table_name, WORKER_KEY)

    def heartbeat(
        self, worker_id: str, mode: RenewalMode, notices: Mapping[str, StealNotice] | None = None
    ) -> WorkerItem:
        """One heartbeat, with this worker's steal notices (``notices``; None: left as they are): the
        item as stored after it. :class:`LeaseConflict` when the item carries lease attributes (never
        written by a heartbeat)."""
        write = heartbeat_write(worker_id, mode)
        if notices is not None:
            write = notice_write(write, notices)
        try:
            attributes = self._update(write, f"heartbeat of worker {worker_id}")
        except DependencyUnavailable:
            if self._store.exists():
                raise
            if self._store.create_table_if_missing():
                logger.info("created the worker-metrics table %s for the heartbeats", self.table_name)
            attributes = self._update(write, f"heartbeat of worker {worker_id}")
        return worker_item_from(attributes)

    def withdraw(self, worker_id: str) -> bool:
        """Take this worker's heartbeat away (after a fall-back, or when it stops): the item is deleted
        when it holds nothing else, else the heartbeat's attributes go. False: there was none."""
        what = f"withdrawal of worker {worker_id}'s heartbeat"
        delete = heartbeat_withdrawal(worker_id)
        try:
            with map_aws_errors(what):
                self._client.delete_item(
                    TableName=self.table_name,
                    Key=delete.key,
                    ConditionExpression=delete.condition,
                    ExpressionAttributeNames=delete.names,
                    ExpressionAttributeValues=delete.values,
                )
        except LeaseConflict:
            pass  # a metrics report shares the item (or there is no heartbeat)
        else:
            return True
        try:
            self._update(heartbeat_removal(worker_id), what)
        except LeaseConflict:
            return False
        except DependencyUnavailable:
            if self._store.exists():
                raise
            return False  # no table: no heartbeat
        return True

    def items(self) -> tuple[Mapping[str, Any], ...]:
        """Every item of the table, as stored (eventually consistent scan); none when it is missing."""
        args: ScanInputTypeDef = {"TableName": self.table_name}
        items: list[Mapping[str, Any]] = []
        while True:
            try:
                with map_aws_errors(f"scan worker-metrics table {self.table_name}"):
                    page = self._client.scan(**args)
            except DependencyUnavailable:
                if items or self._store.exists():
                    raise
                return ()
            items.extend(page.get("Items", []))
            last_key = page.get("LastEvaluatedKey")
            if not last_key:
                return tuple(items)
            args["ExclusiveStartKey"] = last_key

    def _update(self, write: HeartbeatWrite, what: str) -> Mapping[str, Any]:
        args: UpdateItemInputTypeDef = {
            "TableName": self.table_name,
            "Key": write.key,
            "UpdateExpression": write.update,
            "ConditionExpression": write.condition,
            "ExpressionAttributeNames": write.names,
            "ReturnValues": "ALL_NEW",
        }
        if write.values:
            args["ExpressionAttributeValues"] = write.values
        with map_aws_errors(what):
            response = self._client.update_item(**args)
        attributes: object = response.get("Attributes")
        if not isinstance(attributes, Mapping):
            raise InconsistentResponse(f"{what}: the reply carries no item")
        return attributes
