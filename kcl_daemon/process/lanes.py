"""Several shards in one child process ("lanes"): kcl-daemon's protocol extension, offered in ``initialize``.

With ``shardsPerChild = N`` (N > 1) the worker offers each new child ``"lanes": N`` in the first
``initialize`` it sends it. A child that knows the extension accepts by writing ``{"action":"lanes"}``
before its status for that ``initialize``; from then on every line, both ways, carries ``"lane": L`` (an
integer; the first shard is lane 0), and the daemon opens up to N lanes on that child, one per shard,
each a conversation of its own exactly as with a child of its own. ``{"action":"close","lane":L}`` is a
lane's end of input. A child that answers ``initialize`` without accepting (amazon_kclpy, aws-kcl, a
kcl_client child given one processor instance) never sees another lane line: the worker remembers it and
starts one plain child per shard from then on, as without the key. protocol/README.md section 11.

The pieces:

* :class:`LanePool` is the :data:`~kcl_daemon.lifecycle.ports.ChildLauncher`: it hands out a lane of a
  child that accepted and has room, else starts a child (and while one child's answer is pending, later
  launches wait for it, so a start-up of 256 shards fills children instead of starting 256);
* :class:`_SharedChild` owns the real :class:`ChildProcess` and one reader task that routes its stdout
  lines to the lanes by their ``lane`` key;
* :class:`Lane` looks like a :class:`ChildProcess` to :class:`~kcl_daemon.process.session.ChildSession`
  (``write``, ``read_line``, ``stop``, ``pid``...), so a shard consumer drives it unchanged.

A lane stopped between actions (its shard ended, its lease was lost, the worker stops, the child answered
something wrong) only closes its lane; the child is stopped when its last lane closes. A lane stopped while
an action it was sent is still unanswered (a timeout, a stall) stops the child, and with it the other lanes
of that child, whose shards restart their processors as after any child failure: a handler that does not
return cannot be taken out of a shared process any other way. That is the price of sharing a process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Final

import orjson

from kcl_daemon.errors import ChildExited, ChildFault, ChildLineTooLong, ChildTimeout
from kcl_daemon.process.child import ChildProcess, StopTimeouts

logger = logging.getLogger(__name__)

OFFER_KEY: Final = "lanes"
ACCEPT_LINE_ACTION: Final = "lanes"
_CLOSE: Final = b'{"action":"close","lane":%d}\n'
_CHECKPOINT_REPLY: Final = b'{"action":"checkpoint"'
_DEFAULT_STOP: Final = StopTimeouts()

Spawn = Callable[[], Awaitable[ChildProcess]]


def _object(line: bytes) -> dict[str, object] | None:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _with_key(line: bytes, key: str, value: int) -> bytes:
    """``line`` (one compact JSON object as the daemon encodes it) with ``"key":value`` added in front."""
    if not line.startswith(b"{"):
        raise ValueError("a daemon line must be a JSON object")
    return b'{"%s":%d,' % (key.encode(), value) + line[1:]


class _SharedChild:
    """One real child and the lanes open on it."""

    def __init__(self, child: ChildProcess, most: int) -> None:
        self.child = child
        self.most = most
        self.accepted = False
        self.decided = asyncio.Event()
        self.lanes: dict[int, Lane] = {}
        self.next_lane = 0
        self.closing = False
        self.fault: ChildFault | None = None
        self._write_lock = asyncio.Lock()
        self._reader = asyncio.create_task(self._route(), name=f"lanes-{child.pid}")

    @property
    def room(self) -> bool:
        return self.accepted and not self.closing and self.fault is None and len(self.lanes) < self.most

    def open(self) -> Lane:
        lane = Lane(self, self.next_lane)
        self.lanes[lane.number] = lane
        self.next_lane += 1
        return lane

    async def write(self, lane: Lane, data: bytes, timeout_s: float | None) -> None:
        if self.fault is not None:
            raise self.fault
        if lane.number == 0 and not self.decided.is_set():
            data = _with_key(data, OFFER_KEY, self.most)  # the offer rides on the first initialize
        elif self.accepted:
            data = _with_key(data, "lane", lane.number)
        async with self._write_lock:
            await self.child.write(data, timeout_s)

    async def _route(self) -> None:
        """Read every stdout line for as long as the child lives and hand it to its lane."""
        try:
            while True:
                line = await self.child.read_line(None, waiting_for="any lane")
                self._deliver(line)
        except ChildFault as fault:
            self.fault = fault
        except Exception as exc:  # a bug here must not leave the lanes waiting forever
            logger.exception("child pid %d: routing its lines failed", self.child.pid)
            self.fault = ChildExited(f"routing the child's lines failed: {exc}")
        finally:
            self.decided.set()
            for lane in list(self.lanes.values()):
                lane.inbox.put_nowait(None)

    def _deliver(self, line: bytes) -> None:
        if not self.decided.is_set():
            obj = _object(line)
            action = obj.get("action") if obj is not None else None
            if action == ACCEPT_LINE_ACTION:
                self.accepted = True
                self.decided.set()
                logger.info("child pid %d serves up to %d shards (lanes)", self.child.pid, self.most)
                return
            if action == "status":
                self.decided.set()  # answered initialize without taking the offer: one shard only
                self.lanes[0].outstanding = False
            self.lanes[0].inbox.put_nowait(line)
            return
        if not self.accepted:
            if 0 in self.lanes:
                self.lanes[0].inbox.put_nowait(line)
            return
        obj = _object(line)
        number = obj.get("lane") if obj is not None else None
        lane = self.lanes.get(number) if type(number) is int else None
        if lane is not None:
            if obj is not None and obj.get("action") == "status":
                lane.outstanding = False
            lane.inbox.put_nowait(line)
        elif line.strip():
            logger.info("child pid %d: a stdout line for no open lane skipped: %.200r", self.child.pid, line)

    async def close(self, lane: Lane, timeouts: StopTimeouts, *, whole_child: bool) -> int | None:
        self.lanes.pop(lane.number, None)
        if not self.decided.is_set():  # closed before the child answered: launches waiting on it go on
            whole_child = True
            self.closing = True
            self.decided.set()
        if not whole_child and self.accepted and self.fault is None and not self.closing:
            with contextlib.suppress(ChildFault):
                async with self._write_lock:
                    await self.child.write(_CLOSE % lane.number, 5.0)
        if not whole_child and self.lanes:
            return None
        self.closing = True
        self._reader.cancel()  # the child's stop drains what is left of its stdout itself
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        return await self.child.stop(timeouts)


class Lane:
    """One shard's conversation on a shared child; quacks like :class:`ChildProcess` for a session."""

    def __init__(self, shared: _SharedChild, number: int) -> None:
        self._shared = shared
        self.number = number
        self.inbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._closed = False
        #: an action was sent on this lane and its status has not come back yet
        self.outstanding = False

    @property
    def pid(self) -> int:
        return self._shared.child.pid

    @property
    def returncode(self) -> int | None:
        return self._shared.child.returncode

    @property
    def stderr_tail(self) -> object:
        return self._shared.child.stderr_tail

    @property
    def exception_reports(self) -> int:
        return self._shared.child.exception_reports

    @property
    def stdout_held_open(self) -> bool:
        return self._shared.child.stdout_held_open

    def describe_exit(self) -> str:
        return f"lane {self.number} of {self._shared.child.describe_exit()}"

    async def write(self, data: bytes, timeout_s: float | None) -> None:
        if not data.startswith(_CHECKPOINT_REPLY):
            self.outstanding = True
        await self._shared.write(self, data, timeout_s)

    async def read_line(self, timeout_s: float | None, waiting_for: str) -> bytes:
        try:
            async with asyncio.timeout(timeout_s):
                line = await self.inbox.get()
        except TimeoutError:
            raise ChildTimeout(f"no answer to {waiting_for} within {timeout_s:g}s") from None
        if line is None:
            self.inbox.put_nowait(None)  # every later read sees the end too
            fault = self._shared.fault
            if isinstance(fault, ChildLineTooLong):
                raise fault
            raise ChildExited(f"stdout closed while waiting for {waiting_for}: {self.describe_exit()}")
        return line

    async def stop(self, timeouts: StopTimeouts = _DEFAULT_STOP) -> int | None:
        """Close this lane; the child itself stops with its last lane, or at once when the lane still
        waits for an action's status (the child is stuck in it), or when the shard consumer asks for its
        "hung" stop (no grace after end of input)."""
        if self._closed:
            return self.returncode
        self._closed = True
        whole = self.outstanding or timeouts.after_eof_s == 0.0 or self._shared.fault is not None
        return await self._shared.close(self, timeouts, whole_child=whole)


