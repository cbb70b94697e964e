"""Conversion between lease-table items and :class:`Lease`, with the Java KCL's attribute names and types.

Items are in the DynamoDB low-level client's attribute-value shape, e.g.
``{"leaseKey": {"S": "shardId-000000000001"}, "leaseCounter": {"N": "3"}, "parentShardId": {"SS": [...]}}``.

Rules (contract §3.2, §3.4):

* Every attribute name and DynamoDB type is the one the Java serializer uses; the names appear only here.
* Attributes we do not know are kept in ``Lease.extra`` and written back untouched.
* ``is_lease_item``: an item whose ``entityType`` exists and is not ``LEASE`` is not a lease (KCL 3.5
  keeps the leader lock, migration state and worker metrics in the same table).
* Tolerated Java quirks: ``pendingCheckpointState`` stored as N (kept verbatim in ``extra``, as Java
  ignores it too); ``throughputKBps`` in ``Double.toString`` form such as ``1.0E-4``; integers written
  as ``3.0`` or ``3E0``; an attribute of type NULL reads as absent, as Java's ``safeGet*`` do.
* Anything else malformed raises :class:`CorruptLeaseItem`, naming the lease key and the attribute, so
  the shell can skip that one item with a clear warning.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Final, Protocol

from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import ExtendedSequenceNumber, InvalidSequenceNumber

AttributeValue = Mapping[str, object]
Item = Mapping[str, AttributeValue]

LEASE_KEY: Final = "leaseKey"
LEASE_OWNER: Final = "leaseOwner"
LEASE_COUNTER: Final = "leaseCounter"
CHECKPOINT: Final = "checkpoint"
CHECKPOINT_SUB: Final = "checkpointSubSequenceNumber"
OWNER_SWITCHES: Final = "ownerSwitchesSinceCheckpoint"
PARENT_SHARD_ID: Final = "parentShardId"  # singular name, string set (contract §3.2)
PENDING_CHECKPOINT: Final = "pendingCheckpoint"
PENDING_CHECKPOINT_SUB: Final = "pendingCheckpointSubSequenceNumber"
PENDING_CHECKPOINT_STATE: Final = "pendingCheckpointState"
CHILD_SHARD_IDS: Final = "childShardIds"
STARTING_HASH_KEY: Final = "startingHashKey"
ENDING_HASH_KEY: Final = "endingHashKey"
THROUGHPUT_KBPS: Final = "throughputKBps"
CHECKPOINT_OWNER: Final = "checkpointOwner"
ENTITY_TYPE: Final = "entityType"
STREAM_NAME: Final = "streamName"  # holds the serialized stream identifier
SHARD_ID: Final = "shardId"

LEASE_ENTITY_TYPE: Final = "LEASE"

_KNOWN: Final = frozenset(
    {
        LEASE_KEY, LEASE_OWNER, LEASE_COUNTER, CHECKPOINT, CHECKPOINT_SUB, OWNER_SWITCHES,
        PARENT_SHARD_ID, PENDING_CHECKPOINT, PENDING_CHECKPOINT_SUB, PENDING_CHECKPOINT_STATE,
        CHILD_SHARD_IDS, STARTING_HASH_KEY, ENDING_HASH_KEY, THROUGHPUT_KBPS, CHECKPOINT_OWNER,
        ENTITY_TYPE, STREAM_NAME, SHARD_ID,
    }
)  # fmt: skip


class ScanResultLike(Protocol):
    """One decoded scan of a lease table: the leases, and the keys of items that could not be decoded."""

    @property
    def leases(self) -> Sequence[Lease]: ...

    @property
    def skipped(self) -> Sequence[str]: ...


class CorruptLeaseItem(ValueError):
    """A lease-table item that cannot be read as a lease. The shell skips it with a warning."""

    def __init__(self, lease_key: str | None, attribute: str, problem: str) -> None:
        self.lease_key = lease_key
        self.attribute = attribute
        self.problem = problem
        where = lease_key if lease_key is not None else "<without leaseKey>"
        super().__init__(f"corrupt lease item {where}: attribute {attribute}: {problem}")


def is_lease_item(item: Item) -> bool:
    """contract §3.4: skip every item whose ``entityType`` exists and is not ``LEASE``."""
    entity = item.get(ENTITY_TYPE)
    return entity is None or (isinstance(entity, Mapping) and dict(entity) == {"S": LEASE_ENTITY_TYPE})


class _Reader:
    """Typed access to one item's attributes; every failure names the lease key and attribute."""

    def __init__(self, item: Item) -> None:
        self.item = item
        self.key: str | None = None

    def fail(self, name: str, problem: str) -> CorruptLeaseItem:
        return CorruptLeaseItem(self.key, name, problem)

    def raw(self, name: str, dtype: str) -> object | None:
        value = self.item.get(name)
        if value is None:
            return None
        if not isinstance(value, Mapping) or len(value) != 1:
            raise self.fail(name, f"not a DynamoDB attribute value: {value!r}")
        if value.get("NULL") is True:
            return None
        if dtype not in value:
            raise self.fail(name, f"expected DynamoDB type {dtype}, found {next(iter(value))}")
        return value[dtype]

    def string(self, name: str) -> str | None:
        value = self.raw(name, "S")
        if value is not None and not isinstance(value, str):
            raise self.fail(name, f"S value is not a string: {value!r}")
        return value

    def integer(self, name: str, *, default: int | None = None) -> int | None:
        text = self.raw(name, "N")
        if text is None:
            return default
        if not isinstance(text, str):
            raise self.fail(name, f"N value is not a string: {text!r}")
        if len(text) <= 18 and text.isascii() and text.isdigit():
            return int(text)  # the common case (plain digits, below 10^18): no Decimal needed
        if len(text) > _MAX_INTEGER_CHARS:
            raise self.fail(name, f"not an integer in Java's long range: {_shown(text)}")
        try:
            number = Decimal(text)
        except InvalidOperation:
            raise self.fail(name, f"not a number: {text!r}") from None
        if number.is_finite() and number.adjusted() > 18:
            # before int(): "1e100000000" is 11 characters and a 10^8-digit integer
            raise self.fail(name, f"not an integer in Java's long range: {_shown(text)}")
        if not number.is_finite() or number != number.to_integral_value():
            raise self.fail(name, f"not an integer: {text!r}")
        result = int(number)
        if result < 0:
            raise self.fail(name, f"negative: {text!r}")
        if result > _LONG_MAX:
            raise self.fail(name, f"not an integer in Java's long range: {_shown(text)}")
        return result

    def double(self, name: str) -> float | None:
        text = self.raw(name, "N")
        if text is None:
            return None
        if not isinstance(text, str):
            raise self.fail(name, f"N value is not a string: {text!r}")
        try:
            number = float(text)  # accepts Java Double.toString output such as "1.0E-4"
        except ValueError:
            raise self.fail(name, f"not a number: {text!r}") from None
        if not math.isfinite(number):
            raise self.fail(name, f"not a finite number: {text!r}")
        return number

    def string_set(self, name: str) -> frozenset[str]:
        values = self.raw(name, "SS")
        if values is None:
            return frozenset()
        if not isinstance(values, list | tuple | set | frozenset) or not all(
            isinstance(v, str) for v in values
        ):
            raise self.fail(name, f"SS value is not a set of strings: {values!r}")
        return frozenset(values)

    def binary(self, name: str) -> bytes | None:
        value = self.raw(name, "B")
        if value is None:
            return None
        if not isinstance(value, bytes | bytearray | memoryview):
            raise self.fail(name, f"B value is not bytes: {value!r}")
        return bytes(value)

    def sequence(self, name: str, sub_name: str) -> ExtendedSequenceNumber | None:
        text = self.string(name)
        if not text:
            return None
        sub = self.integer(sub_name, default=0)
        assert sub is not None
        try:
            return ExtendedSequenceNumber(text, sub)
        except InvalidSequenceNumber as exc:
            raise self.fail(name, str(exc)) from None

    def hash_key(self, name: str) -> int | None:
        text = self.string(name)
        if not text:
            return None
        if not (text.isascii() and text.isdigit()) or len(text) > 39 or int(text) > 2**128 - 1:
            raise self.fail(name, f"not a decimal hash key in 0..2^128-1: {_shown(text)}")
        return int(text)


