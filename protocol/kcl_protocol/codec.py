"""Bytes <-> messages for the MultiLangDaemon protocol: one compact JSON object per line.

Rules this module enforces (see ``protocol/README.md``):

* daemon -> child: every key Java writes is present, ``null`` where Java writes null; ``action`` first;
  every record carries ``"action":"record"``; no blank lines; UTF-8; payloads are padded base64.
* child -> daemon: blank lines, non-JSON lines, JSON that is not an object with a known child action,
  and objects with wrongly typed fields are *noise*: :func:`decode_child_line` returns a
  :class:`NoiseLine` instead of raising, so stray ``print()`` output never breaks a conversation.
  Missing ``sequenceNumber``/``subSequenceNumber`` mean null; ``error`` in a request is ignored;
  unknown extra keys are accepted.
* A checkpoint request is always a checkpoint request, never noise (skipping it would leave the child
  waiting for a reply forever): its numbers are read exactly as written (no float rounding, any size);
  ``1.0`` is coerced to 1 as Jackson does; fields that still cannot be used (a wrong type, a
  sub-sequence number outside Java's ``long``) set ``malformed``, and the daemon answers
  ``IllegalArgumentException``.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Final

import orjson

from kcl_protocol.columns import RecordColumns, process_records_line
from kcl_protocol.extensions import (
    CHANNEL_ACTIONS,
    CHANNEL_KEY,
    DEAD_LETTER_ACTION,
    ChannelMessage,
    DeadLetterRequest,
    decode_channel,
    decode_dead_letter,
    parse_offer,
)
from kcl_protocol.messages import (
    AnyRecord,
    CheckpointReply,
    CheckpointRequest,
    ChildMessage,
    DaemonMessage,
    EncodedRecord,
    Initialize,
    LeaseLost,
    LegacyShutdown,
    ProcessRecords,
    Record,
    ShardEnded,
    ShutdownRequested,
    Status,
)

_NOISE_PREVIEW_CHARS: Final = 200


@dataclass(frozen=True, slots=True)
class NoiseLine:
    """A child stdout line that is not a protocol message. ``preview`` is a bounded excerpt for logs."""

    reason: str
    preview: str

    @property
    def is_blank(self) -> bool:
        return self.reason == "blank line"


# ---------------------------------------------------------------------------------------------------
# daemon -> child


def _b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _record_dict(record: AnyRecord) -> dict[str, object]:
    # Key order as Jackson writes JsonFriendlyRecord, plus the "action" kclpy requires.
    return {
        "data": record.data_b64 if type(record) is EncodedRecord else _b64(record.data),
        "partitionKey": record.partition_key,
        "sequenceNumber": record.sequence_number,
        "approximateArrivalTimestamp": record.approximate_arrival_timestamp,
        "subSequenceNumber": record.sub_sequence_number,
        "action": "record",
    }


def _daemon_dict(message: DaemonMessage) -> dict[str, object]:
    match message:
        case Initialize(shard_id=shard_id, sequence_number=seq, sub_sequence_number=sub, channel=offer):
            initialize: dict[str, object] = {
                "action": "initialize",
                "shardId": shard_id,
                "sequenceNumber": seq,
                "subSequenceNumber": sub,
            }
            if offer is not None:
                initialize[CHANNEL_KEY] = offer.as_json()
            if message.stream_name is not None:  # old clients ignore unknown fields
                initialize["streamName"] = message.stream_name
            if message.stream_identifier is not None:
                initialize["streamIdentifier"] = message.stream_identifier
            return initialize
        case ProcessRecords(records=records, millis_behind_latest=behind):
            return {
                "action": "processRecords",
                "records": [_record_dict(r) for r in records],
                "millisBehindLatest": behind,
            }
        case CheckpointReply(sequence_number=seq, sub_sequence_number=sub, error=error):
            return {"action": "checkpoint", "sequenceNumber": seq, "subSequenceNumber": sub, "error": error}
        case LegacyShutdown(reason=reason):
            return {"action": "shutdown", "reason": reason}
        case LeaseLost() | ShardEnded() | ShutdownRequested():
            return {"action": message.action}
    raise TypeError(f"not a daemon message: {message!r}")  # pragma: no cover - exhaustive above


def encode_daemon_message(message: DaemonMessage) -> bytes:
    """One line (with its ``\\n``) for the child's stdin."""
    if type(message) is ProcessRecords and type(message.records) is RecordColumns:
        line = process_records_line(message.records, message.millis_behind_latest)
        if line is not None:
            return line
    return orjson.dumps(_daemon_dict(message), option=orjson.OPT_APPEND_NEWLINE)


