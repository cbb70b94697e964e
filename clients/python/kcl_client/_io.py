"""Line I/O on the protocol pipes, and keeping everything else off the protocol's stdout.

* Input is read as bytes, one line at a time with no length limit (a ``processRecords`` line can be
  far over 10 MB). Blank lines are skipped; a line that is not JSON is logged and skipped.
* Lines are parsed with ``orjson`` when it is importable (the daemon's environment has it), else with
  the standard library. orjson is strict where the standard library is lenient (NaN, lone surrogates)
  and reads integers past 64 bits as floats, so a line orjson refuses, or whose message does not decode
  from orjson's values, is parsed again with the standard library: the outcome is always the standard
  library's, orjson only makes the ordinary line fast.
* Output is one message per write: ``"\\n" + compact JSON + "\\n"``, flushed at once.
* A checkpoint request and its reply form one exchange under a lock, so a handler that checkpoints from
  several threads can never read another thread's reply.
* :func:`private_stdout` moves the protocol to a private duplicate of file descriptor 1 and points fd 1
  at stderr, so ``print()``, C extensions and subprocesses cannot corrupt the protocol;
  :func:`user_output_to_stderr` points ``sys.stdout`` at ``sys.stderr`` while user code runs.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import BinaryIO, Final, NamedTuple, Protocol

from kcl_client._errors import ProtocolError
from kcl_client._messages import DaemonMessage, decode

try:
    import orjson
except ImportError:  # pragma: no cover - the standard library only
    orjson = None  # type: ignore[assignment]

logger = logging.getLogger("kcl_client")

_PREVIEW_BYTES: Final = 120


class Parsed(NamedTuple):
    """One daemon line as parsed JSON, the line itself, and whether orjson parsed it."""

    obj: object
    line: bytes
    fast: bool


def decode_parsed(parsed: Parsed) -> DaemonMessage:
    """The message of a parsed line; one orjson's values cannot decode is parsed again exactly."""
    if not parsed.fast:
        return decode(parsed.obj)
    try:
        return decode(parsed.obj)
    except ProtocolError:
        return decode(json.loads(parsed.line))


class ChannelLike(Protocol):
    """What a session needs of its channel: :class:`Channel`, or one lane of a shared child."""

    closed: bool

    def receive(self) -> DaemonMessage | None: ...

    def send(self, line: bytes) -> None: ...

    def exchange(self, line: bytes) -> DaemonMessage | None: ...


class Channel:
    """The two protocol pipes: messages in from the daemon, reply lines out to it."""

    def __init__(self, reader: BinaryIO, writer: BinaryIO) -> None:
        self._reader = reader
        self._writer = writer
        self._exchange_lock = threading.Lock()
        self.closed = False
        """True once the daemon has closed our stdin."""

    def receive(self) -> DaemonMessage | None:
        """The next message from the daemon, or ``None`` at end of input."""
        parsed = self.receive_parsed()
        return None if parsed is None else decode_parsed(parsed)

    def receive_parsed(self) -> Parsed | None:
        """The next JSON line from the daemon, parsed but not yet decoded, or ``None`` at end of input."""
        while True:
            line = self._reader.readline()
            if not line:
                self.closed = True
                return None
            if not line.strip():
                continue
            if orjson is not None:
                try:
                    return Parsed(orjson.loads(line), line, True)
                except orjson.JSONDecodeError:
                    pass  # the standard library decides: see the module docstring
            try:
                return Parsed(json.loads(line), line, False)
            except ValueError:
                logger.warning("skipping a stdin line that is not JSON: %r", line[:_PREVIEW_BYTES])

    def send(self, line: bytes) -> None:
        """Write one encoded message line and flush it."""
        self._writer.write(line)
        self._writer.flush()

    def exchange(self, line: bytes) -> DaemonMessage | None:
        """Send a request and return the very next message (``None`` if stdin closed first)."""
        with self._exchange_lock:
            self.send(line)
            return self.receive()


@contextmanager
def private_stdout() -> Iterator[BinaryIO]:
    """Yield a binary writer on a private copy of fd 1, with fd 1 itself pointed at stderr meanwhile."""
    sys.stdout.flush()
    private_fd = os.dup(1)
    os.dup2(2, 1)
    writer = os.fdopen(private_fd, "wb")
    try:
        yield writer
    finally:
        sys.stdout.flush()
        os.dup2(private_fd, 1)
        with suppress(OSError):  # a broken pipe here only means the daemon has gone
            writer.close()


@contextmanager
def user_output_to_stderr() -> Iterator[None]:
    """Send ``print()`` and other ``sys.stdout`` writes to stderr for the duration of a handler."""
    saved = sys.stdout
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = saved