_LONG_MAX = 2**63 - 1
_MAX_INTEGER_CHARS = 40  # Java's long has 19 digits; room for a sign, zeros and a ".0"


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 60 else f"{text[:40]!r}... ({len(text)} chars)"


def lease_from_item(item: Item) -> Lease:
    """Read one lease-table item (already known to be a lease, see :func:`is_lease_item`)."""
    reader = _Reader(item)
    key = reader.string(LEASE_KEY)
    if not key:
        raise reader.fail(LEASE_KEY, "missing or empty")
    reader.key = key

    counter = reader.integer(LEASE_COUNTER)
    if counter is None:
        raise reader.fail(LEASE_COUNTER, "missing")
    checkpoint = reader.sequence(CHECKPOINT, CHECKPOINT_SUB)
    if checkpoint is None:
        raise reader.fail(CHECKPOINT, "missing or empty")

    extra = {name: copy.deepcopy(value) for name, value in item.items() if name not in _KNOWN}
    state_raw = item.get(PENDING_CHECKPOINT_STATE)
    state: bytes | None = None
    if isinstance(state_raw, Mapping) and "N" in state_raw:
        # Java's create path writes the sub-sequence number here by mistake; Java ignores it on read.
        extra[PENDING_CHECKPOINT_STATE] = copy.deepcopy(state_raw)
    else:
        state = reader.binary(PENDING_CHECKPOINT_STATE)

    owner_switches = reader.integer(OWNER_SWITCHES, default=0)
    assert owner_switches is not None
    return Lease(
        lease_key=key,
        checkpoint=checkpoint,
        lease_owner=reader.string(LEASE_OWNER),
        lease_counter=counter,
        owner_switches_since_checkpoint=owner_switches,
        pending_checkpoint=reader.sequence(PENDING_CHECKPOINT, PENDING_CHECKPOINT_SUB),
        pending_checkpoint_state=state,
        parent_shard_ids=reader.string_set(PARENT_SHARD_ID),
        child_shard_ids=reader.string_set(CHILD_SHARD_IDS),
        starting_hash_key=reader.hash_key(STARTING_HASH_KEY),
        ending_hash_key=reader.hash_key(ENDING_HASH_KEY),
        throughput_kbps=reader.double(THROUGHPUT_KBPS),
        checkpoint_owner=reader.string(CHECKPOINT_OWNER),
        entity_type=reader.string(ENTITY_TYPE),
        stream_identifier=reader.string(STREAM_NAME),
        stream_shard_id=reader.string(SHARD_ID),
        extra=extra,
    )


