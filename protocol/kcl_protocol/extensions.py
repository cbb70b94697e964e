"""kcl-daemon's protocol extension: a log/metric channel from the child to the daemon.

The daemon offers it in ``initialize`` with one extra field, which the Java daemon never sends and old
children (amazon_kclpy, aws-kcl, ours before the channel) ignore::

    {"action":"initialize", ..., "channel":["log","metric"]}

The value is a list of the actions offered (a new kind of line gets a new name, so the list is the
version), never an object: amazon_kclpy decodes every JSON object of a daemon line as a message and
fails on one without an ``action`` key.

A child that saw the offer may write, at any time while an action is outstanding (before its status)::

    {"action":"log","level":"info","message":"..."}
    {"action":"metric","name":"orders","value":3,"unit":"Count","dimensions":{"region":"eu"}}

When the daemon also offers ``deadLetter`` (``poisonRecordPolicy = DEAD_LETTER``), a processor may hand a
record of the batch it is processing to the dead-letter destination itself, and go on::

    {"action":"deadLetter","sequenceNumber":"4965...","subSequenceNumber":0,"reason":"bad JSON"}

The daemon writes the record before it reads the child's next line, so a checkpoint the child asks for
afterwards never passes a record whose dead letter is not written.

These lines get no answer. Here only the JSON types are checked; what the daemon accepts (levels,
name syntax, units, limits, rate) is its policy (``kcl_daemon.core.lifecycle.child_channel``). A
malformed channel line is noise, like any other unusable line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final

CHANNEL_KEY: Final = "channel"
CHANNEL_ACTIONS: Final = ("log", "metric")
DEAD_LETTER_ACTION: Final = "deadLetter"


@dataclass(frozen=True, slots=True)
class ChannelOffer:
    actions: tuple[str, ...] = CHANNEL_ACTIONS

    def as_json(self) -> list[str]:
        return list(self.actions)


def parse_offer(value: object) -> ChannelOffer | None:
    """The offer in an ``initialize`` (None when absent or not understood: then the channel is off)."""
    if not isinstance(value, list):
        return None
    return ChannelOffer(tuple(a for a in value if isinstance(a, str)))


@dataclass(frozen=True, slots=True)
class LogLine:
    action: ClassVar[str] = "log"
    level: str
    message: str


@dataclass(frozen=True, slots=True)
class MetricLine:
    action: ClassVar[str] = "metric"
    name: str
    value: float
    unit: str | None
    dimensions: tuple[tuple[str, str], ...]  # in the order the child wrote them


ChannelMessage = LogLine | MetricLine


@dataclass(frozen=True, slots=True)
class DeadLetterRequest:
    """The processor hands one record of its current batch to the dead-letter destination."""

    action: ClassVar[str] = DEAD_LETTER_ACTION
    sequence_number: str
    sub_sequence_number: int
    reason: str


def decode_dead_letter(obj: dict[str, object]) -> DeadLetterRequest:
    seq, sub, reason = obj.get("sequenceNumber"), obj.get("subSequenceNumber", 0), obj.get("reason", "")
    if not isinstance(seq, str):
        raise ValueError("sequenceNumber must be a string")
    if sub is None:
        sub = 0
    if isinstance(sub, bool) or not isinstance(sub, int):
        raise ValueError("subSequenceNumber must be an integer or null")
    if not isinstance(reason, str):
        raise ValueError("reason must be a string")
    return DeadLetterRequest(seq, sub, reason)


def encode_dead_letter(request: DeadLetterRequest) -> dict[str, object]:
    return {
        "action": DEAD_LETTER_ACTION,
        "sequenceNumber": request.sequence_number,
        "subSequenceNumber": request.sub_sequence_number,
        "reason": request.reason,
    }


def decode_channel(obj: dict[str, object]) -> ChannelMessage:
    """A ``log`` or ``metric`` object; ValueError says what is wrong with its types."""
    if obj.get("action") == "log":
        level, message = obj.get("level", "info"), obj.get("message")
        if not isinstance(level, str):
            raise ValueError("level must be a string")
        if not isinstance(message, str):
            raise ValueError("message must be a string")
        return LogLine(level, message)
    name, value, unit, dims = obj.get("name"), obj.get("value"), obj.get("unit"), obj.get("dimensions")
    if not isinstance(name, str):
        raise ValueError("name must be a string")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("value must be a number")
    if unit is not None and not isinstance(unit, str):
        raise ValueError("unit must be a string or null")
    if dims is None:
        dims = {}
    if not isinstance(dims, dict) or not all(isinstance(v, str) for v in dims.values()):
        raise ValueError("dimensions must be an object of strings")
    return MetricLine(name, float(value), unit, tuple((str(k), v) for k, v in dims.items()))


def encode_channel(message: ChannelMessage) -> dict[str, object]:
    if isinstance(message, LogLine):
        return {"action": "log", "level": message.level, "message": message.message}
    return {
        "action": "metric",
        "name": message.name,
        "value": message.value,
        "unit": message.unit,
        "dimensions": dict(message.dimensions),
    }
