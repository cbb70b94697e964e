"""The one-outstanding-action conversation state machine."""

from __future__ import annotations

import orjson
import pytest

from kcl_protocol import (
    ActionCompleted,
    CheckpointRequest,
    CheckpointRequested,
    Conversation,
    Initialize,
    LeaseLost,
    LocalProtocolError,
    NoiseSkipped,
    RemoteProtocolError,
    ShardEnded,
)


def test_full_exchange_with_checkpoint_and_noise() -> None:
    conv = Conversation()
    conv.send_action(Initialize("s", "TRIM_HORIZON", 0))
    assert isinstance(conv.receive_line(b"\n"), NoiseSkipped)
    assert conv.receive_line(b'{"action":"status","responseFor":"initialize"}') == ActionCompleted(
        "initialize"
    )
    conv.send_action(ShardEnded())
    assert conv.receive_line(b'{"action":"checkpoint","sequenceNumber":"5"}') == CheckpointRequested(
        CheckpointRequest("5", None)
    )
    reply = orjson.loads(conv.reply_checkpoint("ThrottlingException"))
    assert reply == {
        "action": "checkpoint",
        "sequenceNumber": "5",
        "subSequenceNumber": None,
        "error": "ThrottlingException",
    }
    assert conv.receive_line(b'{"action":"status","responseFor":"shardEnded"}') == ActionCompleted(
        "shardEnded"
    )


def test_only_one_action_outstanding() -> None:
    conv = Conversation()
    conv.send_action(LeaseLost())
    with pytest.raises(LocalProtocolError, match="cannot send shardEnded"):
        conv.send_action(ShardEnded())


def test_checkpoint_must_be_answered_before_reading_on() -> None:
    conv = Conversation()
    conv.send_action(ShardEnded())
    conv.receive_line(b'{"action":"checkpoint"}')
    with pytest.raises(LocalProtocolError):
        conv.receive_line(b'{"action":"status","responseFor":"shardEnded"}')
    with pytest.raises(LocalProtocolError):
        conv.send_action(LeaseLost())


def test_reading_while_idle_or_replying_unasked_is_a_local_error() -> None:
    conv = Conversation()
    with pytest.raises(LocalProtocolError):
        conv.receive_line(b"{}")
    with pytest.raises(LocalProtocolError):
        conv.reply_checkpoint(None)


@pytest.mark.parametrize("response_for", ['"initialize"', "null", '"shutdown"'])
def test_wrong_response_for_is_a_remote_error(response_for: str) -> None:
    conv = Conversation()
    conv.send_action(LeaseLost())
    with pytest.raises(RemoteProtocolError, match="leaseLost"):
        conv.receive_line(b'{"action":"status","responseFor":' + response_for.encode() + b"}")


def test_closed_conversation_refuses_everything() -> None:
    conv = Conversation()
    conv.close()
    with pytest.raises(LocalProtocolError):
        conv.send_action(LeaseLost())
