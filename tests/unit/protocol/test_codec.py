"""kcl_protocol codec: round trips, the always-present keys, and lenient parsing of child lines."""

from __future__ import annotations

import base64

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_protocol import (
    CheckpointReply,
    CheckpointRequest,
    EncodedRecord,
    Initialize,
    LeaseLost,
    LegacyShutdown,
    NoiseLine,
    ProcessRecords,
    Record,
    ShardEnded,
    ShutdownRequested,
    Status,
    decode_child_line,
    decode_daemon_line,
    encode_child_message,
    encode_daemon_message,
)

seq_numbers = st.one_of(
    st.from_regex(r"[1-9][0-9]{0,55}", fullmatch=True), st.sampled_from(["TRIM_HORIZON", "LATEST"])
)
optional_int = st.one_of(st.none(), st.integers(min_value=0, max_value=2**63 - 1))
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
records = st.builds(
    Record,
    data=st.binary(max_size=64),
    partition_key=text,
    sequence_number=st.from_regex(r"[1-9][0-9]{0,55}", fullmatch=True),
    sub_sequence_number=st.integers(min_value=0, max_value=10_000),
    approximate_arrival_timestamp=st.integers(min_value=0, max_value=2**53),
)
daemon_messages = st.one_of(
    st.builds(
        Initialize,
        shard_id=text,
        sequence_number=st.one_of(st.none(), seq_numbers),
        sub_sequence_number=optional_int,
    ),
    st.builds(
        ProcessRecords, records=st.lists(records, max_size=5).map(tuple), millis_behind_latest=optional_int
    ),
    st.builds(
        CheckpointReply,
        sequence_number=st.one_of(st.none(), seq_numbers),
        sub_sequence_number=optional_int,
        error=st.one_of(st.none(), st.sampled_from(["ThrottlingException", "ShutdownException"])),
    ),
    st.just(LeaseLost()),
    st.just(ShardEnded()),
    st.just(ShutdownRequested()),
    st.builds(LegacyShutdown, reason=st.sampled_from(["TERMINATE", "ZOMBIE"])),
)
child_messages = st.one_of(
    st.builds(
        Status, response_for=st.sampled_from(["initialize", "processRecords", "leaseLost", "shardEnded"])
    ),
    st.builds(
        CheckpointRequest, sequence_number=st.one_of(st.none(), seq_numbers), sub_sequence_number=optional_int
    ),
)


@given(daemon_messages)
def test_daemon_messages_round_trip(message: object) -> None:
    line = encode_daemon_message(message)  # type: ignore[arg-type]
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and line.strip()
    assert decode_daemon_line(line) == message


@given(child_messages)
def test_child_messages_round_trip(message: object) -> None:
    assert decode_child_line(encode_child_message(message)) == message  # type: ignore[arg-type]


@given(st.lists(records, min_size=1, max_size=5))
def test_every_record_carries_action_record_and_every_key(recs: list[Record]) -> None:
    obj = orjson.loads(encode_daemon_message(ProcessRecords(tuple(recs), None)))
    assert obj["millisBehindLatest"] is None
    for record in obj["records"]:
        assert record["action"] == "record"
        assert set(record) == {
            "data",
            "partitionKey",
            "sequenceNumber",
            "approximateArrivalTimestamp",
            "subSequenceNumber",
            "action",
        }


def test_nulls_are_written_not_omitted() -> None:
    assert encode_daemon_message(Initialize("shardId-1", None, None)) == (
        b'{"action":"initialize","shardId":"shardId-1","sequenceNumber":null,"subSequenceNumber":null}\n'
    )
    assert encode_daemon_message(CheckpointReply(None, None, None)) == (
        b'{"action":"checkpoint","sequenceNumber":null,"subSequenceNumber":null,"error":null}\n'
    )