def _opt_str(value: object, name: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{name} must be a string or null, got {type(value).__name__}")


def _opt_int(value: object, name: str) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise ValueError(f"{name} must be an integer or null, got {type(value).__name__}")


def _req_int(value: object, name: str) -> int:
    result = _opt_int(value, name)
    if result is None:
        raise ValueError(f"{name} must be an integer, got null")
    return result


def _req_str(value: object, name: str) -> str:
    result = _opt_str(value, name)
    if result is None:
        raise ValueError(f"{name} must be a string, got null")
    return result


def _record_from(obj: object) -> Record:
    if not isinstance(obj, dict) or obj.get("action") != "record":
        raise ValueError('every record must be an object with "action":"record"')
    try:
        data = base64.b64decode(_req_str(obj["data"], "data"), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"data is not valid base64: {exc}") from None
    return Record(
        data=data,
        partition_key=_req_str(obj["partitionKey"], "partitionKey"),
        sequence_number=_req_str(obj["sequenceNumber"], "sequenceNumber"),
        sub_sequence_number=_req_int(obj["subSequenceNumber"], "subSequenceNumber"),
        approximate_arrival_timestamp=_req_int(
            obj["approximateArrivalTimestamp"], "approximateArrivalTimestamp"
        ),
    )


def decode_daemon_line(line: bytes | str) -> DaemonMessage:
    """Strict parse of one daemon line, as a client must read it. Raises ValueError on any problem.

    Every key the protocol says is always present must be present (a missing key is a daemon bug).
    """
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ValueError("a protocol line must be a JSON object")
    try:
        match obj.get("action"):
            case "initialize":
                return Initialize(
                    shard_id=_req_str(obj["shardId"], "shardId"),
                    sequence_number=_opt_str(obj["sequenceNumber"], "sequenceNumber"),
                    sub_sequence_number=_opt_int(obj["subSequenceNumber"], "subSequenceNumber"),
                    stream_name=_opt_str(obj.get("streamName"), "streamName"),
                    stream_identifier=_opt_str(obj.get("streamIdentifier"), "streamIdentifier"),
                    channel=parse_offer(obj.get(CHANNEL_KEY)),
                )
            case "processRecords":
                records = obj["records"]
                if not isinstance(records, list):
                    raise ValueError("records must be a list")
                return ProcessRecords(
                    records=tuple(_record_from(r) for r in records),
                    millis_behind_latest=_opt_int(obj["millisBehindLatest"], "millisBehindLatest"),
                )
            case "checkpoint":
                return CheckpointReply(
                    sequence_number=_opt_str(obj["sequenceNumber"], "sequenceNumber"),
                    sub_sequence_number=_opt_int(obj["subSequenceNumber"], "subSequenceNumber"),
                    error=_opt_str(obj["error"], "error"),
                )
            case "leaseLost":
                return LeaseLost()
            case "shardEnded":
                return ShardEnded()
            case "shutdownRequested":
                return ShutdownRequested()
            case "shutdown":
                return LegacyShutdown(reason=_req_str(obj["reason"], "reason"))
            case other:
                raise ValueError(f"unknown daemon action {other!r}")
    except KeyError as exc:
        raise ValueError(f"missing key {exc.args[0]!r}") from None


# ---------------------------------------------------------------------------------------------------
# child -> daemon


def encode_child_message(message: ChildMessage) -> bytes:
    """One line as a well-behaved client writes it (compact; a request always carries both keys)."""
    match message:
        case Status(response_for=response_for):
            obj: dict[str, object] = {"action": "status", "responseFor": response_for}
        case CheckpointRequest(sequence_number=seq, sub_sequence_number=sub):
            obj = {"action": "checkpoint", "sequenceNumber": seq, "subSequenceNumber": sub}
    return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)


def _preview(text: str) -> str:
    if len(text) <= _NOISE_PREVIEW_CHARS:
        return text
    return text[:_NOISE_PREVIEW_CHARS] + f"... ({len(text)} chars)"


class _JsonInt(str):
    """A JSON integer exactly as written (any size)."""

    __slots__ = ()


