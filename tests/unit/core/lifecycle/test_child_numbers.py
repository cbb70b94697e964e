"""Numbers from children have no size or shape that can crash anything (issue 17, point 5).

Every numeric field a child may send (a checkpoint's ``sequenceNumber`` and ``subSequenceNumber``, a
metric's ``value``) is fed huge, negative, fractional, exponent, NaN/Infinity, non-ASCII and
zero-padded spellings, as JSON numbers and as strings, through the codec and on into the checkpoint
rules and the channel policy: a checkpoint is written, found already written or refused with a Java
exception name; a channel line is accepted, refused with a reason or treated as noise; nothing raises.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcl_daemon.core.lifecycle.checkpoint_rules import (
    AlreadyCheckpointed,
    CheckpointBounds,
    RefuseCheckpoint,
    WriteCheckpoint,
    decide_checkpoint,
)
from kcl_daemon.core.lifecycle.child_channel import ChannelLimits, ChannelState, decide
from kcl_daemon.core.sequence import SHARD_END, ExtendedSequenceNumber
from kcl_protocol import CheckpointErrorName, CheckpointRequest
from kcl_protocol.codec import NoiseLine, decode_child_line
from kcl_protocol.extensions import LogLine, MetricLine
from tests.support.hypothesis_profiles import examples

JAVA_NAMES = {name.value for name in CheckpointErrorName}
ILLEGAL = CheckpointErrorName.ILLEGAL_ARGUMENT.value

#: Spellings of numbers, as they would appear in the JSON text (unquoted) of a child's line.
odd_numbers = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.integers(min_value=1, max_value=6000).map(lambda n: "9" * n),  # beyond int()'s 4300 digits
    st.integers(min_value=1, max_value=200).map(lambda n: "-" + "9" * n),
    st.integers(min_value=1, max_value=300).map(lambda n: "0" * n + "7"),  # zero-padded (as a string)
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(
        ["1e400", "-1e400", "1E5", "1.0", "1.5", "0.0", "-0", "1e-400", "NaN", "Infinity", "-Infinity"]
    ),
    st.sampled_from(["1e100000000", "9" * 5000 + ".0", "1" + "0" * 130 + "e1"]),
)

#: Strings a child may put where a number belongs.
odd_strings = st.one_of(
    odd_numbers,
    st.sampled_from(
        ["", " ", "\u0663\u0663", "\uff11\uff12", "0x10", "1_000", "++1", "--5", "7 ", "\u0663", "9" * 130]
    ),
    st.text(max_size=20),
)


def _field(value: str, quoted: bool) -> str:
    return json.dumps(value) if quoted else value


def _valid_json_number(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


LARGEST = ExtendedSequenceNumber("49590338271490256608559692538361571095921575989136588898")
BOUNDS = [
    CheckpointBounds(ExtendedSequenceNumber("TRIM_HORIZON"), LARGEST),
    CheckpointBounds(ExtendedSequenceNumber("5"), ExtendedSequenceNumber("9" * 129, 3)),
    CheckpointBounds(
        ExtendedSequenceNumber("100"),
        SHARD_END,
        at_shard_end=True,
        last_record_of_shard=ExtendedSequenceNumber("200"),
    ),
]  # fmt: skip


def _answer(request: CheckpointRequest, bounds: CheckpointBounds) -> object:
    """What the shard consumer does with a decoded request: a malformed one is refused at once."""
    if request.malformed:
        return RefuseCheckpoint(CheckpointErrorName.ILLEGAL_ARGUMENT, request.malformed)
    return decide_checkpoint(request.sequence_number, request.sub_sequence_number, bounds)


def _check_decision(decision: object) -> None:
    assert isinstance(decision, WriteCheckpoint | AlreadyCheckpointed | RefuseCheckpoint)
    if isinstance(decision, RefuseCheckpoint):
        assert decision.java_name in JAVA_NAMES and len(decision.reason) < 1000, decision


@settings(max_examples=examples(400), deadline=None)
@given(
    sequence=st.one_of(st.none(), odd_strings),
    sequence_quoted=st.booleans(),
    sub=st.one_of(st.none(), odd_strings),
    sub_quoted=st.booleans(),
    bounds=st.sampled_from(BOUNDS),
)
def test_every_checkpoint_request_is_decided_or_refused_with_a_java_name(
    sequence: str | None, sequence_quoted: bool, sub: str | None, sub_quoted: bool, bounds: CheckpointBounds
) -> None:
    parts = ['"action":"checkpoint"']
    if sequence is not None:
        parts.append(
            f'"sequenceNumber":{_field(sequence, sequence_quoted or not _valid_json_number(sequence))}'
        )
    if sub is not None:
        parts.append(f'"subSequenceNumber":{_field(sub, sub_quoted or not _valid_json_number(sub))}')
    line = ("{" + ",".join(parts) + "}").encode()
    decoded = decode_child_line(line)
    assert isinstance(decoded, CheckpointRequest), "a checkpoint request is never noise"
    _check_decision(_answer(decoded, bounds))


@settings(max_examples=examples(300), deadline=None)
@given(value=odd_strings, quoted=st.booleans())
def test_every_metric_value_is_accepted_refused_or_noise(value: str, quoted: bool) -> None:
    text = _field(value, quoted or not _valid_json_number(value))
    line = ('{"action":"metric","name":"orders","value":' + text + ',"unit":"Count"}').encode()
    decoded = decode_child_line(line)
    assert isinstance(decoded, NoiseLine | MetricLine | LogLine)
    if isinstance(decoded, MetricLine):
        limits = ChannelLimits()
        decide(decoded, ChannelState.start(limits, 0.0), 0.0, limits)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # a 5,000-digit sequence number, as a string and as a JSON integer: refused, never a traceback
        (b'{"action":"checkpoint","sequenceNumber":"' + b"9" * 5000 + b'"}', "IllegalArgumentException"),
        (b'{"action":"checkpoint","sequenceNumber":' + b"9" * 5000 + b"}", "IllegalArgumentException"),
        (b'{"action":"checkpoint","sequenceNumber":"' + b"9" * 130 + b'"}', "IllegalArgumentException"),
        (b'{"action":"checkpoint","sequenceNumber":"5","subSequenceNumber":"\xd9\xa3"}', ILLEGAL),
        (b'{"action":"checkpoint","sequenceNumber":"5","subSequenceNumber":1e100000000}', ILLEGAL),
        (b'{"action":"checkpoint","sequenceNumber":"0000000000007"}', None),
        (b'{"action":"checkpoint","sequenceNumber":"6","x":' + b"[" * 900 + b"]" * 900 + b"}", None),
    ],
)  # fmt: skip
def test_hostile_checkpoint_requests(line: bytes, expected: str | None) -> None:
    decoded = decode_child_line(line)
    assert isinstance(decoded, CheckpointRequest)
    decision = _answer(decoded, BOUNDS[1])
    _check_decision(decision)
    if expected is None:
        assert isinstance(decision, WriteCheckpoint), decision
    else:
        assert isinstance(decision, RefuseCheckpoint) and decision.java_name == expected


@pytest.mark.parametrize("depth", [2000, 100_000])
def test_a_line_nested_deeper_than_the_stack_is_noise(depth: int) -> None:
    decoded = decode_child_line(b"[" * depth + b"]" * depth)
    assert isinstance(decoded, NoiseLine)
    decoded = decode_child_line(b'{"action":"metric","value":' + b"[" * depth + b"]" * depth + b"}")
    assert isinstance(decoded, NoiseLine)


@given(
    a=st.integers(min_value=0, max_value=10**200),
    b=st.integers(min_value=0, max_value=10**200),
    pad_a=st.integers(min_value=0, max_value=3),
    pad_b=st.integers(min_value=0, max_value=3),
)
def test_sequence_numbers_order_by_value_whatever_their_size_and_padding(
    a: int, b: int, pad_a: int, pad_b: int
) -> None:
    x = ExtendedSequenceNumber("0" * pad_a + str(a))
    y = ExtendedSequenceNumber("0" * pad_b + str(b))
    assert (x < y) == (a < b) and (y < x) == (b < a)
    huge = ExtendedSequenceNumber("9" * 6000)
    assert x < huge and huge < SHARD_END
