"""One protocol conversation with a running child: send an action, serve checkpoints, await its status.

This is the thin shell around :class:`kcl_protocol.Conversation`: the state machine decides, this module
only moves bytes. Rules it adds:

* The read timeout applies to each line read (Java's ``timeoutInSeconds`` semantics), so a child that
  checkpoints regularly during a long batch never times out; the checkpoint write itself is not timed.
* Every checkpoint request is answered at once, before anything else is sent (kclpy blocks on it).
* A checkpoint request whose fields cannot be used (``malformed``) is answered
  ``IllegalArgumentException`` at once; it is never skipped, which would leave the child waiting.
* Actions without a checkpointer (``initialize``, ``leaseLost``) answer ``InvalidStateException``.
* A child that writes nothing for ``stall_warning_s`` while an action is outstanding is *stalled*: one
  warning per stall names the action and the elapsed time (``timeoutInSeconds`` unset means no timeout
  ends it), :attr:`ChildSession.stalled` says so for the status line, and the next line ends the stall.
* Noise on stdout is logged (blank lines silently) and skipped.
* Log/metric lines of the channel extension go to ``on_channel`` (ignored without one); no answer.
* A ``deadLetter`` line is awaited in ``on_dead_letter`` before the next line is read, so a checkpoint
  the child asks for after it is served only once the dead letter is written (ignored without one).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from kcl_daemon.errors import ChildProtocolViolation
from kcl_daemon.process.child import ChildProcess
from kcl_protocol import (
    ActionCompleted,
    ActionMessage,
    ChannelMessage,
    ChannelReceived,
    CheckpointErrorName,
    CheckpointRequest,
    CheckpointRequested,
    Conversation,
    DeadLetterRequest,
    LogLine,
    MetricLine,
    NoiseSkipped,
    RemoteProtocolError,
)

logger = logging.getLogger(__name__)

#: Serves one checkpoint request; returns None on success or the Java error name for the reply.
CheckpointHandler = Callable[[CheckpointRequest], Awaitable[str | None]]
#: Takes one log/metric line of the channel extension (never blocks; the child gets no answer).
ChannelHandler = Callable[[ChannelMessage], None]
#: Writes the record a ``deadLetter`` line names (the child gets no answer; its next line waits).
DeadLetterHandler = Callable[[DeadLetterRequest], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ActionTimeouts:
    """Read timeout per action name (None = wait forever), and the stdin write timeout."""

    default_s: float | None = None
    per_action_s: Mapping[str, float | None] = field(default_factory=dict)
    write_s: float | None = 30.0
    stall_warning_s: float | None = 60.0

    def for_action(self, action: str) -> float | None:
        return self.per_action_s.get(action, self.default_s)


class ChildSession:
    """Drives one child through a sequence of actions. One caller at a time."""

    def __init__(
        self,
        child: ChildProcess,
        timeouts: ActionTimeouts,
        *,
        on_channel: ChannelHandler | None = None,
        on_dead_letter: DeadLetterHandler | None = None,
    ) -> None:
        self.child = child
        self._timeouts = timeouts
        self._on_channel = on_channel
        self._on_dead_letter = on_dead_letter
        self.channel_lines = 0
        self._conversation = Conversation()
        self.noise_lines = 0
        #: The action the child has been silent on past ``stall_warning_s``, while it is.
        self.stalled: str | None = None

    async def _read_watching_for_stall(self, timeout_s: float | None, action: str) -> bytes:
        stall_s = self._timeouts.stall_warning_s
        if stall_s is None or (timeout_s is not None and timeout_s <= stall_s):
            return await self.child.read_line(timeout_s, waiting_for=action)
        loop = asyncio.get_running_loop()
        started = loop.time()
        timer = loop.call_later(stall_s, self._stalled, action, started, timeout_s is None)
        try:
            return await self.child.read_line(timeout_s, waiting_for=action)
        finally:
            timer.cancel()
            if self.stalled is not None:
                logger.info(
                    "child pid %d wrote again after %.1fs waiting on %s",
                    self.child.pid,
                    loop.time() - started,
                    action,
                )
                self.stalled = None

    def _stalled(self, action: str, started: float, no_timeout: bool) -> None:
        self.stalled = action
        logger.warning(
            "child pid %d has not answered %s for %.1fs%s; it may be stuck",
            self.child.pid,
            action,
            asyncio.get_running_loop().time() - started,
            " (no timeoutInSeconds is set, so nothing ends the wait)" if no_timeout else "",
        )

    async def run_action(self, message: ActionMessage, on_checkpoint: CheckpointHandler | None) -> None:
        """Send ``message`` and return once the child answered it with a matching status."""
        action = message.action
        read_timeout = self._timeouts.for_action(action)
        await self.child.write(self._conversation.send_action(message), self._timeouts.write_s)
        while True:
            line = await self._read_watching_for_stall(read_timeout, action)
            try:
                event = self._conversation.receive_line(line)
            except RemoteProtocolError as exc:
                raise ChildProtocolViolation(str(exc)) from None
            match event:
                case ActionCompleted():
                    return
                case CheckpointRequested(request=request):
                    if request.malformed is not None:
                        logger.warning(
                            "child sent a checkpoint request that cannot be used: %s", request.malformed
                        )
                        error: str | None = CheckpointErrorName.ILLEGAL_ARGUMENT
                    elif on_checkpoint is None:
                        logger.warning(
                            "child asked to checkpoint during %s, which has no checkpointer", action
                        )
                        error = CheckpointErrorName.INVALID_STATE
                    else:
                        error = await on_checkpoint(request)
                    await self.child.write(self._conversation.reply_checkpoint(error), self._timeouts.write_s)
                case ChannelReceived(message=DeadLetterRequest() as request):
                    self.channel_lines += 1
                    if self._on_dead_letter is not None:
                        await self._on_dead_letter(request)
                    else:
                        logger.warning("child sent deadLetter, which was not offered; ignored")
                case ChannelReceived(message=LogLine() | MetricLine() as channel_message):
                    self.channel_lines += 1
                    if self._on_channel is not None:
                        self._on_channel(channel_message)
                case NoiseSkipped(noise=noise):
                    if not noise.is_blank:
                        self.noise_lines += 1
                        logger.info(
                            "skipping non-protocol line on child stdout (%s): %s", noise.reason, noise.preview
                        )
