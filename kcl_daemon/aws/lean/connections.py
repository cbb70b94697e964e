"""A pool of keep-alive HTTP(S) connections to one endpoint, over the standard library's ``http.client``.

Each request goes out in one ``send``, its head and its bytes body together (``http.client`` and urllib3 2
send them apart: a second segment and a second wake-up of the server for every call). Connections are kept
last-in first-out, so the ones in use stay warm; one that the server closed while it was idle (it reads
as ready with nothing to read) is dropped before use. Any failure closes the connection it happened on:
a reply read half-way never leaves bytes for the next call. Errors are the standard library's
(``OSError``, ``http.client.HTTPException``); :mod:`kcl_daemon.aws.errors` maps them.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
from typing import NamedTuple


class Reply(NamedTuple):
    status: int
    headers: http.client.HTTPMessage
    body: bytes


class _OneSend:
    """Connects within the connect timeout, then reads within the read timeout; sends a request's head
    and its bytes body in one ``send`` (``http.client`` sends them apart)."""

    read_timeout_s: float = 5.0
    sock: socket.socket
    _buffer: list[bytes]

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        self.sock.settimeout(self.read_timeout_s)

    def _send_output(self, message_body: object = None, encode_chunked: bool = False) -> None:
        if not isinstance(message_body, bytes):
            super()._send_output(message_body, encode_chunked)  # type: ignore[misc]
            return
        self._buffer.extend((b"", b""))
        head = b"\r\n".join(self._buffer)
        del self._buffer[:]
        self.send(head + message_body)  # type: ignore[attr-defined]


class _Connection(_OneSend, http.client.HTTPConnection):
    pass


class _TlsConnection(_OneSend, http.client.HTTPSConnection):
    pass


def _closed_while_idle(connection: http.client.HTTPConnection) -> bool:
    """Whether an idle kept-alive connection was closed by the server (readable with no request out).

    ``poll``, not ``select``: a daemon with hundreds of children has sockets numbered above select's
    1024, which select cannot watch."""
    sock = connection.sock
    if sock is None:
        return True
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class ConnectionPool:
    """Keep-alive connections to ``scheme://host:port``; ``post`` is thread-safe."""

    def __init__(
        self,
        scheme: str,
        host: str,
        port: int,
        *,
        connect_timeout_s: float,
        read_timeout_s: float,
        max_idle: int,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if scheme not in ("http", "https"):
            raise ValueError(f"unsupported scheme {scheme!r}")
        self.scheme, self.host, self.port = scheme, host, port
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.max_idle = max_idle
        self.ssl_context = ssl_context
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _new(self) -> http.client.HTTPConnection:
        connection: _Connection | _TlsConnection
        if self.scheme == "https":
            connection = _TlsConnection(
                self.host, self.port, timeout=self.connect_timeout_s, context=self.ssl_context
            )
        else:
            connection = _Connection(self.host, self.port, timeout=self.connect_timeout_s)
        connection.read_timeout_s = self.read_timeout_s
        return connection

    def _take(self) -> http.client.HTTPConnection:
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                return self._new()
            if not _closed_while_idle(connection):
                return connection
            connection.close()

    def _give(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self.max_idle:
                self._idle.append(connection)
                return
        connection.close()

    def post(self, headers: dict[str, str], body: bytes) -> Reply:
        """``POST /`` with ``headers`` (``Host`` included) and ``body``; the whole reply."""
        connection = self._take()
        try:
            connection.request("POST", "/", body, headers)
            reply = connection.getresponse()
            data = reply.read()
        except BaseException:
            connection.close()
            raise
        if reply.will_close:
            connection.close()
        else:
            self._give(connection)
        return Reply(reply.status, reply.headers, data)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
