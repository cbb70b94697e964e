"""The state machine of one daemon <-> child conversation, with no I/O (h11 style).

The daemon side drives it: ``send_action`` gives the bytes to write, ``receive_line`` turns each line the
child wrote into an event, ``reply_checkpoint`` gives the bytes of the answer to a checkpoint request.

Rules (all transitions live in this file):

* Strictly one outstanding action: a new action may be sent only once the previous one got its status.
* Lines are read only while an action is outstanding. A checkpoint request must be answered before
  anything else is read or sent; the reply is an echo of the request plus ``error``.
* A status whose ``responseFor`` is not the outstanding action is a :class:`RemoteProtocolError`.
* Noise (blank, non-JSON, unknown actions) is reported and skipped; it never changes the state.
* Channel lines (``log``, ``metric``, ``deadLetter``: :mod:`kcl_protocol.extensions`) are reported; they
  never change it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kcl_protocol.codec import NoiseLine, decode_child_line, encode_daemon_message
from kcl_protocol.errors import LocalProtocolError, RemoteProtocolError
from kcl_protocol.extensions import ChannelMessage, DeadLetterRequest, LogLine, MetricLine
from kcl_protocol.messages import ActionMessage, CheckpointReply, CheckpointRequest, Status


class ConversationState(enum.Enum):
    IDLE = "idle"  # no action outstanding; nothing is read
    AWAITING_STATUS = "awaiting status"  # an action was sent; reading the child's lines
    AWAITING_CHECKPOINT_REPLY = "awaiting checkpoint reply"  # the daemon owes the child an answer
    CLOSED = "closed"  # stdin closed; the conversation is over


@dataclass(frozen=True, slots=True)
class NoiseSkipped:
    noise: NoiseLine


@dataclass(frozen=True, slots=True)
class CheckpointRequested:
    request: CheckpointRequest


@dataclass(frozen=True, slots=True)
class ActionCompleted:
    action: str


@dataclass(frozen=True, slots=True)
class ChannelReceived:
    """A log or metric line of the channel extension; it changes nothing in the conversation."""

    message: ChannelMessage | DeadLetterRequest


ConversationEvent = NoiseSkipped | CheckpointRequested | ActionCompleted | ChannelReceived


class Conversation:
    """One child's conversation. Not thread-safe; one owner drives it."""

    def __init__(self) -> None:
        self.state = ConversationState.IDLE
        self.outstanding: str | None = None
        self._pending_request: CheckpointRequest | None = None

    def _require(self, state: ConversationState, doing: str) -> None:
        if self.state is not state:
            raise LocalProtocolError(f"cannot {doing} while {self.state.value}")

    def send_action(self, message: ActionMessage) -> bytes:
        self._require(ConversationState.IDLE, f"send {message.action}")
        self.state = ConversationState.AWAITING_STATUS
        self.outstanding = message.action
        return encode_daemon_message(message)

    def receive_line(self, line: bytes) -> ConversationEvent:
        self._require(ConversationState.AWAITING_STATUS, "read a child line")
        decoded = decode_child_line(line)
        if isinstance(decoded, NoiseLine):
            return NoiseSkipped(decoded)
        if isinstance(decoded, LogLine | MetricLine | DeadLetterRequest):
            return ChannelReceived(decoded)
        if isinstance(decoded, CheckpointRequest):
            self.state = ConversationState.AWAITING_CHECKPOINT_REPLY
            self._pending_request = decoded
            return CheckpointRequested(decoded)
        return self._complete(decoded)

    def _complete(self, status: Status) -> ActionCompleted:
        expected = self.outstanding
        assert expected is not None  # AWAITING_STATUS always has an outstanding action
        if status.response_for != expected:
            raise RemoteProtocolError(
                f"child answered {expected!r} with a status for {status.response_for!r}"
            )
        self.state = ConversationState.IDLE
        self.outstanding = None
        return ActionCompleted(expected)

    def reply_checkpoint(self, error: str | None) -> bytes:
        self._require(ConversationState.AWAITING_CHECKPOINT_REPLY, "reply to a checkpoint")
        request = self._pending_request
        assert request is not None
        self._pending_request = None
        self.state = ConversationState.AWAITING_STATUS
        return encode_daemon_message(
            CheckpointReply(request.sequence_number, request.sub_sequence_number, error)
        )

    def close(self) -> None:
        self.state = ConversationState.CLOSED
        self.outstanding = None
        self._pending_request = None
