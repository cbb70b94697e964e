"""Where dead letters are written: the sink for each ``deadLetterDestination`` scheme.

A sink's :meth:`~DeadLetterSink.write` is blocking (the shard consumer runs it on a thread) and either
succeeds - the letter is durably stored - or raises :class:`~kcl_daemon.errors.DeadLetterWriteFailed`
(retriable): the shard waits and tries again (``kcl_daemon.retry.DEAD_LETTER_WRITE``), and its
checkpoint does not move past the record meanwhile.

* ``file:///DIR``: one JSON-lines file per shard, ``DIR/<shard>.jsonl`` (``DIR/<stream>~<shard>.jsonl``
  with several streams; characters other than letters, digits, ``_.-`` become ``_``), appended with one
  ``write`` under ``O_APPEND`` and fsynced. The directory is created if missing.
* ``sqs://QUEUE``: one message per letter (the JSON as body; attributes ``shardId``,
  ``sequenceNumber``, ``application``). SQS takes at most 256 KiB: a larger letter cannot be written
  there (the shard waits and says so; use ``s3://`` for large records).
* ``s3://BUCKET/PREFIX``: one object per letter, ``PREFIX<application>/<shard file stem>/<seq>-<sub>.json``.
* ``kinesis://STREAM``: one record per letter (the JSON as data, the shard id as partition key); Kinesis
  takes at most 1 MiB per record.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from kcl_daemon.aws.clients import ClientSettings
from kcl_daemon.aws.dead_letter_puts import (
    SQS_MAX_BODY_BYTES,
    KinesisPuts,
    S3Puts,
    SqsPuts,
    dead_letter_client,
)
from kcl_daemon.core.lifecycle.dead_letter_address import DeadLetterAddress, Scheme
from kcl_daemon.dead_letters.letter import BadDeadLetter, DeadLetter
from kcl_daemon.errors import AwsError, DeadLetterWriteFailed

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class DeadLetterSink(Protocol):
    """Stores dead letters somewhere; ``str(sink)`` names the place for logs (no credentials)."""

    def write(self, letter: DeadLetter) -> None: ...


def shard_file_name(shard_id: str, stream: str | None) -> str:
    shard = _UNSAFE.sub("_", shard_id)
    return f"{shard}.jsonl" if stream is None else f"{_UNSAFE.sub('_', stream)}~{shard}.jsonl"


class FileSink:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def __str__(self) -> str:
        return f"file://{self.directory}"

    def write(self, letter: DeadLetter) -> None:
        path = self.directory / shard_file_name(letter.shard_id, letter.stream)
        line = (letter.to_line() + "\n").encode()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise DeadLetterWriteFailed(f"cannot append to {path}: {exc.strerror or exc}") from None


def read_file_letters(directory: Path) -> Iterator[tuple[Path, int, DeadLetter | BadDeadLetter]]:
    """Every letter of a ``file://`` destination: (file, line number, letter or why it is unreadable)."""
    for path in sorted(directory.glob("*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    yield path, number, DeadLetter.from_line(line)
                except BadDeadLetter as bad:
                    yield path, number, bad


def _aws(what: str, call: Callable[[], None]) -> None:
    try:
        call()
    except AwsError as exc:
        raise DeadLetterWriteFailed(f"{what}: {exc}") from None


class SqsSink:
    def __init__(self, address: DeadLetterAddress, puts: SqsPuts) -> None:
        self._address, self._puts = address, puts

    def __str__(self) -> str:
        return str(self._address)

    def write(self, letter: DeadLetter) -> None:
        body = letter.to_line()
        if len(body.encode()) > SQS_MAX_BODY_BYTES:
            raise DeadLetterWriteFailed(
                f"record {letter.name} is {len(body.encode())} bytes as a dead letter, more than an SQS "
                f"message takes ({SQS_MAX_BODY_BYTES}); use an s3:// destination for large records"
            )
        attributes = {
            "shardId": letter.shard_id,
            "sequenceNumber": letter.sequence_number,
            "application": letter.application or "-",
        }
        _aws(str(self), lambda: self._puts.send(body, attributes))


def s3_key(prefix: str, letter: DeadLetter) -> str:
    stem = shard_file_name(letter.shard_id, letter.stream).removesuffix(".jsonl")
    app = _UNSAFE.sub("_", letter.application or "-")
    return f"{prefix}{app}/{stem}/{letter.sequence_number}-{letter.sub_sequence_number}.json"


class S3Sink:
    def __init__(self, address: DeadLetterAddress, puts: S3Puts) -> None:
        self._address, self._puts = address, puts

    def __str__(self) -> str:
        return str(self._address)

    def write(self, letter: DeadLetter) -> None:
        key = s3_key(self._address.prefix, letter)
        body = letter.to_line().encode()
        _aws(str(self), lambda: self._puts.put(key, body))


class KinesisSink:
    def __init__(self, address: DeadLetterAddress, puts: KinesisPuts) -> None:
        self._address, self._puts = address, puts

    def __str__(self) -> str:
        return str(self._address)

    def write(self, letter: DeadLetter) -> None:
        data = letter.to_line().encode()
        _aws(str(self), lambda: self._puts.put(data, letter.shard_id))


def open_sink(address: DeadLetterAddress, clients: ClientSettings | None = None) -> DeadLetterSink:
    """The sink for an address; the AWS ones get clients built from ``clients`` (the daemon's region,
    credentials and, for Kinesis, endpoint)."""
    if address.scheme is Scheme.FILE:
        return FileSink(Path(address.target))
    settings = clients or ClientSettings()
    match address.scheme:
        case Scheme.SQS:
            return SqsSink(address, SqsPuts(dead_letter_client(settings, "sqs"), address.target))
        case Scheme.S3:
            return S3Sink(address, S3Puts(dead_letter_client(settings, "s3"), address.target))
        case Scheme.KINESIS:
            return KinesisSink(address, KinesisPuts(dead_letter_client(settings, "kinesis"), address.target))
    raise AssertionError(address)  # pragma: no cover
