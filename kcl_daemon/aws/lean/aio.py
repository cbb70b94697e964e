"""Keep-alive HTTP/1.1 connections to one endpoint on the event loop itself (``asyncio.Protocol``).

The asynchronous half of :mod:`.connections`: the polling readers await their GetRecords and
GetShardIterator calls here, on the loop, with no hand-off to a thread and back. A call takes an idle
connection (last in, first out) or opens one, up to ``max_open`` (then waits for one to come back),
writes the request's head and body in one ``write``, and is resolved by the protocol once the whole reply
is in: ``Content-Length``, chunked or read-to-close bodies. A connection the server closed while it was
idle has marked itself closed (``connection_lost``) and is dropped before use; bytes arriving while no
request is out close it too.

Errors are the ones the synchronous path raises for the same faults, so that
:func:`kcl_daemon.aws.errors.map_aws_errors` maps them alike: ``OSError`` (refused, reset, TLS,
``TimeoutError`` for a connect within ``connect_timeout_s`` or a reply with no byte for
``read_timeout_s``) and ``http.client.HTTPException`` (a status line that is not HTTP, a reply cut short,
a connection closed before any reply). Any failure or cancellation aborts the connection it happened on:
a reply read half-way never leaves bytes for the next call. A kept-alive connection that turns out
closed before any byte of the reply (the server's idle timeout raced the request) is retried once on a
new connection (the request cannot have been served); anything else is the caller's to retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import ssl
from collections import deque
from collections.abc import AsyncGenerator
from typing import NamedTuple

_HEAD_END = b"\r\n\r\n"
_MAX_HEAD = 65536


class AsyncReply(NamedTuple):
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes


class _Http(asyncio.Protocol):
    """One HTTP/1.1 connection; one request at a time."""

    __slots__ = (
        "_buffer",
        "_chunked",
        "_head",
        "_last_byte",
        "_length",
        "_loop",
        "_read_timeout_s",
        "_timer",
        "_waiter",
        "answered_any",
        "closed",
        "transport",
        "used",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, read_timeout_s: float) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.used = False  # a request was sent on it before
        self.answered_any = False  # a byte of the current request's reply came
        self._loop = loop
        self._buffer = bytearray()
        self._waiter: asyncio.Future[AsyncReply] | None = None
        self._head: tuple[int, dict[str, str], int] | None = None  # status, headers, body offset
        self._length: int | None = None
        self._chunked = False
        self._read_timeout_s = read_timeout_s
        self._timer: asyncio.TimerHandle | None = None
        self._last_byte = 0.0

    # -- asyncio.Protocol ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:  # nothing asked: a server that talks out of turn is not reused
            self.abort()
            return
        self._last_byte = self._loop.time()
        self.answered_any = True
        self._buffer += data
        try:
            reply = self._parse(eof=False)
        except http.client.HTTPException as exc:
            self._fail(exc)
            return
        if reply is not None:
            self._done(reply)

    def eof_received(self) -> bool:
        if self._waiter is not None:
            try:
                reply = self._parse(eof=True)
            except http.client.HTTPException as exc:
                self._fail(exc)
            else:
                if reply is not None:
                    self.closed = True  # read to the close: not reusable
                    self._done(reply)
        self.closed = True
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is not None:
            if exc is None:
                if not self._buffer:
                    self._fail(http.client.RemoteDisconnected("the connection closed before any reply"))
                else:
                    self._fail(http.client.IncompleteRead(bytes(self._buffer)))
            else:
                self._fail(exc)

    # -- one request -----------------------------------------------------------------------------------

    def request(self, data: bytes) -> asyncio.Future[AsyncReply]:
        if self.closed:  # closed while idle, after the pool took it: as if the server closed it now
            raise http.client.RemoteDisconnected("the connection closed before the request")
        waiter = self._loop.create_future()
        self._waiter = waiter
        self._buffer.clear()
        self._head, self._length, self._chunked = None, None, False
        self._last_byte = self._loop.time()
        self._timer = self._loop.call_at(self._last_byte + self._read_timeout_s, self._check_timeout)
        self.answered_any = False
        assert self.transport is not None
        self.transport.write(data)
        self.used = True
        return waiter

    def _check_timeout(self) -> None:
        if self._waiter is None:
            return
        due = self._last_byte + self._read_timeout_s
        if self._loop.time() < due:  # bytes came meanwhile: wait from the last of them
            self._timer = self._loop.call_at(due, self._check_timeout)
            return
        self._timer = None
        self._fail(TimeoutError(f"no reply byte for {self._read_timeout_s:g} s (read timeout)"))

    def _settle(self) -> asyncio.Future[AsyncReply] | None:
        waiter, self._waiter = self._waiter, None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        return waiter

    def _done(self, reply: AsyncReply) -> None:
        waiter = self._settle()
        self._buffer.clear()
        if waiter is not None and not waiter.done():
            waiter.set_result(reply)

    def _fail(self, exc: BaseException) -> None:
        waiter = self._settle()
        self.abort()
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # -- parsing ---------------------------------------------------------------------------------------

    def _parse(self, *, eof: bool) -> AsyncReply | None:
        """The whole reply once it is in the buffer; None while more is to come."""
        buffer = self._buffer
        if self._head is None:
            end = buffer.find(_HEAD_END)
            if end < 0:
                if len(buffer) > _MAX_HEAD or (eof and buffer):
                    raise http.client.BadStatusLine(bytes(buffer[:80]).decode("latin-1"))
                return None
            self._head = _head(bytes(buffer[:end]))
            headers = self._head[1]
            self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
            length = headers.get("content-length")
            if length is not None and not self._chunked:
                if not length.isdigit():
                    raise http.client.HTTPException(f"a Content-Length that is not a number: {length!r}")
                self._length = int(length)
            elif self._head[0] in (204, 304) or 100 <= self._head[0] < 200:
                self._length = 0
        status, headers, start = self._head
        if self._chunked:
            body = _dechunk(buffer, start)
            if body is None:
                if eof:
                    raise http.client.IncompleteRead(bytes(buffer[start:]))
                return None
        elif self._length is not None:
            have = len(buffer) - start
            if have < self._length:
                if eof:
                    raise http.client.IncompleteRead(bytes(buffer[start:]), self._length - have)
                return None
            body = bytes(buffer[start : start + self._length])
        else:  # neither: the body runs to the close
            if not eof:
                return None
            body = bytes(buffer[start:])
            headers["connection"] = "close"
        return AsyncReply(status, headers, body)


def _head(raw: bytes) -> tuple[int, dict[str, str], int]:
    """Status, headers (lower-case names) and where the body starts, from the head's bytes."""
    lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/") or not code.isdigit():
        raise http.client.BadStatusLine(lines[0][:80])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon:
            raise http.client.HTTPException(f"a header line without a colon: {line[:80]!r}")
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    if version == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive":
        headers["connection"] = "close"
    return int(code), headers, len(raw) + len(_HEAD_END)


