"""The child's log/metric channel: the daemon's policy (pure) and the codec. One shard consumer whose real
child uses the channel: tests/component/lifecycle/test_child_channel.py."""

from __future__ import annotations

import logging
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.lifecycle.child_channel import (
    AcceptedLog,
    AcceptedMetric,
    ChannelLimits,
    ChannelState,
    Dropped,
    decide,
)
from kcl_protocol import (
    ChannelOffer,
    Initialize,
    LogLine,
    MetricLine,
    NoiseLine,
    decode_child_line,
    decode_daemon_line,
    encode_daemon_message,
)

LIMITS = ChannelLimits(lines_per_s=10, burst=3, max_message_chars=10, max_dimensions=2, max_series=2)


def fresh() -> ChannelState:
    return ChannelState.start(LIMITS, 0.0)


@pytest.mark.parametrize(
    ("message", "verdict"),
    [
        (LogLine("INFO", "hello"), AcceptedLog(logging.INFO, "INFO", "hello")),
        (LogLine("warn", "x"), AcceptedLog(logging.WARNING, "WARNING", "x")),
        (LogLine("fatal", "x"), AcceptedLog(logging.CRITICAL, "CRITICAL", "x")),
        (LogLine("info", "a" * 11), AcceptedLog(logging.INFO, "INFO", "a" * 10 + "... (11 chars)")),
        (LogLine("loud", "x"), Dropped("invalid", "log level 'loud' is not one of " + str(sorted(
            ["debug", "info", "warn", "warning", "error", "critical", "fatal"])))),
        (MetricLine("orders", 3, "Count", (("z", "1"), ("a", "2"))),
         AcceptedMetric("orders", 3, "Count", (("a", "2"), ("z", "1")))),
        (MetricLine("latency", 1.5, None, ()), AcceptedMetric("latency", 1.5, "None", ())),
    ],
)  # fmt: skip
def test_accepted_and_invalid_lines(message: LogLine | MetricLine, verdict: object) -> None:
    assert decide(message, fresh(), 0.0, LIMITS)[0] == verdict


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        (MetricLine("9lives", 1, None, ()), "the name must match"),
        (MetricLine("a b", 1, None, ()), "the name must match"),
        (MetricLine("n", math.inf, None, ()), "not a finite number"),
        (MetricLine("n", math.nan, None, ()), "not a finite number"),
        (MetricLine("n", 1, "Apples", ()), "not a CloudWatch unit"),
        (MetricLine("n", 1, None, (("a", "1"), ("b", "2"), ("c", "3"))), "3 dimensions, at most 2"),
        (MetricLine("n", 1, None, (("a", ""),)), "value of 0 characters"),
        (MetricLine("n", 1, None, (("bad key", "v"),)), "dimension name"),
    ],
)
def test_invalid_metrics_say_why(message: MetricLine, problem: str) -> None:
    verdict = decide(message, fresh(), 0.0, LIMITS)[0]
    assert isinstance(verdict, Dropped) and verdict.reason == "invalid" and problem in verdict.detail


def test_series_beyond_the_limit_are_dropped_but_known_ones_go_on() -> None:
    state = fresh()
    verdicts = []
    for second, name in enumerate(("a", "b", "c", "a")):
        verdict, state = decide(MetricLine(name, 1, None, ()), state, float(second), LIMITS)
        verdicts.append(type(verdict).__name__ if not isinstance(verdict, Dropped) else verdict.reason)
    assert verdicts == ["AcceptedMetric", "AcceptedMetric", "cardinality", "AcceptedMetric"]


@given(st.lists(st.floats(min_value=0, max_value=0.5), min_size=1, max_size=60))
def test_rate_limit_never_lets_more_than_burst_plus_rate_times_time(gaps: list[float]) -> None:
    state, now, accepted = fresh(), 0.0, 0
    for gap in gaps:
        now += gap
        verdict, state = decide(LogLine("info", "x"), state, now, LIMITS)
        accepted += not isinstance(verdict, Dropped)
        assert isinstance(verdict, AcceptedLog) or verdict == Dropped("rate_limited", "more than 10 lines/s")
    assert accepted <= LIMITS.burst + LIMITS.lines_per_s * now + 1e-9


# --- codec ------------------------------------------------------------------------------------------


def test_offer_round_trips_and_is_a_list() -> None:
    line = encode_daemon_message(Initialize("shardId-1", "LATEST", 0, channel=ChannelOffer()))
    assert line.endswith(b',"channel":["log","metric"]}\n')
    assert decode_daemon_line(line) == Initialize("shardId-1", "LATEST", 0, channel=ChannelOffer())
    plain = encode_daemon_message(Initialize("shardId-1", "LATEST", 0))
    assert b"channel" not in plain and decode_daemon_line(plain).channel is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("line", "decoded"),
    [
        (b'{"action":"log","message":"hi"}', LogLine("info", "hi")),
        (b'{"action":"metric","name":"n","value":2}', MetricLine("n", 2.0, None, ())),
        (b'{"action":"metric","name":"n","value":"2"}', None),
        (b'{"action":"metric","name":"n","value":true}', None),
        (b'{"action":"log","level":3,"message":"x"}', None),
        (b'{"action":"metric","name":"n","value":1,"dimensions":{"k":1}}', None),
    ],
)
def test_channel_lines_decode_or_are_noise(line: bytes, decoded: object) -> None:
    result = decode_child_line(line)
    if decoded is None:
        assert isinstance(result, NoiseLine) and result.reason.startswith("malformed")
    else:
        assert result == decoded
