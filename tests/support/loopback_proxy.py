"""An HTTP/1.1 proxy on a free loopback port, run by its own event loop on a background thread (test
helper): the life cycle and message framing the fault-injecting and the capacity-counting proxies share.
A subclass calls :meth:`LoopbackProxy._init_proxy` and handles one client connection in ``_handle``."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Self
from urllib.parse import urlsplit


async def read_message(reader: asyncio.StreamReader) -> tuple[bytes, dict[str, str], bytes] | None:
    """One HTTP/1.1 message: (start line + headers as sent, lower-cased headers, body). None at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    headers: dict[str, str] = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            chunk = await reader.readexactly(size + 2)
            body += chunk[:-2]
            if size == 0:
                break
        lines = [
            line
            for line in head.decode("latin-1").split("\r\n")
            if line and not line.lower().startswith("transfer-encoding")
        ]
        head = ("\r\n".join(lines) + f"\r\nContent-Length: {len(body)}\r\n\r\n").encode("latin-1")
        return head, headers, body
    length = int(headers.get("content-length", "0"))
    body = await reader.readexactly(length) if length else b""
    return head, headers, body


class LoopbackProxy:
    thread_name = "loopback-proxy"
    endpoint: str

    def _init_proxy(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self._up_host = parts.hostname or "127.0.0.1"
        self._up_port = parts.port or 80
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        #: handler tasks a subclass registers, so a stop waits for them (and cancels the stuck ones)
        self._handlers: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    def start(self) -> Self:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._server = loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
            port = self._server.sockets[0].getsockname()[1]
            self.endpoint = f"http://127.0.0.1:{port}"
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=serve, name=self.thread_name, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()  # the handler sees the end of its input and returns
        if self._handlers:
            _, stuck = await asyncio.wait(list(self._handlers), timeout=2)
            for task in stuck:
                task.cancel()
            await asyncio.gather(*stuck, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def stop(self) -> None:
        if self._loop is not None:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(5)
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