def _dechunk(buffer: bytearray, start: int) -> bytes | None:
    """A chunked body's bytes once its last chunk is in (trailers ignored); None while incomplete."""
    parts: list[bytes] = []
    at = start
    while True:
        line_end = buffer.find(b"\r\n", at)
        if line_end < 0:
            return None
        size_text = bytes(buffer[at:line_end]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError as exc:
            raise http.client.HTTPException(f"a chunk size that is not hex: {size_text[:20]!r}") from exc
        at = line_end + 2
        if size == 0:
            if buffer.find(_HEAD_END, line_end) < 0 and buffer[at : at + 2] != b"\r\n":
                return None  # trailers still to come
            return b"".join(parts)
        if len(buffer) < at + size + 2:
            return None
        parts.append(bytes(buffer[at : at + size]))
        at += size + 2


async def _close_at_shutdown(
    pool: AsyncConnectionPool, loop: asyncio.AbstractEventLoop
) -> AsyncGenerator[None, None]:
    """Closes ``pool``'s connections while its loop shuts down: ``asyncio.run`` (and ``Runner``) close
    the loop's suspended async generators before the loop itself, so the connections end on a loop
    that still runs (a transport left to a closed loop can no longer close its socket)."""
    try:
        yield
    finally:
        if pool._loop is loop:  # not since moved to another loop
            pool.close()


class AsyncConnectionPool:
    """Keep-alive connections to ``scheme://host:port`` on one event loop at a time (not thread-safe:
    a pool used from a new loop starts over, its connections of the old loop dropped)."""

    def __init__(
        self,
        scheme: str,
        host: str,
        port: int,
        *,
        connect_timeout_s: float,
        read_timeout_s: float,
        max_open: int,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if scheme not in ("http", "https"):
            raise ValueError(f"unsupported scheme {scheme!r}")
        self.scheme, self.host, self.port = scheme, host, port
        self._connect_timeout_s = connect_timeout_s
        self._read_timeout_s = read_timeout_s
        self._max_open = max(1, max_open)
        self._ssl: ssl.SSLContext | None = None
        if scheme == "https":
            self._ssl = ssl_context or ssl.create_default_context()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: list[_Http] = []
        self._open = 0  # connections taken or idle (or being opened)
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._closer: AsyncGenerator[None, None] | None = None  # see _close_at_shutdown

    @property
    def open_connections(self) -> int:
        return self._open

    def _bind(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._drop_all()
            self._loop = loop
            closer = self._closer = _close_at_shutdown(self, loop)
            with contextlib.suppress(StopIteration):  # runs it to its yield: the loop now tracks it
                closer.asend(None).send(None)
        return loop

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> _Http:
        protocol = _Http(loop, self._read_timeout_s)
        async with asyncio.timeout(self._connect_timeout_s):
            await loop.create_connection(
                lambda: protocol,
                self.host,
                self.port,
                ssl=self._ssl,
                server_hostname=self.host if self._ssl is not None else None,
            )
        return protocol

    async def _take(self, loop: asyncio.AbstractEventLoop) -> _Http:
        while True:
            idle = self._idle
            while idle:
                protocol = idle.pop()
                if not protocol.closed:
                    return protocol
                self._open -= 1
            if self._open < self._max_open:
                break
            waiter = loop.create_future()
            self._waiting.append(waiter)
            try:
                await waiter
            except BaseException:
                with contextlib.suppress(ValueError):
                    self._waiting.remove(waiter)
                raise
        self._open += 1
        try:
            return await self._connect(loop)
        except BaseException:
            self._open -= 1
            self._wake()
            raise

    def _wake(self) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _give(self, protocol: _Http, reusable: bool) -> None:
        if protocol._loop is not self._loop:  # of a loop this pool has left: counted no more
            protocol.abort()
            return
        if reusable and not protocol.closed:
            self._idle.append(protocol)
        else:
            protocol.abort()
            self._open -= 1
        self._wake()

    async def post(self, head: bytes, body: bytes) -> AsyncReply:
        """Send ``head`` (the request line and headers, ending in the blank line) and ``body``; the
        whole reply."""
        loop = self._bind()
        request = head + body
        while True:
            protocol = await self._take(loop)
            kept = protocol.used  # a kept-alive connection the server may have closed meanwhile
            try:
                reply = await protocol.request(request)
            except (http.client.RemoteDisconnected, BrokenPipeError):
                self._give(protocol, reusable=False)
                if kept and not protocol.answered_any:
                    continue  # closed by the server before our request: once more, on a new one
                raise
            except BaseException:
                self._give(protocol, reusable=False)
                raise
            self._give(protocol, reusable=reply.headers.get("connection", "").lower() != "close")
            return reply

    def _drop_all(self) -> None:
        idle, self._idle = self._idle, []
        for protocol in idle:
            with contextlib.suppress(Exception):  # the loop it ran on may be closed
                protocol.abort()
        self._open = 0
        self._waiting.clear()

    def close(self) -> None:
        self._drop_all()
