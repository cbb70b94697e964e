"""Where dead letters are written: the sink for each ``deadLetterDestination`` scheme.

A sink's :meth:`~DeadLetterSink.write` is blocking (the shard consumer runs it on a thread) and either
succeeds - the letter is durably stored - or raises :class:`~kcl_daemon.errors.DeadLetterWriteFailed`
(retriable): the shard waits and tries again (``kcl_daemon.retry.DEAD_LETTER_WRITE``), and its
checkpoint does not move past the record meanwhile.

``file:///DIR``: one JSON-lines file per shard, ``DIR/<shard>.jsonl`` (``DIR/<stream>~<shard>.jsonl``
with several streams; ``:`` and ``/`` of the stream's identity become ``_``), appended with one
``write`` under ``O_APPEND`` and fsynced. The directory is created if missing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from kcl_daemon.core.lifecycle.dead_letter_address import DeadLetterAddress, Scheme
from kcl_daemon.dead_letters.letter import BadDeadLetter, DeadLetter
from kcl_daemon.errors import DeadLetterWriteFailed

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


def open_sink(address: DeadLetterAddress) -> DeadLetterSink:
    """The sink for an address (the AWS ones are built by :func:`kcl_daemon.dead_letters.aws_sinks`)."""
    if address.scheme is Scheme.FILE:
        return FileSink(Path(address.target))
    raise NotImplementedError(f"{address}: this destination needs AWS clients (see aws_sinks)")
