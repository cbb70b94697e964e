"""What the daemon accepts on a child's log/metric channel (pure: message and state in, verdict out).

Rules, per child:

* a line costs one token of a bucket refilled at ``lines_per_s`` up to ``burst``; without a token the
  line is dropped (``rate_limited``), so a chatty child cannot flood the logs or the metrics;
* ``log``: level one of debug, info, warn/warning, error, critical/fatal (any case); the message is cut
  at ``max_message_chars``;
* ``metric``: name ``[A-Za-z_][A-Za-z0-9_.:/-]*`` up to 128 characters, a finite value, a CloudWatch
  unit (or none: ``None``), at most ``max_dimensions`` dimensions with names of the same syntax and values
  of 1-255 characters; at most ``max_series`` distinct (name, unit, dimensions) per child, more are
  dropped (``cardinality``);
* anything else is dropped as ``invalid``, with the reason.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field
from typing import Final

from kcl_protocol.extensions import ChannelMessage, LogLine

LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL,
}
UNITS: Final = frozenset(
    {
        "Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes",
        "Terabytes", "Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count",
        "Bytes/Second", "Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second", "Terabytes/Second",
        "Bits/Second", "Kilobits/Second", "Megabits/Second", "Gigabits/Second", "Terabits/Second",
        "Count/Second", "None",
    }
)  # fmt: skip
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/-]{0,127}")

Series = tuple[str, str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True, slots=True)
class ChannelLimits:
    lines_per_s: float = 100.0
    burst: float = 200.0
    max_message_chars: int = 8192
    max_dimensions: int = 5
    max_series: int = 50


@dataclass(frozen=True, slots=True)
class ChannelState:
    tokens: float
    updated_at: float
    series: frozenset[Series] = field(default_factory=frozenset)

    @classmethod
    def start(cls, limits: ChannelLimits, now: float) -> ChannelState:
        return cls(limits.burst, now)


@dataclass(frozen=True, slots=True)
class AcceptedLog:
    level: int
    level_name: str
    message: str


@dataclass(frozen=True, slots=True)
class AcceptedMetric:
    name: str
    value: float
    unit: str
    dimensions: tuple[tuple[str, str], ...]  # sorted by name


@dataclass(frozen=True, slots=True)
class Dropped:
    reason: str  # invalid, rate_limited, cardinality
    detail: str


Verdict = AcceptedLog | AcceptedMetric | Dropped


def decide(
    message: ChannelMessage, state: ChannelState, now: float, limits: ChannelLimits = ChannelLimits()
) -> tuple[Verdict, ChannelState]:
    elapsed = max(now - state.updated_at, 0.0)
    tokens = min(limits.burst, state.tokens + elapsed * limits.lines_per_s)
    if tokens < 1.0:
        return Dropped("rate_limited", f"more than {limits.lines_per_s:g} lines/s"), ChannelState(
            tokens, now, state.series
        )
    state = ChannelState(tokens - 1.0, now, state.series)
    if isinstance(message, LogLine):
        level = LEVELS.get(message.level.lower())
        if level is None:
            return Dropped("invalid", f"log level {message.level!r} is not one of {sorted(LEVELS)}"), state
        text = message.message
        if len(text) > limits.max_message_chars:
            text = text[: limits.max_message_chars] + f"... ({len(message.message)} chars)"
        return AcceptedLog(level, logging.getLevelName(level), text), state
    problem = _metric_problem(message.name, message.value, message.unit, message.dimensions, limits)
    if problem is not None:
        return Dropped("invalid", f"metric {message.name[:128]!r}: {problem}"), state
    unit = message.unit or "None"
    dimensions = tuple(sorted(message.dimensions))
    series: Series = (message.name, unit, dimensions)
    if series not in state.series:
        if len(state.series) >= limits.max_series:
            return Dropped(
                "cardinality", f"metric {message.name!r}: more than {limits.max_series} series"
            ), state
        state = ChannelState(state.tokens, now, state.series | {series})
    return AcceptedMetric(message.name, message.value, unit, dimensions), state


def _metric_problem(
    name: str,
    value: float,
    unit: str | None,
    dimensions: tuple[tuple[str, str], ...],
    limits: ChannelLimits,
) -> str | None:
    if not _NAME.fullmatch(name):
        return "the name must match [A-Za-z_][A-Za-z0-9_.:/-]* (at most 128 characters)"
    if not math.isfinite(value):
        return f"the value {value} is not a finite number"
    if unit is not None and unit not in UNITS:
        return f"unit {unit!r} is not a CloudWatch unit"
    if len(dimensions) > limits.max_dimensions:
        return f"{len(dimensions)} dimensions, at most {limits.max_dimensions}"
    for key, val in dimensions:
        if not _NAME.fullmatch(key):
            return f"dimension name {key[:64]!r} must match [A-Za-z_][A-Za-z0-9_.:/-]*"
        if not 1 <= len(val) <= 255:
            return f"dimension {key} has a value of {len(val)} characters (1-255)"
    return None
