"""Decode the daemon's JSON objects into typed messages, and encode this client's two replies.

Daemon -> child: ``initialize``, ``processRecords``, ``leaseLost``, ``shardEnded``, ``shutdownRequested``,
``checkpoint`` (the reply to a checkpoint request) and the KCL 1.x ``shutdown`` (reason ``TERMINATE`` or
``ZOMBIE``). Decoding is lenient where the daemons differ (a missing ``millisBehindLatest`` or record
``subSequenceNumber``, a numeric ``sequenceNumber``) and strict where a value is needed to process
records (a record without ``data`` raises :class:`ProtocolError`). An unknown action decodes to
:class:`UnknownAction`, never an error.

Child -> daemon: :func:`status` and :func:`checkpoint_request`, compact JSON with every key present.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kcl_client._errors import ProtocolError
from kcl_client._records import Position, Record


@dataclass(frozen=True, slots=True)
class Initialize:
    shard_id: str
    position: Position
    #: the actions of kcl-daemon's log/metric channel the daemon offered (empty: none, e.g. Java's daemon)
    channel: tuple[str, ...] = ()
    #: several streams per application (kcl-daemon's streamNames): the shard's stream, else None
    stream_name: str | None = None
    #: ``accountId:streamName:creationEpoch`` of that stream, else None
    stream_identifier: str | None = None
    #: kcl-daemon's offer of lanes (several shards in this process): how many, else 0
    lanes: int = 0


@dataclass(frozen=True, slots=True)
class ProcessRecords:
    records: tuple[Record, ...]
    millis_behind_latest: int | None


@dataclass(frozen=True, slots=True)
class LeaseLost:
    pass


@dataclass(frozen=True, slots=True)
class ShardEnded:
    pass


@dataclass(frozen=True, slots=True)
class ShutdownRequested:
    pass


@dataclass(frozen=True, slots=True)
class LegacyShutdown:
    """KCL 1.x ``shutdown``: ``TERMINATE`` means the shard ended, anything else (``ZOMBIE``) a lost lease."""

    reason: str | None


@dataclass(frozen=True, slots=True)
class CheckpointReply:
    sequence_number: str | None
    sub_sequence_number: int | None
    error: str | None


@dataclass(frozen=True, slots=True)
class UnknownAction:
    action: object


DaemonMessage = (
    Initialize
    | ProcessRecords
    | LeaseLost
    | ShardEnded
    | ShutdownRequested
    | LegacyShutdown
    | CheckpointReply
    | UnknownAction
)


def _optional_str(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # Jackson would coerce a number the same way
    raise ProtocolError(f"{where}: {key} must be a string or null, got {value!r}")


def _optional_int(obj: Mapping[str, Any], key: str, where: str) -> int | None:
    value = obj.get(key)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise ProtocolError(f"{where}: {key} must be an integer or null, got {value!r}")


def _required_str(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = _optional_str(obj, key, where)
    if value is None:
        raise ProtocolError(f"{where}: {key} is missing or null")
    return value


def _required_int(obj: Mapping[str, Any], key: str, where: str) -> int:
    value = _optional_int(obj, key, where)
    if value is None:
        raise ProtocolError(f"{where}: {key} is missing or null")
    return value


def _decode_record(obj: object, index: int) -> Record:
    where = f"processRecords record {index}"
    if not isinstance(obj, Mapping):
        raise ProtocolError(f"{where}: expected an object, got {type(obj).__name__}")
    data = obj.get("data")
    if not isinstance(data, str):
        raise ProtocolError(f"{where}: data must be a base64 string, got {type(data).__name__}")
    try:
        payload = binascii.a2b_base64(data)  # lenient like base64.b64decode, which every client uses
    except binascii.Error as exc:
        raise ProtocolError(f"{where}: data is not valid base64: {exc}") from exc
    partition_key = obj.get("partitionKey")
    if not isinstance(partition_key, str):
        raise ProtocolError(f"{where}: partitionKey must be a string, got {partition_key!r}")
    return Record(
        data=payload,
        partition_key=partition_key,
        sequence_number=_required_str(obj, "sequenceNumber", where),
        # KCL 1.x daemons sent null for records that were not KPL user records; daemons read that as 0.
        sub_sequence_number=_optional_int(obj, "subSequenceNumber", where) or 0,
        arrival_millis=_required_int(obj, "approximateArrivalTimestamp", where),
    )


_new_record = tuple.__new__  # Record is a named tuple: build it without the keyword-parsing __new__


def _decode_records(objs: list[Any]) -> tuple[Record, ...]:
    """Every record of a batch: a record whose fields all have their usual JSON types is built directly;
    any other goes through :func:`_decode_record`, which coerces what daemons may send differently (a
    numeric sequence number, a null sub-sequence number) and names what is wrong."""
    a2b = binascii.a2b_base64
    out: list[Record] = []
    append = out.append
    for index, obj in enumerate(objs):
        if type(obj) is dict:
            data = obj.get("data")
            partition_key = obj.get("partitionKey")
            sequence_number = obj.get("sequenceNumber")
            sub = obj.get("subSequenceNumber")
            arrival = obj.get("approximateArrivalTimestamp")
            if (
                type(data) is str
                and type(partition_key) is str
                and type(sequence_number) is str
                and type(sub) is int
                and type(arrival) is int
            ):
                try:
                    payload = a2b(data)
                except binascii.Error:
                    pass  # _decode_record raises the error that names the record
                else:
                    append(_new_record(Record, (payload, partition_key, sequence_number, sub, arrival)))
                    continue
        append(_decode_record(obj, index))
    return tuple(out)


def decode(obj: object) -> DaemonMessage:
    """One decoded JSON value from the daemon as a message; raises :class:`ProtocolError` if malformed."""
    if not isinstance(obj, Mapping):
        return UnknownAction(None)
    action = obj.get("action")
    match action:
        case "initialize":
            shard_id = obj.get("shardId")
            if not isinstance(shard_id, str):
                raise ProtocolError(f"initialize: shardId must be a string, got {shard_id!r}")
            position = Position(
                _optional_str(obj, "sequenceNumber", "initialize"),
                _optional_int(obj, "subSequenceNumber", "initialize"),
            )
            offer = obj.get("channel")
            channel = tuple(a for a in offer if isinstance(a, str)) if isinstance(offer, list) else ()
            return Initialize(
                shard_id,
                position,
                channel,
                _optional_str(obj, "streamName", "initialize"),
                _optional_str(obj, "streamIdentifier", "initialize"),
                lanes_offered(obj),
            )
        case "processRecords":
            records = obj.get("records")
            if not isinstance(records, list):
                raise ProtocolError(f"processRecords: records must be a list, got {type(records).__name__}")
            return ProcessRecords(
                _decode_records(records),
                _optional_int(obj, "millisBehindLatest", "processRecords"),
            )
        case "leaseLost":
            return LeaseLost()
        case "shardEnded":
            return ShardEnded()
        case "shutdownRequested":
            return ShutdownRequested()
        case "shutdown":
            return LegacyShutdown(_optional_str(obj, "reason", "shutdown"))
        case "checkpoint":
            return CheckpointReply(
                _optional_str(obj, "sequenceNumber", "checkpoint"),
                _optional_int(obj, "subSequenceNumber", "checkpoint"),
                _optional_str(obj, "error", "checkpoint"),
            )
        case _:
            return UnknownAction(action)


def lanes_offered(obj: Mapping[str, Any]) -> int:
    """The ``lanes`` an ``initialize`` offers (kcl-daemon's shardsPerChild), 0 when none is offered."""
    value = obj.get("lanes")
    return value if type(value) is int and value > 1 else 0


def _line(message: dict[str, object]) -> bytes:
    # Surrounding newlines keep stray output from gluing onto a protocol line (as every official client does).
    return b"\n" + json.dumps(message, separators=(",", ":")).encode("ascii") + b"\n"


def lanes_accepted() -> bytes:
    """The line that takes kcl-daemon's offer of lanes; written before the first initialize's status."""
    return _line({"action": "lanes"})


def status(response_for: str) -> bytes:
    """The line that tells the daemon this action is finished."""
    return _line({"action": "status", "responseFor": response_for})


def log_line(level: str, message: str) -> bytes:
    """A line of kcl-daemon's channel: ``message`` logged by the daemon under the shard at ``level``."""
    return _line({"action": "log", "level": level, "message": message})


def metric_line(name: str, value: float, unit: str | None, dimensions: Mapping[str, str]) -> bytes:
    """A line of kcl-daemon's channel: one value of a metric the daemon exports with its own."""
    return _line(
        {"action": "metric", "name": name, "value": value, "unit": unit, "dimensions": dict(dimensions)}
    )


def dead_letter_line(sequence_number: str, sub_sequence_number: int, reason: str) -> bytes:
    """A line of kcl-daemon's channel: write this record of the current batch to the dead-letter store."""
    return _line(
        {
            "action": "deadLetter",
            "sequenceNumber": sequence_number,
            "subSequenceNumber": sub_sequence_number,
            "reason": reason,
        }
    )


def checkpoint_request(sequence_number: str | None, sub_sequence_number: int | None) -> bytes:
    """The line that asks the daemon to checkpoint; ``None`` means "everything delivered so far"."""
    return _line(
        {"action": "checkpoint", "sequenceNumber": sequence_number, "subSequenceNumber": sub_sequence_number}
    )
