"""One record-processor child process: spawn, bounded line I/O, stderr drain, escalating stop.

Rules:

* The command is an argv list (``executableName`` split on spaces); it is never run through a shell.
* The child gets its own session/process group, so stopping it also stops anything it started.
* stderr is drained for the child's whole life and logged line by line under ``kcl_daemon.child``
  at INFO (ordinary output is not an error); the last lines are kept to explain a failure, and lines
  saying a wrapper swallowed the processor's exception are counted (``exception_reports``).
* Every read and write is bounded: a line longer than the limit, EOF, a broken pipe, or a write the
  child does not accept in time raise the matching :class:`~kcl_daemon.errors.ChildFault`.
* The child's exit is watched by the process itself (SIGCHLD), not inferred from EOF: when a child has
  exited and its stdout is still open half a second later (a process it started holds it), our end is
  closed, so the shard sees the exit at once instead of waiting forever.
* Stopping escalates: close stdin (the protocol's "please exit"), wait; SIGTERM the group, wait;
  SIGKILL the group. Leftover stdout is drained and logged meanwhile.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import signal
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kcl_daemon.core.lifecycle.poison import reports_swallowed_exception
from kcl_daemon.errors import ChildExited, ChildLineTooLong, ChildNotReading, ChildSpawnFailed, ChildTimeout

logger = logging.getLogger(__name__)
child_output_logger = logging.getLogger("kcl_daemon.child")

_STDERR_CHUNK = 64 * 1024
_STDERR_LINE_LOG_LIMIT = 8 * 1024
_STDERR_TAIL_LINES = 20
#: After the child exited, how long lines it wrote before exiting may still take to arrive.
_EXIT_GRACE_S = 0.5


def signal_name(number: int) -> str:
    """``SIGTERM`` for 15; real-time and unknown signals by number (``signal 40 (SIGRTMIN+6)``)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        low, high = signal.SIGRTMIN, signal.SIGRTMAX
        if low <= number <= high:
            return f"{number} (SIGRTMIN+{number - low})"
        return str(number)


class _WatchedProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """The standard stream protocol plus an event set as soon as the process itself exits.

    ``Process.wait()`` also waits for every pipe to close, which never happens while a grandchild
    holds one open; this event does not.
    """

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited = asyncio.Event()
        self.on_exit: list[Callable[[], None]] = []

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()
        for hook in self.on_exit:
            hook()


@dataclass(frozen=True, slots=True)
class StopTimeouts:
    """How long each step of stopping a child may take before the next, harder step."""

    after_eof_s: float = 5.0
    after_sigterm_s: float = 5.0


#: Every child not yet reaped, for :func:`kill_all_children`.
_LIVE: set[ChildProcess] = set()
_watcher_chosen = False


def kill_all_children() -> int:
    """SIGKILL the process group of every live child (the immediate stop); returns how many."""
    live = [child for child in _LIVE if child.returncode is None]
    for child in live:
        child._signal_group(signal.SIGKILL)
    return len(live)


def _watch_children_without_threads() -> None:
    """Python 3.11 watches each child process with a thread of its own blocked in ``waitpid``
    (``ThreadedChildWatcher``): 256 shards meant 256 more threads. Where Linux has pidfds, watch each
    child through a pidfd on the running event loop instead, as Python 3.12 does by default. Once per
    process; the watcher serves whichever loop is running (tests run many loops one after another)."""
    global _watcher_chosen
    if _watcher_chosen:
        return
    _watcher_chosen = True
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # a kernel older than 5.3, or a sandbox that refuses pidfds
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        asyncio.get_event_loop_policy().set_child_watcher(_PidfdWatcher())


