"""``deadLetterDestination``: parse the address of the place poison records go (pure).

* ``sqs://`` + a queue URL (``sqs://https://sqs.REGION.amazonaws.com/ACCOUNT/NAME``) or a queue name;
* ``kinesis://STREAM`` (a stream name);
* ``s3://BUCKET/PREFIX`` (the prefix may be empty);
* ``file:///DIRECTORY`` (an absolute path; JSON lines, one file per shard, created if missing).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Final

_STREAM: Final = re.compile(r"[a-zA-Z0-9_.-]{1,128}")
_BUCKET: Final = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_QUEUE: Final = re.compile(r"[a-zA-Z0-9_-]{1,80}(\.fifo)?")


class Scheme(enum.StrEnum):
    SQS = "sqs"
    KINESIS = "kinesis"
    S3 = "s3"
    FILE = "file"


@dataclass(frozen=True, slots=True)
class DeadLetterAddress:
    scheme: Scheme
    #: the queue URL or name, the stream name, the bucket, or the directory
    target: str
    #: s3 only: the key prefix (no leading slash; "" or ending with "/")
    prefix: str = ""

    def __str__(self) -> str:
        match self.scheme:
            case Scheme.S3:
                return f"s3://{self.target}/{self.prefix}"
            case Scheme.FILE:
                return f"file://{self.target}"
        return f"{self.scheme.value}://{self.target}"


class BadDeadLetterAddress(ValueError):
    """The address cannot be used; the message says why."""


def parse_dead_letter_address(text: str) -> DeadLetterAddress:
    scheme, sep, rest = text.strip().partition("://")
    if not sep:
        raise BadDeadLetterAddress(
            f"{text!r} has no scheme: use sqs://QUEUE, kinesis://STREAM, s3://BUCKET/PREFIX or file:///DIR"
        )
    match scheme.lower():
        case Scheme.SQS:
            if rest.startswith(("http://", "https://")) or _QUEUE.fullmatch(rest):
                return DeadLetterAddress(Scheme.SQS, rest)
            raise BadDeadLetterAddress(f"{text!r}: after sqs:// give a queue URL or a queue name")
        case Scheme.KINESIS:
            if _STREAM.fullmatch(rest):
                return DeadLetterAddress(Scheme.KINESIS, rest)
            raise BadDeadLetterAddress(f"{text!r}: after kinesis:// give a stream name")
        case Scheme.S3:
            bucket, _, prefix = rest.partition("/")
            if not _BUCKET.fullmatch(bucket):
                raise BadDeadLetterAddress(f"{text!r}: {bucket!r} is not an S3 bucket name")
            if prefix and not prefix.endswith("/"):
                prefix += "/"
            return DeadLetterAddress(Scheme.S3, bucket, prefix)
        case Scheme.FILE:
            if not rest.startswith("/"):
                raise BadDeadLetterAddress(f"{text!r}: after file:// give an absolute path (file:///dir)")
            return DeadLetterAddress(Scheme.FILE, rest.rstrip("/") or "/")
    raise BadDeadLetterAddress(f"{text!r}: the scheme {scheme!r} is not one of sqs, kinesis, s3, file")


def policy_problems(policy: str, destination: str | None) -> list[str]:
    """What is wrong with the poison-record keys together (empty: nothing)."""
    if destination is not None:
        try:
            parse_dead_letter_address(destination)
        except BadDeadLetterAddress as exc:
            return [f"deadLetterDestination {exc}"]
    if policy == "DEAD_LETTER" and destination is None:
        return ["poisonRecordPolicy DEAD_LETTER needs deadLetterDestination (where the records go)"]
    return []
