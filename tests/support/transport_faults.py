"""An endpoint that fails at the transport level, one way per :class:`TransportFault` (test helper).

Where :mod:`tests.support.fault_proxy` answers like a service that throttles or errs, this server
misbehaves below HTTP, the way networks do: a refused connection, a reset, a reply that never comes, a
connection that is never accepted, a reply cut short, bytes that are not HTTP, a TLS handshake closed
half-way, and for event streams a frame whose checksum is wrong or that stops in the middle. Every
request gets the fault of the server's current :attr:`TransportFaultServer.fault`. Independent of
kcl_daemon; request bodies are read and thrown away, never logged.
"""

from __future__ import annotations

import contextlib
import enum
import socket
import struct
import threading
from types import TracebackType

from tests.support.fanout_server import event_message, json_event


class TransportFault(enum.StrEnum):
    REFUSED = "connection refused"
    RESET = "reset before the reply"
    READ_TIMEOUT = "no reply (read timeout)"
    CONNECT_TIMEOUT = "never accepted (connect timeout)"
    TRUNCATED = "reply shorter than its Content-Length"
    GARBAGE = "a reply that is not HTTP"
    TLS_EOF = "TLS handshake closed half-way"
    BAD_CRC = "a whole reply whose CRC32 header does not match"
    NOT_JSON = "a whole reply that is not JSON"
    # event streams (SubscribeToShard) only
    CORRUPT_FRAME = "event frame with a wrong checksum"
    TRUNCATED_FRAME = "event stream cut inside a frame"


#: The faults every request/response call path is checked against.
HTTP_FAULTS = (
    TransportFault.REFUSED,
    TransportFault.RESET,
    TransportFault.READ_TIMEOUT,
    TransportFault.CONNECT_TIMEOUT,
    TransportFault.TRUNCATED,
    TransportFault.GARBAGE,
    TransportFault.TLS_EOF,
    TransportFault.BAD_CRC,
    TransportFault.NOT_JSON,
)
STREAM_FAULTS = (TransportFault.CORRUPT_FRAME, TransportFault.TRUNCATED_FRAME)


def _read_request(conn: socket.socket) -> bool:
    """Read one HTTP request (headers and a Content-Length body); False at EOF."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip() or b"0")
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        body += chunk
    return True


def _reset(conn: socket.socket) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


class TransportFaultServer:
    """``endpoint`` (http://, or https:// for TLS_EOF) fails every request with ``fault``."""

    def __init__(self, fault: TransportFault = TransportFault.RESET) -> None:
        self.fault = fault
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        # a port nobody listens on, for REFUSED
        probe = socket.create_server(("127.0.0.1", 0))
        self._closed_port = probe.getsockname()[1]
        probe.close()
        # a listener that never accepts and whose queue is full, for CONNECT_TIMEOUT
        self._full = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._full.bind(("127.0.0.1", 0))
        self._full.listen(0)
        self._fillers: list[socket.socket] = []
        for _ in range(8):
            filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(self._full.getsockname())
            self._fillers.append(filler)
        self._thread = threading.Thread(target=self._serve, name="transport-faults", daemon=True)

    @property
    def endpoint(self) -> str:
        if self.fault is TransportFault.REFUSED:
            return f"http://127.0.0.1:{self._closed_port}"
        if self.fault is TransportFault.CONNECT_TIMEOUT:
            return f"http://127.0.0.1:{self._full.getsockname()[1]}"
        scheme = "https" if self.fault is TransportFault.TLS_EOF else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def __enter__(self) -> TransportFaultServer:
        self._thread.start()
        return self

    def __exit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(5)
        with self._lock:
            for conn in self._held:
                with contextlib.suppress(OSError):
                    conn.close()
        for sock in (self._listener, self._full, *self._fillers):
            with contextlib.suppress(OSError):
                sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        try:
            fault = self.fault
            if fault is TransportFault.TLS_EOF:
                conn.recv(65536)  # the ClientHello
                conn.close()  # EOF in the middle of the handshake
                return
            if not _read_request(conn):
                conn.close()
                return
            if fault in (TransportFault.RESET, TransportFault.REFUSED, TransportFault.CONNECT_TIMEOUT):
                _reset(conn)
            elif fault is TransportFault.READ_TIMEOUT:
                with self._lock:
                    self._held.append(conn)  # never answered; closed when the server stops
            elif fault is TransportFault.TRUNCATED:
                body = b'{"Items": [{"leaseKey": {"S": "shardId-0'
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\n"
                    + f"Content-Length: {len(body) + 500}\r\n\r\n".encode()
                    + body
                )
                conn.close()
            elif fault in (TransportFault.BAD_CRC, TransportFault.NOT_JSON):
                body = b"{}" if fault is TransportFault.BAD_CRC else b"<html>proxy error</html>"
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\n"
                    + b"x-amz-crc32: 12345\r\n" * (fault is TransportFault.BAD_CRC)
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                conn.close()
            elif fault is TransportFault.GARBAGE:
                conn.sendall(b"\x00\x17\x03not http at all\r\n\r\n")
                conn.close()
            else:  # an event stream that breaks
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.amazon.eventstream\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n"
                )
                initial = event_message({":message-type": "event", ":event-type": "initial-response"}, b"{}")
                record = json_event(
                    "SubscribeToShardEvent",
                    {"Records": [], "ContinuationSequenceNumber": "1", "MillisBehindLatest": 0},
                )
                if fault is TransportFault.CORRUPT_FRAME:
                    broken = record[:-4] + bytes(b ^ 0xFF for b in record[-4:])  # wrong message CRC
                    conn.sendall(_chunk(initial) + _chunk(broken))
                    conn.close()
                else:
                    conn.sendall(_chunk(initial) + _chunk(record[: len(record) // 2]))
                    _reset(conn)
        except OSError:
            with contextlib.suppress(OSError):
                conn.close()