class LanePool:
    """The child launcher for ``shardsPerChild`` > 1 (see the module docstring)."""

    def __init__(self, spawn: Spawn, most: int) -> None:
        self._spawn = spawn
        self._most = most
        self._shared: list[_SharedChild] = []
        self._pending: _SharedChild | None = None
        #: False once a child answered initialize without taking the offer: then plain children only
        self.capable: bool | None = None
        self._lock = asyncio.Lock()

    async def __call__(self) -> ChildProcess:
        while True:
            if self.capable is False:
                return await self._spawn()
            pending = self._pending
            if pending is not None:
                await pending.decided.wait()
                if self._pending is pending:
                    self._settle(pending)
                continue
            async with self._lock:
                self._shared = [s for s in self._shared if not s.closing and s.fault is None]
                for shared in self._shared:
                    if shared.room:
                        return shared.open()  # type: ignore[return-value]
                if self._pending is not None:
                    continue
                shared = _SharedChild(await self._spawn(), self._most)
                self._pending = shared
                return shared.open()  # type: ignore[return-value]

    def _settle(self, shared: _SharedChild) -> None:
        self._pending = None
        if shared.accepted:
            self._shared.append(shared)
            self.capable = True
        elif shared.fault is None and not shared.closing:
            logger.info(
                "child pid %d did not take the offer of lanes (shardsPerChild): one child per shard",
                shared.child.pid,
            )
            self.capable = False
