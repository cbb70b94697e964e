"""Reading `kcl-daemon replay` input: a records file, and the checkpoint-failure plan.

A records file has one JSON object per line (blank lines are skipped)::

    {"text": "hello", "partitionKey": "user-1"}
    {"data": "aGVsbG8=", "partitionKey": "user-1", "sequenceNumber": "100", "subSequenceNumber": 0,
     "approximateArrivalTimestamp": 1700000000000, "shardId": "shardId-000000000001"}

``text`` (UTF-8) or ``data`` (standard base64) is the payload; ``partitionKey`` is required.
``sequenceNumber`` defaults to the next number in the shard; numbers must increase within a shard.
``shardId`` defaults to the ``--shard-id`` option. Any other key is an error, so typos are caught. Every
error names the file and line.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson

from kcl_daemon.core.lifecycle.checkpoint_validity import MAX_SEQUENCE_DIGITS
from kcl_daemon.core.sequence import ExtendedSequenceNumber, is_numeric_sequence_number
from kcl_daemon.errors import RecordsFileError
from kcl_protocol import CheckpointErrorName, Record

_ALLOWED = frozenset(
    {
        "text",
        "data",
        "partitionKey",
        "sequenceNumber",
        "subSequenceNumber",
        "approximateArrivalTimestamp",
        "shardId",
    }
)
_AUTO_SEQUENCE_BASE = 49_000_000_000_000_000_000_000_000_000_000_000_000_000_000_000_000_000


def _problem(where: str, message: str) -> RecordsFileError:
    return RecordsFileError(f"{where}: {message}")


def _parse_record(obj: object, where: str, now_ms: int) -> tuple[str | None, Record, bool]:
    """(shard id, record, whether the sequence number was given)."""
    if not isinstance(obj, dict):
        raise _problem(where, "each line must be a JSON object")
    unknown = sorted(set(obj) - _ALLOWED)
    if unknown:
        raise _problem(
            where, f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_ALLOWED))}"
        )
    if ("text" in obj) == ("data" in obj):
        raise _problem(where, 'give exactly one of "text" (UTF-8) or "data" (base64)')
    if "text" in obj:
        if not isinstance(obj["text"], str):
            raise _problem(where, '"text" must be a string')
        data = obj["text"].encode("utf-8")
    else:
        if not isinstance(obj["data"], str):
            raise _problem(where, '"data" must be a base64 string')
        try:
            data = base64.b64decode(obj["data"], validate=True)
        except binascii.Error:
            raise _problem(
                where, '"data" is not valid standard base64 (A-Z a-z 0-9 + / and = padding)'
            ) from None
    key = obj.get("partitionKey")
    if not isinstance(key, str):
        raise _problem(where, '"partitionKey" is required and must be a string')
    seq = obj.get("sequenceNumber")
    if seq is not None and not (isinstance(seq, str) and is_numeric_sequence_number(seq)):
        raise _problem(where, '"sequenceNumber" must be a string of decimal digits')
    if seq is not None and len(seq) > MAX_SEQUENCE_DIGITS:
        raise _problem(
            where, f'"sequenceNumber" has {len(seq)} digits; Kinesis\' have at most {MAX_SEQUENCE_DIGITS}'
        )
    sub = obj.get("subSequenceNumber", 0)
    if not isinstance(sub, int) or isinstance(sub, bool) or sub < 0:
        raise _problem(where, '"subSequenceNumber" must be a whole number >= 0')
    arrival = obj.get("approximateArrivalTimestamp", now_ms)
    if not isinstance(arrival, int) or isinstance(arrival, bool) or arrival < 0:
        raise _problem(where, '"approximateArrivalTimestamp" must be epoch milliseconds (a whole number)')
    shard = obj.get("shardId")
    if shard is not None and (not isinstance(shard, str) or not shard):
        raise _problem(where, '"shardId" must be a non-empty string')
    record = Record(data, key, seq or "", sub, arrival)
    return shard, record, seq is not None


def parse_records(lines: Iterable[bytes], source: str, default_shard_id: str) -> dict[str, list[Record]]:
    """Shard id -> its records in file order, validated. Raises RecordsFileError naming the line."""
    now_ms = int(time.time() * 1000)
    shards: dict[str, list[Record]] = {}
    last: dict[str, ExtendedSequenceNumber] = {}
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        where = f"{source}:{number}"
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise _problem(where, f"not valid JSON ({exc})") from None
        shard, record, explicit = _parse_record(obj, where, now_ms)
        shard = shard or default_shard_id
        previous = last.get(shard)
        if not explicit:
            base = int(previous.sequence_number) + 1 if previous else _AUTO_SEQUENCE_BASE
            record = Record(
                record.data,
                record.partition_key,
                str(base),
                record.sub_sequence_number,
                record.approximate_arrival_timestamp,
            )
        position = ExtendedSequenceNumber(record.sequence_number, record.sub_sequence_number)
        if previous is not None and position <= previous:
            raise _problem(
                where, f"sequence number {position} does not increase within {shard} (previous {previous})"
            )
        last[shard] = position
        shards.setdefault(shard, []).append(record)
    if not shards:
        raise RecordsFileError(f"{source}: no records (the file is empty)")
    return shards


def read_records_file(path: Path, default_shard_id: str) -> dict[str, list[Record]]:
    try:
        with path.open("rb") as handle:
            return parse_records(handle, str(path), default_shard_id)
    except OSError as exc:
        raise RecordsFileError(f"{path}: cannot read the records file: {exc.strerror or exc}") from None


@dataclass(frozen=True, slots=True)
class InjectedFailure:
    """Answer checkpoint attempt number ``attempt`` (1-based; None = the next one) with ``java_name``."""

    java_name: str
    attempt: int | None


def parse_injected_failure(spec: str) -> InjectedFailure:
    """``NAME`` or ``NAME@K`` for --fail-checkpoint."""
    name, _, attempt = spec.partition("@")
    known = {e.value for e in CheckpointErrorName}
    if name not in known:
        raise ValueError(f"{name!r} is not a checkpoint error; use one of {', '.join(sorted(known))}")
    if not attempt:
        return InjectedFailure(name, None)
    if not attempt.isdigit() or int(attempt) < 1:
        raise ValueError(f"{attempt!r} is not a checkpoint attempt number (1, 2, ...)")
    return InjectedFailure(name, int(attempt))