def _s(value: str) -> dict[str, object]:
    return {"S": str(value)}  # a plain str, never a Sentinel enum member


def _n(value: int) -> dict[str, object]:
    return {"N": str(value)}


def _ss(values: frozenset[str]) -> dict[str, object]:
    return {"SS": sorted(values)}


def _double(value: float) -> dict[str, object]:
    # Plain decimal digits of the shortest repr: DynamoDB compares numbers, not their spelling.
    return {"N": format(Decimal(repr(value)), "f")}


def _copy_attribute(lease: Lease, name: str, value: object) -> dict[str, object]:
    if not isinstance(value, Mapping):
        raise TypeError(f"lease {lease.lease_key}: extra attribute {name} is not an attribute value")
    return {str(dtype): copy.deepcopy(inner) for dtype, inner in value.items()}


def lease_to_item(lease: Lease) -> dict[str, dict[str, object]]:
    """The full item for ``lease``: every known attribute that is set, plus ``extra`` untouched."""
    item = {name: _copy_attribute(lease, name, value) for name, value in lease.extra.items()}
    item[LEASE_KEY] = _s(lease.lease_key)
    item[LEASE_COUNTER] = _n(lease.lease_counter)
    if lease.lease_owner is not None:
        item[LEASE_OWNER] = _s(lease.lease_owner)
    item[OWNER_SWITCHES] = _n(lease.owner_switches_since_checkpoint)
    item[CHECKPOINT] = _s(lease.checkpoint.sequence_number)
    item[CHECKPOINT_SUB] = _n(lease.checkpoint.sub_sequence_number)
    if lease.parent_shard_ids:
        item[PARENT_SHARD_ID] = _ss(lease.parent_shard_ids)
    if lease.child_shard_ids:
        item[CHILD_SHARD_IDS] = _ss(lease.child_shard_ids)
    if lease.pending_checkpoint is not None:
        item[PENDING_CHECKPOINT] = _s(lease.pending_checkpoint.sequence_number)
        item[PENDING_CHECKPOINT_SUB] = _n(lease.pending_checkpoint.sub_sequence_number)
    if lease.pending_checkpoint_state is not None:
        item[PENDING_CHECKPOINT_STATE] = {"B": lease.pending_checkpoint_state}
    if lease.starting_hash_key is not None:
        item[STARTING_HASH_KEY] = _s(str(lease.starting_hash_key))
    if lease.ending_hash_key is not None:
        item[ENDING_HASH_KEY] = _s(str(lease.ending_hash_key))
    if lease.throughput_kbps is not None:
        item[THROUGHPUT_KBPS] = _double(lease.throughput_kbps)
    if lease.checkpoint_owner is not None:
        item[CHECKPOINT_OWNER] = _s(lease.checkpoint_owner)
    if lease.entity_type is not None:
        item[ENTITY_TYPE] = _s(lease.entity_type)
    if lease.stream_identifier is not None:
        item[STREAM_NAME] = _s(lease.stream_identifier)
    if lease.stream_shard_id is not None:
        item[SHARD_ID] = _s(lease.stream_shard_id)
    return item