if sys.version_info < (3, 12):  # AbstractChildWatcher is deprecated in 3.12 and gone in 3.14

    class _PidfdWatcher(asyncio.AbstractChildWatcher):
        """3.12's pidfd watcher for 3.11: serves any running loop (3.11's own is tied to one loop)."""

        def add_child_handler(self, pid: int, callback: Callable[..., object], *args: object) -> None:
            loop = asyncio.get_running_loop()
            pidfd = os.pidfd_open(pid)
            loop.add_reader(pidfd, self._reap, loop, pid, pidfd, callback, args)

        @staticmethod
        def _reap(
            loop: asyncio.AbstractEventLoop,
            pid: int,
            pidfd: int,
            callback: Callable[..., object],
            args: tuple[object, ...],
        ) -> None:
            loop.remove_reader(pidfd)
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:  # reaped elsewhere: the status is lost, as asyncio reports it
                returncode = 255
            else:
                returncode = os.waitstatus_to_exitcode(status)
            os.close(pidfd)
            callback(pid, returncode, *args)

        def remove_child_handler(self, pid: int) -> bool:
            return False

        def attach_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
            pass

        def close(self) -> None:
            pass

        def is_active(self) -> bool:
            return True

        def __enter__(self) -> _PidfdWatcher:
            return self

        def __exit__(self, *_: object) -> None:
            pass


