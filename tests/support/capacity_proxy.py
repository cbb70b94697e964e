"""A counting HTTP proxy in front of dynalite: DynamoDB calls and the read/write units they consume.

Every request is forwarded unchanged but for ``"ReturnConsumedCapacity": "TOTAL"``, which the proxy sets
so that dynalite reports the units each call consumed, computed from the item sizes the way DynamoDB
documents it (reads: 4 KB units, halved when eventually consistent; writes: 1 KB units of the larger of
the old and the new item). The clients never look at ``ConsumedCapacity``; dynalite checks no request
signature, so the changed body is accepted. On top of what dynalite reports the proxy adds what it does
not model:

* a conditional write whose condition fails still consumes a write unit (DynamoDB charges it): 1 WCU;
* a read that returns nothing still consumes the minimum: 0.5 RCU eventually consistent, 1 strongly;
* a write to a lease table that sets or removes ``leaseOwner`` also writes the ``LeaseOwnerToLeaseKeyIndex``
  GSI (keys only, well under 1 KB): counted as 2 WCU when it sets the owner (the old index entry is
  deleted and the new one written, an upper bound: from no owner it is 1) and 1 WCU when it removes it.

Counts are per (table, operation): :attr:`CapacityProxy.calls`, :attr:`CapacityProxy.read_units`,
:attr:`CapacityProxy.write_units`; :meth:`CapacityProxy.snapshot` copies them all at once. With
``label_items``, a lease-table call that is not about a lease has what it is about added to its operation
(:func:`item_label`: ``UpdateItem Leader``, ``Scan worker metrics``, ``Query LeaseOwnerToLeaseKeyIndex``),
and a lease update what it writes (``UpdateItem renewal``: the counter alone; ``owner``, ``checkpoint``,
``other``), so that a breakdown tells renewals from the rest and from the leader lock and the worker
metrics a KCL 3.5 layout keeps in the same table. Request and
response bodies are parsed, never logged. Independent of kcl_daemon.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.support.loopback_proxy import LoopbackProxy, read_message

READS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem"})
WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"})
OWNER = "leaseOwner"
LEASE_KEY = "leaseKey"
ENTITY_TYPE = "entityType"
#: the KCL 3.x coordinator items a single-table layout keeps in the lease table under these keys
COORDINATOR_ITEMS = frozenset({"Leader", "Migration3.0", "TableMigration3.5"})
WORKER_METRICS = "worker metrics"
#: what a renewal writes: the counter, and in a 3.x table the lease's throughput
RENEWAL_ATTRIBUTES = frozenset({"leaseCounter", "throughputKBps"})
_EXPRESSION_WORDS = frozenset({"SET", "REMOVE", "ADD", "DELETE", "if_not_exists", "list_append"})
Key = tuple[str, str]  # (table, operation)


@dataclass(frozen=True, slots=True)
class Usage:
    """Calls and units per (table, operation) at one instant."""

    calls: Counter[Key]
    read_units: Counter[Key]
    write_units: Counter[Key]

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            self.calls - other.calls,
            _minus(self.read_units, other.read_units),
            _minus(self.write_units, other.write_units),
        )

    def total_calls(self, table_prefix: str = "") -> int:
        return sum(n for (table, _), n in self.calls.items() if table.startswith(table_prefix))

    def total_read_units(self, table_prefix: str = "") -> float:
        return sum(n for (table, _), n in self.read_units.items() if table.startswith(table_prefix))

    def total_write_units(self, table_prefix: str = "") -> float:
        return sum(n for (table, _), n in self.write_units.items() if table.startswith(table_prefix))


def _minus(a: Counter[Key], b: Counter[Key]) -> Counter[Key]:
    out: Counter[Key] = Counter()
    for key in set(a) | set(b):
        out[key] = a.get(key, 0) - b.get(key, 0)
    return out


def _sets_or_removes_owner(request: dict[str, Any]) -> str | None:
    """Whether ("set", "remove", None)  an UpdateItem/PutItem does to ``leaseOwner``."""
    updates = request.get("AttributeUpdates")
    if isinstance(updates, dict) and OWNER in updates:
        return "remove" if updates[OWNER].get("Action") == "DELETE" else "set"
    expression = request.get("UpdateExpression")
    if isinstance(expression, str):
        names = [k for k, v in (request.get("ExpressionAttributeNames") or {}).items() if v == OWNER]
        tokens = expression.replace(",", " ").replace("=", " = ").split()
        section = None
        for index, token in enumerate(tokens):
            if token.upper() in {"SET", "REMOVE", "ADD", "DELETE"}:
                section = token.upper()
                continue
            if token == OWNER or token in names:
                before_equals = index + 1 < len(tokens) and tokens[index + 1] == "="
                if section == "SET" and before_equals:
                    return "set"
                if section == "REMOVE":
                    return "remove"
    item = request.get("Item")
    if isinstance(item, dict) and OWNER in item:
        return "set"
    return None


def item_label(request: dict[str, Any]) -> str:
    """What a lease-table call is about, beyond a lease: the index a Query reads, the coordinator item it
    names (``Leader``, ``Migration3.0``, ``TableMigration3.5``), ``worker metrics`` for a worker's metrics
    item (keyed by its worker id) or a Scan filtered on that ``entityType``; "" for a lease (a key with a
    shard id) and an unfiltered Scan."""
    index = request.get("IndexName")
    if isinstance(index, str):
        return index
    key = request.get("Key") or request.get("Item")
    value = key.get(LEASE_KEY) if isinstance(key, dict) else None
    name = value.get("S") if isinstance(value, dict) else None
    if isinstance(name, str):
        if "shardId-" in name:
            return lease_write_kind(request)
        return name if name in COORDINATOR_ITEMS else WORKER_METRICS
    names = request.get("ExpressionAttributeNames") or {}
    if isinstance(names, dict) and ENTITY_TYPE in names.values():
        values = request.get("ExpressionAttributeValues") or {}
        kinds = sorted(
            str(v["S"])
            for v in (values.values() if isinstance(values, dict) else ())
            if isinstance(v, dict) and "S" in v
        )
        return ",".join(WORKER_METRICS if kind == "WORKER_METRIC_STATS" else kind for kind in kinds)
    return ""


def written_attributes(request: dict[str, Any]) -> set[str]:
    """The attributes an UpdateItem names in what it writes (``AttributeUpdates`` or ``UpdateExpression``,
    aliases resolved; an attribute a SET only reads, as in ``a = b + :one``, counts too)."""
    updates = request.get("AttributeUpdates")
    if isinstance(updates, dict):
        return set(updates)
    expression = request.get("UpdateExpression")
    if not isinstance(expression, str):
        return set()
    names = request.get("ExpressionAttributeNames") or {}
    aliases = names if isinstance(names, dict) else {}
    out = set()
    for token in re.split(r"[\s,=+\-()]+", expression):
        if not token or token.startswith(":") or token in _EXPRESSION_WORDS:
            continue
        out.add(str(aliases.get(token, token)))
    return out


def lease_write_kind(request: dict[str, Any]) -> str:
    """``renewal`` (the counter alone), ``checkpoint``, ``owner`` (a take, an assignment, a hand-off, a
    release) or ``other`` for a lease update; "" for a call that writes no attribute (a read, a delete)."""
    written = written_attributes(request)
    if not written:
        return ""
    if written <= RENEWAL_ATTRIBUTES:
        return "renewal"
    if "checkpoint" in written:
        return "checkpoint"
    if OWNER in written or "checkpointOwner" in written:
        return "owner"
    return "other"


@dataclass
class CapacityProxy(LoopbackProxy):
    thread_name = "capacity-proxy"

    upstream: str  # http://127.0.0.1:port of dynalite
    #: tables with the owner GSI (lease tables); a name ending like this counts GSI writes
    gsi_tables: tuple[str, ...] = ()
    #: add :func:`item_label` to the operation of a call to one of ``gsi_tables``
    label_items: bool = False
    endpoint: str = ""
    calls: Counter[Key] = field(default_factory=Counter)
    read_units: Counter[Key] = field(default_factory=Counter)
    write_units: Counter[Key] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._init_proxy(self.upstream)
        self._lock = threading.Lock()

    def snapshot(self) -> Usage:
        with self._lock:
            return Usage(Counter(self.calls), Counter(self.read_units), Counter(self.write_units))

    # -- accounting ----------------------------------------------------------------------------------

    def _account(
        self, operation: str, request: dict[str, Any], status: int, response: dict[str, Any]
    ) -> None:
        table = str(request.get("TableName") or next(iter(request.get("RequestItems") or {}), "?"))
        label = item_label(request) if self.label_items and table in self.gsi_tables else ""
        key = (table, f"{operation} {label}" if label else operation)
        consistent = bool(request.get("ConsistentRead"))
        minimum_read = 1.0 if consistent else 0.5
        reads = writes = 0.0
        consumed = response.get("ConsumedCapacity")
        entries = consumed if isinstance(consumed, list) else [consumed] if consumed else []
        reported = sum(float(entry.get("CapacityUnits", 0)) for entry in entries if isinstance(entry, dict))
        if operation in READS:
            reads = max(reported, minimum_read) if status == 200 else 0.0
        elif operation in WRITES:
            if status == 200:
                writes = max(reported, 1.0)
            elif "ConditionalCheckFailed" in str(response.get("__type", "")):
                writes = 1.0
            if status == 200 and table in self.gsi_tables and operation in {"UpdateItem", "PutItem"}:
                change = _sets_or_removes_owner(request)
                writes += 2.0 if change == "set" else 1.0 if change == "remove" else 0.0
        with self._lock:
            self.calls[key] += 1
            if reads:
                self.read_units[key] += reads
            if writes:
                self.write_units[key] += writes

    # -- one client connection -------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                message = await read_message(reader)
                if message is None:
                    return
                head, headers, body = message
                operation = headers.get("x-amz-target", "").rpartition(".")[2] or "?"
                try:
                    request = json.loads(body) if body else {}
                except ValueError:
                    request = {}
                if isinstance(request, dict) and (operation in READS or operation in WRITES):
                    request["ReturnConsumedCapacity"] = "TOTAL"
                    body = json.dumps(request).encode()
                    head = _with_length(head, len(body))
                response = None
                for _ in range(2):  # dynalite closes an idle kept-alive connection: once more on a new one
                    reused = upstream is not None
                    if upstream is None:
                        upstream = await asyncio.open_connection(self._up_host, self._up_port)
                    try:
                        upstream[1].write(head + body)
                        await upstream[1].drain()
                        response = await read_message(upstream[0])
                    except (ConnectionError, asyncio.IncompleteReadError):
                        response = None
                    if response is not None or not reused:
                        break
                    upstream[1].close()
                    upstream = None
                if response is None:
                    return
                status = int(response[0].split(b" ", 2)[1])
                try:
                    parsed = json.loads(response[2]) if response[2] else {}
                except ValueError:
                    parsed = {}
                self._account(
                    operation,
                    request if isinstance(request, dict) else {},
                    status,
                    parsed if isinstance(parsed, dict) else {},
                )
                writer.write(response[0] + response[2])
                await writer.drain()
                if response[1].get("connection", "").lower() == "close":
                    upstream[1].close()
                    upstream = None
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._writers.discard(writer)
            if upstream is not None:
                upstream[1].close()
            writer.close()


def _with_length(head: bytes, length: int) -> bytes:
    lines = head.decode("latin-1").split("\r\n")
    kept = [line for line in lines if line and not line.lower().startswith("content-length:")]
    return ("\r\n".join(kept) + f"\r\nContent-Length: {length}\r\n\r\n").encode("latin-1")