def new_lease_item(lease: Lease) -> dict[str, dict[str, object]]:
    """The PutItem body of a freshly created lease, exactly the attributes contract §3.2 lists.

    ``leaseKey``, ``leaseCounter`` = 0, ``ownerSwitchesSinceCheckpoint`` = 0, ``checkpoint`` and its
    sub-sequence number, ``parentShardId`` (if any), the hash range (when known), ``entityType`` =
    ``LEASE``, and ``streamName``/``shardId`` for multi-stream leases. Never ``leaseOwner``.
    """
    if lease.lease_owner is not None or lease.lease_counter != 0:
        raise ValueError(f"lease {lease.lease_key}: a new lease has no owner and counter 0")
    item: dict[str, dict[str, object]] = {
        LEASE_KEY: _s(lease.lease_key),
        LEASE_COUNTER: _n(0),
        OWNER_SWITCHES: _n(0),
        CHECKPOINT: _s(lease.checkpoint.sequence_number),
        CHECKPOINT_SUB: _n(lease.checkpoint.sub_sequence_number),
    }
    if lease.parent_shard_ids:
        item[PARENT_SHARD_ID] = _ss(lease.parent_shard_ids)
    if lease.starting_hash_key is not None and lease.ending_hash_key is not None:
        item[STARTING_HASH_KEY] = _s(str(lease.starting_hash_key))
        item[ENDING_HASH_KEY] = _s(str(lease.ending_hash_key))
    item[ENTITY_TYPE] = _s(LEASE_ENTITY_TYPE)
    if lease.stream_identifier is not None:
        item[STREAM_NAME] = _s(lease.stream_identifier)
        item[SHARD_ID] = _s(lease.shard_id)
    return item