class ChildProcess:
    """A running child. Create it with :meth:`spawn`; always finish with :meth:`stop`."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        argv: Sequence[str],
        line_limit_bytes: int,
        transport: asyncio.SubprocessTransport,
        protocol: _WatchedProtocol,
    ) -> None:
        self._process = process
        self._transport = transport
        self._exited = protocol.exited
        #: Set when the child exited but its stdout stayed open (a process it started holds it).
        self.stdout_held_open = False
        protocol.on_exit.append(self._after_exit)
        if transport.get_returncode() is not None:
            self._exited.set()
            self._after_exit()
        self.argv = tuple(argv)
        self._line_limit_bytes = line_limit_bytes
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=_STDERR_TAIL_LINES)
        #: stderr lines saying the wrapper caught (and swallowed) a processor's exception (amazon_kclpy)
        self.exception_reports = 0
        _LIVE.add(self)
        assert process.stderr is not None
        self._stderr_task = asyncio.create_task(
            self._drain_stderr(process.stderr), name=f"stderr-{process.pid}"
        )

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        line_limit_bytes: int,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ChildProcess:
        if not argv:
            raise ChildSpawnFailed("executableName is empty")
        loop = asyncio.get_running_loop()
        _watch_children_without_threads()
        try:
            # asyncio.create_subprocess_exec, with a protocol that reports the process's own exit.
            transport, protocol = await loop.subprocess_exec(
                lambda: _WatchedProtocol(line_limit_bytes, loop),
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                cwd=cwd,
                env=dict(env) if env is not None else None,
            )
        except OSError as exc:
            where = f" (working directory {cwd or os.getcwd()})"
            raise ChildSpawnFailed(f"cannot start {argv[0]!r}: {exc.strerror or exc}{where}") from exc
        process = asyncio.subprocess.Process(transport, protocol, loop)
        logger.info("started child pid %d: %s", process.pid, " ".join(argv))
        return cls(process, argv, line_limit_bytes, transport, protocol)

    def _after_exit(self) -> None:
        asyncio.get_running_loop().call_later(_EXIT_GRACE_S, self._end_held_stdout)

    def _end_held_stdout(self) -> None:
        """The child exited a while ago: if its stdout is still open, something it started holds it.
        Close our end, so a read waiting on it sees end of file instead of waiting forever."""
        pipe = self._transport.get_pipe_transport(1)
        if pipe is not None and not pipe.is_closing():
            self.stdout_held_open = True
            pipe.close()

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    def describe_exit(self) -> str:
        code = self._process.returncode
        if code is None:
            status = "is still running"
        elif code < 0:
            status = f"was killed by signal {signal_name(-code)}"
        else:
            status = f"exited with status {code}"
        tail = " | ".join(self.stderr_tail) if code != 0 else ""
        return f"child pid {self.pid} {status}" + (f"; last stderr: {tail}" if tail else "")

    async def write(self, data: bytes, timeout_s: float | None) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        try:
            stdin.write(data)
            async with asyncio.timeout(timeout_s):
                await stdin.drain()
        except TimeoutError:
            raise ChildNotReading(
                f"the child did not read {len(data)} bytes from its stdin within {timeout_s:g}s"
            ) from None
        except (BrokenPipeError, ConnectionResetError):
            await self._settle()
            raise ChildExited(f"stdin is closed: {self.describe_exit()}") from None

    async def read_line(self, timeout_s: float | None, waiting_for: str) -> bytes:
        stdout = self._process.stdout
        assert stdout is not None
        try:
            async with asyncio.timeout(timeout_s):
                line = await stdout.readline()
        except TimeoutError:
            raise ChildTimeout(f"no answer to {waiting_for} within {timeout_s:g}s") from None
        except ValueError:
            raise ChildLineTooLong(
                f"a stdout line is longer than the {self._line_limit_bytes} byte limit (childMaxLineBytes)"
            ) from None
        if not line:
            await self._settle()
            if self.stdout_held_open:
                raise ChildExited(
                    f"the child exited while waiting for {waiting_for}, but a process it started still "
                    f"holds its stdout open: {self.describe_exit()}"
                )
            raise ChildExited(f"stdout closed while waiting for {waiting_for}: {self.describe_exit()}")
        return line

    async def _settle(self) -> None:
        """Give a dying child a moment to be reaped so its exit status can be reported."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await self._exited.wait()

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        pending = b""
        while chunk := await stream.read(_STDERR_CHUNK):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self._log_stderr(line)
            if len(pending) > _STDERR_LINE_LOG_LIMIT:
                self._log_stderr(pending)
                pending = b""
        if pending:
            self._log_stderr(pending)

    def _log_stderr(self, raw: bytes) -> None:
        text = raw.rstrip(b"\r").decode("utf-8", errors="replace")
        if len(text) > _STDERR_LINE_LOG_LIMIT:
            text = text[:_STDERR_LINE_LOG_LIMIT] + f"... ({len(text)} chars)"
        if text:
            self.stderr_tail.append(text)
            if reports_swallowed_exception(text):
                self.exception_reports += 1
            child_output_logger.info("%s", text, extra={"child_pid": self.pid})

    async def _drain_stdout(self) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        with contextlib.suppress(ValueError, ConnectionError):
            while line := await stdout.readline():
                text = line.rstrip(b"\r\n").decode("utf-8", errors="replace")
                if text:
                    child_output_logger.info(
                        "stdout after shutdown: %.200s", text, extra={"child_pid": self.pid}
                    )

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, sig)

    async def _wait(self, timeout_s: float) -> bool:
        try:
            async with asyncio.timeout(timeout_s):
                await self._exited.wait()
        except TimeoutError:
            return False
        return True

    async def stop(self, timeouts: StopTimeouts = StopTimeouts()) -> int | None:
        """Stop the child (EOF, then SIGTERM, then SIGKILL of its group). Returns its exit status."""
        stdin = self._process.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        stdout_task = asyncio.create_task(self._drain_stdout(), name=f"stdout-{self.pid}")
        try:
            if not await self._wait(timeouts.after_eof_s):
                logger.warning("child pid %d ignored end of input; sending SIGTERM", self.pid)
                self._signal_group(signal.SIGTERM)
                if not await self._wait(timeouts.after_sigterm_s):
                    logger.warning("child pid %d ignored SIGTERM; sending SIGKILL", self.pid)
                    self._signal_group(signal.SIGKILL)
                    await self._exited.wait()
            # Grandchildren that outlived the child would keep the pipes open: stop the group.
            self._signal_group(signal.SIGKILL)
            for task in (stdout_task, self._stderr_task):
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(2.0):
                        await asyncio.shield(task)
        finally:
            for task in (stdout_task, self._stderr_task):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(stdout_task, self._stderr_task, return_exceptions=True)
        _LIVE.discard(self)
        logger.info("%s", self.describe_exit())
        return self._process.returncode
