"""kcl_protocol: the MultiLangDaemon wire protocol as plain data, with no I/O.

The daemon and the tests use it; record-processor clients in other languages implement the same
protocol from ``protocol/README.md``. Five parts:

* :mod:`kcl_protocol.messages` - one frozen dataclass per message, in both directions;
* :mod:`kcl_protocol.codec` - bytes <-> messages (one JSON object per line, orjson);
* :mod:`kcl_protocol.columns` - a batch of records held column by column, its line written in one join;
* :mod:`kcl_protocol.conversation` - the one-outstanding-action state machine of a child conversation;
* :mod:`kcl_protocol.extensions` - kcl-daemon's log/metric channel (offered in ``initialize``).

May import: the standard library and orjson only; never ``kcl_daemon`` (the `protocol-standalone`
contract).
"""

from kcl_protocol.codec import (
    NoiseLine,
    decode_child_line,
    decode_daemon_line,
    encode_child_message,
    encode_daemon_message,
)
from kcl_protocol.columns import RecordColumns, payload_bytes
from kcl_protocol.conversation import (
    ActionCompleted,
    ChannelReceived,
    CheckpointRequested,
    Conversation,
    ConversationEvent,
    NoiseSkipped,
)
from kcl_protocol.errors import (
    CheckpointErrorName,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
)
from kcl_protocol.extensions import ChannelMessage, ChannelOffer, DeadLetterRequest, LogLine, MetricLine
from kcl_protocol.messages import (
    ACTION_MESSAGES,
    ActionMessage,
    AnyRecord,
    CheckpointReply,
    CheckpointRequest,
    ChildMessage,
    DaemonMessage,
    EncodedRecord,
    Initialize,
    LeaseLost,
    LegacyShutdown,
    ProcessRecords,
    Record,
    ShardEnded,
    ShutdownRequested,
    Status,
)

__all__ = [
    "ACTION_MESSAGES",
    "ActionCompleted",
    "ActionMessage",
    "AnyRecord",
    "ChannelMessage",
    "ChannelOffer",
    "ChannelReceived",
    "CheckpointErrorName",
    "CheckpointReply",
    "CheckpointRequest",
    "CheckpointRequested",
    "ChildMessage",
    "Conversation",
    "ConversationEvent",
    "DaemonMessage",
    "DeadLetterRequest",
    "EncodedRecord",
    "Initialize",
    "LeaseLost",
    "LegacyShutdown",
    "LocalProtocolError",
    "LogLine",
    "MetricLine",
    "NoiseLine",
    "NoiseSkipped",
    "ProcessRecords",
    "ProtocolError",
    "Record",
    "RecordColumns",
    "RemoteProtocolError",
    "ShardEnded",
    "ShutdownRequested",
    "Status",
    "decode_child_line",
    "decode_daemon_line",
    "encode_child_message",
    "encode_daemon_message",
    "payload_bytes",
]