class _JsonFloat(str):
    """A JSON number with a fraction or exponent (or NaN/Infinity) exactly as written."""

    __slots__ = ()


_LONG_MAX: Final = 2**63 - 1


def _exact_json(data: bytes) -> object:
    """Parse JSON keeping every number as its text (orjson rounds big integers to floats)."""
    return json.loads(data, parse_int=_JsonInt, parse_float=_JsonFloat, parse_constant=_JsonFloat)


def _lenient_sequence_number(value: object) -> str | None:
    # Jackson coerces a JSON integer into the String field; so do we.
    if value is None or (isinstance(value, str) and not isinstance(value, _JsonFloat)):
        return None if value is None else str(value)
    raise ValueError(f"sequenceNumber must be a string, an integer or null, got {_kind(value)}")


def _kind(value: object) -> str:
    if isinstance(value, _JsonFloat):
        return f"the number {_preview(str(value))}"
    return "an array" if isinstance(value, list) else type(value).__name__


def _lenient_sub_sequence_number(value: object) -> int | None:
    if value is None:
        return None
    text = str(value).strip() if isinstance(value, str) else None
    if isinstance(value, _JsonFloat):
        try:
            number = Decimal(value)
        except InvalidOperation:
            number = Decimal("NaN")
        # adjusted() first: to_integral_value() of 1e100000000 overflows the decimal context
        if (
            not number.is_finite()
            or number.adjusted() > 18
            or number != number.to_integral_value()
            or abs(number) > _LONG_MAX
        ):
            raise ValueError(
                f"subSequenceNumber {_preview(str(value))} is not a whole number in Java's long range"
            )
        return int(number)  # 1.0 -> 1, as Jackson coerces it
    if text is not None and text.isascii() and text.lstrip("-").isdigit():
        if len(text.lstrip("-")) > 19 or abs(int(text)) > _LONG_MAX:
            raise ValueError(f"subSequenceNumber {_preview(text)} is outside Java's long range")
        return int(text)
    raise ValueError(f"subSequenceNumber must be an integer or null, got {_kind(value)}")


def _checkpoint_request(obj: dict[str, object]) -> CheckpointRequest:
    problems: list[str] = []
    sequence: str | None = None
    sub: int | None = None
    try:
        sequence = _lenient_sequence_number(obj.get("sequenceNumber"))
    except ValueError as exc:
        problems.append(str(exc))
    try:
        sub = _lenient_sub_sequence_number(obj.get("subSequenceNumber"))
    except ValueError as exc:
        problems.append(str(exc))
    return CheckpointRequest(sequence, sub, "; ".join(problems) or None)


def decode_child_line(line: bytes) -> ChildMessage | ChannelMessage | DeadLetterRequest | NoiseLine:
    """Parse one line of child stdout (with or without its line ending). Never raises."""
    stripped = line.rstrip(b"\r\n")
    if not stripped:
        return NoiseLine("blank line", "")
    text = stripped.decode("utf-8", errors="replace")
    if not text.strip():
        return NoiseLine("whitespace-only line", _preview(text))
    try:
        obj = orjson.loads(stripped)
    except orjson.JSONDecodeError:
        try:  # numbers orjson cannot hold (a 5,000-digit integer) are still JSON
            obj = _exact_json(stripped)
        except (ValueError, RecursionError):  # RecursionError: nesting deeper than Python's stack
            return NoiseLine("not JSON", _preview(text))
    if not isinstance(obj, dict):
        return NoiseLine("JSON but not an object", _preview(text))
    action = obj.get("action")
    try:
        if action == "status":
            return Status(response_for=_opt_str(obj.get("responseFor"), "responseFor"))
        if action == "checkpoint":
            try:
                exact = _exact_json(stripped)
            except RecursionError:  # orjson read it, but an unused field nests deeper than Python's stack
                return CheckpointRequest(None, None, "the message nests too deeply to be read exactly")
            assert isinstance(exact, dict)
            return _checkpoint_request(exact)
        if action in CHANNEL_ACTIONS:
            return decode_channel(obj)
        if action == DEAD_LETTER_ACTION:
            return decode_dead_letter(obj)
    except ValueError as exc:
        return NoiseLine(f"malformed {action} message: {exc}", _preview(text))
    if action is None:
        return NoiseLine("JSON object without an action", _preview(text))
    return NoiseLine(f"action {action!r} is not one a child sends", _preview(text))
