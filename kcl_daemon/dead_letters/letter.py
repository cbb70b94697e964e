"""One dead letter: a record set aside, with where it came from and why (its JSON form is the format of
every destination: one JSON object per record; one line of a file, one SQS message, one S3 object, one
Kinesis record).

Fields: ``data`` (base64), ``partitionKey``, ``sequenceNumber``, ``subSequenceNumber``,
``approximateArrivalTimestamp`` (epoch ms), ``shardId``, ``stream`` (null for a single-stream
application), ``application``, ``attempts`` (deliveries that included the record), ``failure``
(``kind``: exit, timeout, exception or processor; ``detail``: the exit status, the timeout or the error;
``stderr``: the child's last stderr lines), ``deadLetteredAt`` (ISO 8601, UTC) and ``version`` (1).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kcl_protocol import AnyRecord, EncodedRecord, Record

FORMAT_VERSION = 1


class BadDeadLetter(ValueError):
    """A stored dead letter cannot be read; the message says which field."""


@dataclass(frozen=True, slots=True)
class Failure:
    kind: str
    detail: str
    stderr: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DeadLetter:
    data_b64: str
    partition_key: str
    sequence_number: str
    sub_sequence_number: int
    approximate_arrival_timestamp: int
    shard_id: str
    stream: str | None
    application: str
    attempts: int
    failure: Failure
    dead_lettered_at: str

    @classmethod
    def of(
        cls,
        record: AnyRecord,
        *,
        shard_id: str,
        stream: str | None,
        application: str,
        attempts: int,
        failure: Failure,
        now: datetime | None = None,
    ) -> DeadLetter:
        data_b64 = (
            record.data_b64
            if isinstance(record, EncodedRecord)
            else base64.b64encode(record.data).decode("ascii")
        )
        at = (now or datetime.now(UTC)).isoformat(timespec="milliseconds")
        return cls(
            data_b64,
            record.partition_key,
            record.sequence_number,
            record.sub_sequence_number,
            record.approximate_arrival_timestamp,
            shard_id,
            stream,
            application,
            attempts,
            failure,
            at,
        )

    @property
    def name(self) -> str:
        """How logs name it (never its payload): shard, sequence and sub-sequence number."""
        where = self.shard_id if self.stream is None else f"{self.stream}:{self.shard_id}"
        return f"{where}/{self.sequence_number}/{self.sub_sequence_number}"

    def record(self) -> Record:
        return Record(
            base64.b64decode(self.data_b64),
            self.partition_key,
            self.sequence_number,
            self.sub_sequence_number,
            self.approximate_arrival_timestamp,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION,
            "data": self.data_b64,
            "partitionKey": self.partition_key,
            "sequenceNumber": self.sequence_number,
            "subSequenceNumber": self.sub_sequence_number,
            "approximateArrivalTimestamp": self.approximate_arrival_timestamp,
            "shardId": self.shard_id,
            "stream": self.stream,
            "application": self.application,
            "attempts": self.attempts,
            "failure": {
                "kind": self.failure.kind,
                "detail": self.failure.detail,
                "stderr": list(self.failure.stderr),
            },
            "deadLetteredAt": self.dead_lettered_at,
        }

    def to_line(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> DeadLetter:
        try:
            failure = obj["failure"]
            letter = cls(
                str(obj["data"]),
                str(obj["partitionKey"]),
                str(obj["sequenceNumber"]),
                int(obj["subSequenceNumber"]),
                int(obj.get("approximateArrivalTimestamp", 0)),
                str(obj["shardId"]),
                None if obj.get("stream") is None else str(obj["stream"]),
                str(obj.get("application", "")),
                int(obj.get("attempts", 0)),
                Failure(
                    str(failure["kind"]),
                    str(failure.get("detail", "")),
                    tuple(str(line) for line in failure.get("stderr", ())),
                ),
                str(obj.get("deadLetteredAt", "")),
            )
            binascii.a2b_base64(letter.data_b64)
        except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as exc:
            raise BadDeadLetter(f"not a dead letter: {type(exc).__name__}: {exc}") from None
        return letter

    @classmethod
    def from_line(cls, line: str) -> DeadLetter:
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadDeadLetter(f"not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise BadDeadLetter("not a JSON object")
        return cls.from_json(obj)
