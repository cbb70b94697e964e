"""Lanes: several shards in this one process, when kcl-daemon offers them (protocol README, section 11).

kcl-daemon with ``shardsPerChild`` above 1 puts ``"lanes": N`` in the first ``initialize``. :func:`run`
given a processor *factory* takes the offer by writing ``{"action":"lanes"}`` before anything else; from
then on every line, both ways, carries ``"lane": L``, and ``{"action":"close","lane":L}`` is lane L's end
of input. Each lane is one shard's ordinary conversation, served by its own processor (made by the
factory at the lane's ``initialize``) on a thread of its own, so a lane waiting for a checkpoint reply, or
busy in a slow handler, never holds up the others' lines.

The main thread only reads: it parses each line once and hands it to its lane's queue. Writes of all
lanes go out under one lock, each line whole. A :class:`ProtocolError` in a lane (the daemon sent
something unusable) ends the whole process with it, as it does with one shard.
"""

from __future__ import annotations

import _thread
import logging
import queue
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from kcl_client._errors import ProtocolError
from kcl_client._io import Channel, Parsed, decode_parsed
from kcl_client._messages import DaemonMessage, lanes_accepted

if TYPE_CHECKING:
    from kcl_client._processor import RecordProcessor
    from kcl_client._run import _Session

logger = logging.getLogger("kcl_client")

_CLOSE: Final = "close"


class _Lane:
    """One lane's channel: its messages from the router's queue, its lines tagged with its number."""

    def __init__(self, number: int, send_shared: Callable[[bytes], None]) -> None:
        self.number = number
        self.queue: queue.SimpleQueue[Parsed | None] = queue.SimpleQueue()
        self.closed = False
        self._send_shared = send_shared
        self._prefix = b'\n{"lane":%d,' % number
        self._exchange_lock = threading.Lock()

    def receive(self) -> DaemonMessage | None:
        if self.closed:
            return None
        parsed = self.queue.get()
        if parsed is None:
            self.closed = True
            return None
        return decode_parsed(parsed)

    def send(self, line: bytes) -> None:
        # this client's lines are b"\n{...}\n": the lane goes in as the object's first key
        self._send_shared(self._prefix + line[2:] if line.startswith(b"\n{") else line)

    def exchange(self, line: bytes) -> DaemonMessage | None:
        with self._exchange_lock:
            self.send(line)
            return self.receive()


class _Router:
    def __init__(
        self, factory: Callable[[], RecordProcessor], channel: Channel, session: type[_Session]
    ) -> None:
        self._factory = factory
        self._channel = channel
        self._session = session
        self._write_lock = threading.Lock()
        self._lanes: dict[int, _Lane] = {}
        self._threads: list[threading.Thread] = []
        self.error: BaseException | None = None

    def _send(self, line: bytes) -> None:
        with self._write_lock:
            self._channel.send(line)

    def _open(self, number: int) -> _Lane:
        lane = _Lane(number, self._send)
        self._lanes[number] = lane
        thread = threading.Thread(target=self._serve, args=(lane,), name=f"kcl-lane-{number}", daemon=True)
        self._threads.append(thread)
        thread.start()
        return lane

    def _serve(self, lane: _Lane) -> None:
        try:
            self._session(self._factory(), lane, swap_stdout=False).serve()
        except ProtocolError as exc:
            if self.error is None:
                self.error = exc
                _thread.interrupt_main()  # the reader is blocked in readline: wake it to end the process
        except BrokenPipeError:
            logger.warning("the daemon closed our stdout; lane %d ends", lane.number)
        except BaseException:  # pragma: no cover - _Session already logs what a handler raises
            logger.exception("lane %d failed", lane.number)

    def serve(self, first: Parsed) -> None:
        self._send(lanes_accepted())
        self._open(0).queue.put(first)  # the offer came on lane 0's initialize, before lanes had numbers
        try:
            while (parsed := self._channel.receive_parsed()) is not None:
                obj = parsed.obj
                number = obj.get("lane") if isinstance(obj, dict) else None
                if type(number) is not int:
                    logger.warning("skipping a line that names no lane: %r", parsed.line[:120])
                    continue
                assert isinstance(obj, dict)
                lane = self._lanes.get(number)
                if obj.get("action") == _CLOSE:
                    if lane is not None:
                        del self._lanes[number]
                        lane.queue.put(None)
                    continue
                if lane is None:
                    lane = self._open(number)
                lane.queue.put(parsed)
        except KeyboardInterrupt:
            if self.error is None:
                raise
        finally:
            for lane in self._lanes.values():
                lane.queue.put(None)
            for thread in self._threads:
                thread.join(timeout=None if self.error is None else 1.0)
        if self.error is not None:
            raise self.error


def serve_lanes(
    factory: Callable[[], RecordProcessor], channel: Channel, first: Parsed, session: type[_Session]
) -> None:
    """Take the offer of lanes and serve them until stdin closes (``first``: lane 0's initialize)."""
    saved, sys.stdout = sys.stdout, sys.stderr  # one swap for all lanes' threads, not one per call
    try:
        _Router(factory, channel, session).serve(first)
    finally:
        sys.stdout = saved