def test_payload_is_padded_standard_base64_and_text_is_utf8() -> None:
    line = encode_daemon_message(ProcessRecords((Record(b"\xfb\xff", "cl\u00e9", "1", 0, 5),), 0))
    assert b'"data":"+/8="' in line
    assert "clé".encode() in line  # UTF-8, not \u escapes


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b'{"action": "status", "responseFor": "initialize"}\n', Status("initialize")),
        (b'{"action":"status"}', Status(None)),
        (b'{"action":"checkpoint","sequenceNumber":"12"}', CheckpointRequest("12", None)),  # aws-kcl shape
        (
            b'{"action":"checkpoint","error":null,"sequenceNumber":"12"}',
            CheckpointRequest("12", None),
        ),  # .NET
        (b'{"action":"checkpoint"}', CheckpointRequest(None, None)),  # Node: undefined seq
        (b'{"action":"checkpoint","sequenceNumber":12,"subSequenceNumber":"3"}', CheckpointRequest("12", 3)),
        (
            b'{"action":"checkpoint","sequenceNumber":"9","subSequenceNumber":2,"extra":{"a":1}}\r\n',
            CheckpointRequest("9", 2),
        ),
    ],
)
def test_child_lines_accepted_leniently(line: bytes, expected: object) -> None:
    assert decode_child_line(line) == expected


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"\n", "blank line"),
        (b"", "blank line"),
        (b"   \t\n", "whitespace-only line"),
        (b"Was throttled while checkpointing\n", "not JSON"),
        (b"[1, 2]", "JSON but not an object"),
        (b'{"noAction": true}', "JSON object without an action"),
        (b'{"action": "initialize"}', "action 'initialize' is not one a child sends"),
        (b'{"action": "bogus"}', "action 'bogus' is not one a child sends"),
        (b'{"action":"status","responseFor":5}', "malformed status message"),
        (b"\xff\xfe garbage", "not JSON"),
    ],
)
def test_noise_is_reported_never_raised(line: bytes, reason: str) -> None:
    result = decode_child_line(line)
    assert isinstance(result, NoiseLine)
    assert result.reason.startswith(reason)


def test_noise_preview_is_bounded() -> None:
    result = decode_child_line(b"x" * 100_000)
    assert isinstance(result, NoiseLine)
    assert len(result.preview) < 300


@pytest.mark.parametrize(
    "line",
    [
        b"not json",
        b"[]",
        b'{"action":"processRecords","records":[{"data":"aGk="}],"millisBehindLatest":0}',
        b'{"action":"processRecords","records":[]}',
        b'{"action":"initialize","shardId":"s","sequenceNumber":null}',
        b'{"action":"processRecords","records":[{"action":"record","data":"!!","partitionKey":"k",'
        b'"sequenceNumber":"1","subSequenceNumber":0,"approximateArrivalTimestamp":1}],"millisBehindLatest":0}',
        b'{"action":"nope"}',
    ],
)
def test_strict_daemon_decoder_rejects_what_clients_would_crash_on(line: bytes) -> None:
    with pytest.raises(ValueError, match=r"."):
        decode_daemon_line(line)


BIG = "49590338271490256608559692538361571095921575989136588898"


@pytest.mark.parametrize(
    ("line", "sequence", "sub", "malformed"),
    [
        (b'{"action":"checkpoint","sequenceNumber":"5","subSequenceNumber":1.0}', "5", 1, None),
        (b'{"action":"checkpoint","sequenceNumber":"5","subSequenceNumber":"7"}', "5", 7, None),
        (b'{"action":"checkpoint","sequenceNumber":' + BIG.encode() + b"}", BIG, None, None),
        (b'{"action":"checkpoint","sequenceNumber":"5","subSequenceNumber":1.5}', "5", None, "not a whole"),
        (b'{"action":"checkpoint","subSequenceNumber":18446744073709551617}', None, None, "long range"),
        (b'{"action":"checkpoint","subSequenceNumber":' + b"9" * 5000 + b"}", None, None, "long range"),
        (b'{"action":"checkpoint","subSequenceNumber":{"n":1}}', None, None, "got dict"),
        (b'{"action":"checkpoint","sequenceNumber":true}', None, None, "got bool"),
        (b'{"action":"checkpoint","sequenceNumber":1e5,"subSequenceNumber":[1]}', None, None, "an array"),
        (b'{"action":"checkpoint","subSequenceNumber":NaN}', None, None, "not a whole"),
    ],
)
def test_a_checkpoint_request_is_never_noise(
    line: bytes, sequence: str | None, sub: int | None, malformed: str | None
) -> None:
    decoded = decode_child_line(line)
    assert isinstance(decoded, CheckpointRequest)
    assert (decoded.sequence_number, decoded.sub_sequence_number) == (sequence, sub)
    if malformed is None:
        assert decoded.malformed is None
    else:
        assert decoded.malformed is not None and malformed in decoded.malformed
        assert len(decoded.malformed) < 600, "huge values are shortened"


@given(st.binary(max_size=300))
def test_a_records_size_is_its_payload_length_without_decoding(payload: bytes) -> None:
    encoded = EncodedRecord(base64.b64encode(payload).decode(), "pk", "1", 0, 0)
    assert encoded.size == len(payload) == Record(payload, "pk", "1", 0, 0).size
