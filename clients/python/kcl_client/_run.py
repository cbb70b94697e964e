"""The :func:`run` loop: read one daemon message, call the processor, answer with a status, repeat.

Rules (see ``protocol/README.md``): strictly one action at a time; a ``status`` follows every known
action, even when the handler raised (the traceback goes to stderr); unknown actions and stray checkpoint
replies are logged and ignored; end of stdin returns normally, so the process exits 0.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from typing import BinaryIO

from kcl_client._checkpointer import Checkpointer
from kcl_client._errors import ProtocolError
from kcl_client._io import Channel, ChannelLike, Parsed, decode_parsed, private_stdout, user_output_to_stderr
from kcl_client._messages import (
    CheckpointReply,
    DaemonMessage,
    Initialize,
    LeaseLost,
    LegacyShutdown,
    ProcessRecords,
    ShardEnded,
    ShutdownRequested,
    UnknownAction,
    lanes_offered,
    status,
)
from kcl_client._processor import ProcessRecordsInput, RecordProcessor

logger = logging.getLogger("kcl_client")

_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def run(
    processor: RecordProcessor | Callable[[], RecordProcessor],
    *,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
) -> None:
    """Serve the daemon's protocol with ``processor`` until stdin closes.

    ``processor`` is a processor instance (this process serves one shard), or a class or other callable
    that makes one: then, when kcl-daemon offers lanes (``shardsPerChild``), this process serves several
    shards at once, each with a processor of its own on a thread of its own; otherwise it makes one
    processor and serves one shard, as with an instance.

    With the defaults (a real child process), the protocol uses stdin and a private duplicate of stdout;
    file descriptor 1 and ``sys.stdout`` point at stderr until ``run`` returns, so ``print()`` is safe.
    If the root logger has no handlers, INFO-level logging to stderr is set up. Pass ``stdin``/``stdout``
    (binary streams) to drive a processor in tests; then no file descriptors are touched.

    Raises :class:`ProtocolError` if the daemon sends a known action with unusable fields.
    """
    with ExitStack() as stack:
        if stdout is None:
            if not logging.getLogger().handlers:
                logging.basicConfig(stream=sys.stderr, level=logging.INFO, format=_LOG_FORMAT)
            stdout = stack.enter_context(private_stdout())
        if stdin is None:
            stdin = sys.stdin.buffer
        channel = Channel(stdin, stdout)
        if isinstance(processor, RecordProcessor):
            _Session(processor, channel).serve()
            return
        first = channel.receive_parsed()
        if first is None:
            return
        if (
            isinstance(first.obj, dict)
            and first.obj.get("action") == "initialize"
            and lanes_offered(first.obj)
        ):
            from kcl_client._lanes import serve_lanes  # only a child that takes the offer needs threads

            serve_lanes(processor, channel, first, _Session)
            return
        _Session(processor(), channel).serve(first)


class _Session:
    """One processor on one channel: the read, dispatch, status loop."""

    def __init__(self, processor: RecordProcessor, channel: ChannelLike, *, swap_stdout: bool = True) -> None:
        self._processor = processor
        self._channel = channel
        self._swap_stdout = swap_stdout
        self._offered: tuple[str, ...] = ()
        processor._telemetry = self

    def offered(self, action: str) -> bool:
        """Whether the daemon offered this action of its log/metric channel."""
        return action in self._offered

    def send(self, line: bytes) -> None:
        self._channel.send(line)

    def serve(self, first: Parsed | None = None) -> None:
        """Answer messages until the input ends; ``first``: one already read from the channel."""
        message = None if first is None else decode_parsed(first)
        if message is None:
            message = self._channel.receive()
        while message is not None:
            response_for = self._dispatch(message)
            if self._channel.closed:
                break  # stdin closed while a handler waited for a checkpoint reply
            if response_for is not None:
                try:
                    self._channel.send(status(response_for))
                except BrokenPipeError:
                    logger.warning("the daemon closed our stdout; exiting")
                    return
            message = self._channel.receive()
        logger.debug("stdin closed; exiting")

    def _dispatch(self, message: DaemonMessage) -> str | None:
        """Call the handler for ``message``; return the action to report a status for (None: no status)."""
        processor = self._processor
        match message:
            case Initialize(shard_id=shard_id, position=position, channel=channel):
                logger.debug("initialize %s at %s", shard_id, position)
                self._offered = channel
                processor.stream_name = message.stream_name
                processor.stream_identifier = message.stream_identifier
                self._call("initialize", lambda: processor.initialize(shard_id, position))
                return "initialize"
            case ProcessRecords(records=records, millis_behind_latest=behind):
                self._call_with_checkpointer(
                    "processRecords",
                    lambda checkpointer: processor.process_records(
                        ProcessRecordsInput(records, behind, checkpointer)
                    ),
                )
                return "processRecords"
            case LeaseLost():
                self._call("leaseLost", processor.lease_lost)
                return "leaseLost"
            case ShardEnded():
                self._call_with_checkpointer("shardEnded", processor.shard_ended)
                return "shardEnded"
            case ShutdownRequested():
                self._call_with_checkpointer("shutdownRequested", processor.shutdown_requested)
                return "shutdownRequested"
            case LegacyShutdown(reason=reason):
                # KCL 1.x daemons: TERMINATE is today's shardEnded, ZOMBIE today's leaseLost.
                if reason == "TERMINATE":
                    self._call_with_checkpointer("shutdown", processor.shard_ended)
                else:
                    self._call("leaseLost", processor.lease_lost)
                return "shutdown"
            case CheckpointReply():
                logger.warning("ignoring a checkpoint reply that answers no request: %r", message)
                return None
            case UnknownAction(action=action):
                logger.warning("ignoring a message with unknown action %r", action)
                return None

    def _call_with_checkpointer(self, action: str, handler: Callable[[Checkpointer], None]) -> None:
        checkpointer = Checkpointer(self._channel, action)
        try:
            self._call(action, lambda: handler(checkpointer))
        finally:
            checkpointer._close()

    def _call(self, name: str, handler: Callable[[], None]) -> None:
        with user_output_to_stderr() if self._swap_stdout else nullcontext():
            try:
                handler()
            except ProtocolError:
                raise
            except EOFError:
                if not self._channel.closed:
                    logger.exception("the handler for %s raised; the daemon still gets its status", name)
            except Exception:
                logger.exception("the handler for %s raised; the daemon still gets its status", name)
